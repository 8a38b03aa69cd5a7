"""``reproduce --dry-run`` prints the plan it printed before the experiments left the library
and before the scales became data files: ``data/dry_run_before.json`` holds the output of the
same command lines from that earlier code (the working directory written as ``<cwd>``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BEFORE = json.loads((Path(__file__).parent / "data" / "dry_run_before.json").read_text())


@pytest.mark.parametrize("line", sorted(BEFORE))
def test_dry_run_prints_the_plan_it_printed_before(line, tmp_path):
    cmd = [sys.executable, "-m", "complexformer.cli", "reproduce", "--dry-run", "--out", "out"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run(
        [*cmd, *line.split()], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert r.returncode == BEFORE[line]["rc"], r.stderr
    assert r.stdout.replace(str(tmp_path), "<cwd>") == BEFORE[line]["stdout"]
