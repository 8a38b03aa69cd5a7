"""The layering of complexformer.cmplxbert, read from the source: what it may import, that
nothing below it imports it, no hidden imports, no private helpers of complexformer.nn, and
short modules."""

from __future__ import annotations

import ast
from pathlib import Path

import complexformer

ROOT = Path(complexformer.__file__).parent
PKG = ROOT / "cmplxbert"
#: the parts cmplxbert may import: its own, the lower layers it builds on, the shared homes and
#: the command line's vocabulary
ALLOWED = {"cmplxbert", "nn", "training", "data", "losses", "storage", "runtime", "config"}
ALLOWED |= {"results", "pretrained", "cli.options"}
#: optional dependencies that may be imported inside a function
OPTIONAL = {"transformers", "matplotlib", "datasets", "tensorboard"}


def _imports(path: Path):
    """(node, absolute module name, inside a function) of every import of ``path``."""
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base]
        else:
            continue
        p, in_function = parents.get(node), False
        while p is not None:
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function = True
            p = parents.get(p)
        for name in names:
            yield node, name, in_function


def test_cmplxbert_imports_only_lower_layers_and_no_hidden_imports():
    bad, hidden = [], []
    for path in sorted(PKG.glob("*.py")):
        for node, name, in_function in _imports(path):
            parts = name.split(".")
            if parts[0] == "complexformer" and len(parts) > 1:
                sub = ".".join(parts[1:3]) if parts[1] == "cli" else parts[1]
                if sub not in ALLOWED:
                    bad.append(f"{path.name}:{node.lineno} imports {name}")
                if sub == "nn" and any(p.startswith("_") for p in parts[2:]):
                    bad.append(f"{path.name}:{node.lineno} imports the private {name}")
            if in_function and path.name != "cli.py" and parts[0] not in OPTIONAL:
                hidden.append(f"{path.name}:{node.lineno} imports {name} in a function")
    assert not bad, bad
    assert not hidden, hidden


def test_no_private_helper_of_nn_functional_is_called():
    for path in sorted(PKG.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                if isinstance(node.value, ast.Name) and node.value.id == "CF":
                    raise AssertionError(f"{path.name}:{node.lineno} calls CF.{node.attr}")


#: The parts above cmplxbert that read its directories (the one artifact loader), its
#: transformers classes (``hf``) and the command line (``cli/__init__.py``).
ABOVE = (ROOT / "artifacts", ROOT / "hf")
COMMAND = ROOT / "cli" / "__init__.py"


def test_nothing_below_cmplxbert_imports_it():
    users = []
    for path in sorted(ROOT.rglob("*.py")):
        above = any(part in path.parents for part in ABOVE) or path == COMMAND
        if PKG in path.parents or above:
            continue
        for node, name, _ in _imports(path):
            if name.startswith("complexformer.cmplxbert"):
                users.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not users, users


def test_cmplxbert_modules_are_short():
    long = {p.name: n for p in PKG.glob("*.py") if (n := len(p.read_text().splitlines())) > 750}
    assert not long, long
