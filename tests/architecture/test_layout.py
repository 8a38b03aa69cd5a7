"""The tests mirror the package: one folder of ``tests/`` per sub-package of ``complexformer/``,
named as it, and one naming scheme for the files in them (docs/testing.md, *Layout*).

A test file is ``test_<module>.py`` or ``test_<module>_<aspect>.py``, named after the module it
tests, without its folder's name as a prefix (``tests/data/test_blocks.py``, not
``tests/data/test_data_blocks.py``). Helper modules end in ``_testlib.py`` (imported by tests)
or ``_worker.py`` (a process a test starts). The sub-packages are read from the file system,
so a new sub-package without tests, or a folder of tests that mirrors nothing, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "complexformer"
#: The experiments' package; its tests live in ``tests/lab/``.
LAB_PACKAGE = ROOT / "complexformer_lab"
LAB_FOLDER = "lab"

#: Folders of ``tests/`` that test no one sub-package: the import rules and this layout, and
#: the benchmarks (the top-level ``benchmarks/`` package, which mirrors none of ours).
CROSS_CUTTING_FOLDERS = {"architecture", "benchmarks"}
#: Test files at the top level of ``tests/`` besides those of the root modules
#: (``test_config.py`` for ``complexformer/config.py``): journeys through the whole package.
CROSS_CUTTING_FILES = {
    "test_core_without_extras.py",  # every command without the optional packages
    "test_docs_commands.py",  # every command in the README and docs/ parses
    "test_install.py",  # installs compile nothing
    "test_installed_journeys.py",  # the README's journeys on an installed wheel
}
#: A helper at the top level of ``tests/`` that is neither a testlib nor a worker: a script
#: that runs the command line with the optional packages blocked.
TOP_LEVEL_HELPERS = {"blocked_imports.py"}
HELPER_SUFFIXES = ("_testlib.py", "_worker.py")
TEST_NAME = re.compile(r"test_[a-z0-9_]+\.py")

#: What does not follow the layout yet, each entry a path relative to the repository root:
#: a test file named against the scheme, or a mirror folder without a test file. The move of
#: the experiments into ``complexformer_lab/`` (with their tests into ``tests/lab/``) and of the
#: statistics' tests into ``tests/results/`` empties this set; an entry that conforms (or is
#: gone) fails ``test_every_exception_is_still_needed``, so the set only shrinks.
NOT_YET_CONFORMING: set[str] = set()


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _sub_packages(package: Path) -> set[str]:
    return {
        p.name
        for p in package.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and not p.name.startswith(("_", "."))
    }


def _root_modules() -> set[str]:
    """The public root modules (``config``): their tests sit at the top level of ``tests/``."""
    return {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}


def _test_folders() -> list[Path]:
    return sorted(p for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _mirror_problems() -> dict[str, str]:
    """Mirror folders that are missing or hold no test file, by their path."""
    wanted = {f"tests/{name}" for name in _sub_packages(PACKAGE)}
    if (LAB_PACKAGE / "__init__.py").is_file():
        wanted.add(f"tests/{LAB_FOLDER}")
    problems = {}
    for rel in sorted(wanted):
        folder = ROOT / rel
        if not folder.is_dir():
            problems[rel] = "missing"
        elif not any(folder.rglob("test_*.py")):
            problems[rel] = "holds no test file"
    return problems


def _naming_problems() -> dict[str, str]:
    """Python files of ``tests/`` named against the scheme, by their path."""
    problems = {}
    top_level = {f"test_{m}.py" for m in _root_modules()} | CROSS_CUTTING_FILES
    for path in _python_files():
        name, folder = path.name, path.parent.name
        if name in ("__init__.py", "conftest.py") or name.endswith(HELPER_SUFFIXES):
            continue
        if path.parent == TESTS:
            if name not in top_level | TOP_LEVEL_HELPERS:
                problems[_rel(path)] = (
                    "a top-level file is a root module's test_<module>.py, a cross-cutting "
                    "test or a shared helper; the others belong in tests/<sub-package>/"
                )
        elif not TEST_NAME.fullmatch(name):
            problems[_rel(path)] = "neither test_<module>.py nor a *_testlib.py/*_worker.py"
        elif name == f"test_{folder}.py" or name.startswith(f"test_{folder}_"):
            problems[_rel(path)] = f"repeats its folder's name: test_{folder}_... in {folder}/"
    return problems


def _open(problems: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in problems.items() if k not in NOT_YET_CONFORMING}


def test_every_sub_package_has_a_folder_of_tests():
    assert _open(_mirror_problems()) == {}, "add tests/<sub-package>/ with its tests"


def test_every_folder_of_tests_mirrors_a_package_or_is_cross_cutting():
    allowed = _sub_packages(PACKAGE) | CROSS_CUTTING_FOLDERS | {LAB_FOLDER}
    stray = [p.name for p in _test_folders() if p.name not in allowed]
    assert stray == [], (
        f"tests/{stray[0]}/ mirrors no sub-package of complexformer/: move its tests to the "
        "folder of the sub-package they test (or name it in CROSS_CUTTING_FOLDERS, and in "
        "docs/testing.md)"
    )


def test_test_files_are_named_after_their_module_not_their_folder():
    assert _open(_naming_problems()) == {}


def test_every_folder_of_python_files_is_a_package():
    """Test modules are imported as ``tests.<folder>.<module>``: equal file names in two
    folders need an ``__init__.py`` in each."""
    folders = {p.parent for p in _python_files()}
    missing = sorted(_rel(f) for f in folders if not (f / "__init__.py").is_file())
    assert missing == []


def test_every_exception_is_still_needed():
    failing = set(_mirror_problems()) | set(_naming_problems())
    stale = sorted(NOT_YET_CONFORMING - failing)
    assert stale == [], "these conform now (or are gone): remove them from NOT_YET_CONFORMING"
