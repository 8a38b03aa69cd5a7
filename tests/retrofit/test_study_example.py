"""Smoke test of examples/retrofit_study.py on a tiny random Llama: every mode, two seeds, the
report, the heat-map and the reuse of finished runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.common_testlib import write_corpus
from tests.retrofit.retrofit_testlib import build_tiny_base

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "retrofit_study.py"


def test_study_runs_every_mode_and_reuses_finished_runs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("retrofit_study_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = build_tiny_base(tmp_path / "base")
    code = write_corpus(tmp_path / "code", n_lines=1500)
    prose = write_corpus(tmp_path / "prose", n_lines=1200)
    args = ["--base", str(base), "--code-data", code, "--prose-data", prose, "--seeds", "3",
            "--steps", "2", "--seq-len", "16", "--eval-tokens", "64", "--lengths", "16", "32",
            "--extrapolation-tokens", "64", "--out", str(tmp_path / "runs"),
            "--report", str(tmp_path / "report" / "rf")]  # fmt: skip
    assert mod.main(args) == 0
    summary = json.loads((tmp_path / "report" / "rf_study.json").read_text())
    assert set(summary["modes"]) == {"adaptation", "norms", "adaptation+norms"}
    for entry in summary["modes"].values():
        assert entry["code"]["ppl"]["n"] == 3 and entry["code"]["vs_base"]["n"] == 3
    assert "adaptation - norms" in summary["paired"]
    png = (tmp_path / "report" / "rf_heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| base (converted" in (tmp_path / "report" / "rf_study.md").read_text()
    capsys.readouterr()
    assert mod.main(args) == 0  # every run and evaluation is reused
    again = json.loads((tmp_path / "report" / "rf_study.json").read_text())
    assert again["modes"] == summary["modes"]
