"""The suite fails when the README's count of fast tests (benchmarks/results/install.json) is
not the number it collects, in one process and in pytest-xdist's worker processes alike
(``make test`` runs two). Checked on a folder of three tests that uses the hooks of
tests/conftest.py with its own record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(
    folder: Path, recorded: int, workers: int, recording: bool = False
) -> subprocess.CompletedProcess:
    (folder / "install.json").write_text(json.dumps({"ratios": {"fast_tests": recorded}}))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"]
    cmd += ["-n", str(workers)] if workers else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COMPLEXFORMER_RECORDING_TEST_COUNT", None)
    if recording:  # benchmarks.install's .ci/run, which records the count
        env["COMPLEXFORMER_RECORDING_TEST_COUNT"] = "1"
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stale_count_fails_the_session_and_says_what_to_run(tmp_path, workers):
    (tmp_path / "conftest.py").write_text(
        "from pathlib import Path\n"
        "import tests.conftest as suite\n"
        "from tests.conftest import (pytest_collection_finish, pytest_sessionfinish,\n"
        "                            pytest_terminal_summary,\n"
        "                            pytest_xdist_node_collection_finished)\n"
        "suite.INSTALL_RECORD = Path(__file__).with_name('install.json')\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\nmarkers = slow: slow\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_three.py").write_text(
        "import pytest\n"
        "def test_a(): pass\n"
        "def test_b(): pass\n"
        "def test_c(): pass\n"
        "@pytest.mark.slow\n"
        "def test_slow(): pass\n"
    )
    stale = _run(tmp_path, 4, workers)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "the README shows 4 fast tests" in stale.stdout
    assert "the suite collects 3" in stale.stdout and "benchmarks.install" in stale.stdout
    last = stale.stdout.strip().splitlines()[-2:]  # the reason, then the final line
    assert last[0].startswith("FAILED stale README") and "passed" in last[1], last
    recording = _run(tmp_path, 4, workers, recording=True)
    assert recording.returncode == 0 and "README" not in recording.stdout, recording.stdout
    fresh = _run(tmp_path, 3, workers)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "README" not in fresh.stdout
