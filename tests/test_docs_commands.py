"""Every ``complexformer ...`` command in the README and docs/ (inside code blocks) parses
with today's command line, without an unknown option or a deprecated spelling."""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands() -> list[tuple[str, str]]:
    found = []
    for path in FILES:
        lines, in_code, i = path.read_text(encoding="utf-8").splitlines(), False, 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("```"):
                in_code = not in_code
            elif in_code and line.startswith("complexformer "):
                where, cmd = f"{path.name}:{i + 1}", line
                while cmd.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
                cmd = cmd.split(" #")[0]
                if not any(mark in cmd for mark in ("...", " | ", "[", "COMMAND")):
                    found.append((where, cmd))
            i += 1
    return found


COMMANDS = _commands()


def test_the_docs_hold_commands():
    assert len(COMMANDS) > 50


@pytest.mark.parametrize("where,cmd", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_parses(where, cmd):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            _, unknown = build_parser().parse_known_args(shlex.split(cmd)[1:])
        except SystemExit:
            pytest.fail(f"{where}: {cmd}\n{err.getvalue()}")
    assert not unknown, f"{where}: unknown options {unknown} in {cmd}"
    assert "deprecated" not in err.getvalue(), f"{where}: {err.getvalue()}"
