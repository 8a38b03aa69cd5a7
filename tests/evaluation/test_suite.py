"""The evaluation-suite skeleton: registry, the four stages, the report files."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from complexformer.config import ConfigBase
from complexformer.evaluation import (  # noqa: F401  (registers the suites)
    code_suite,
    extrapolation,
    heads,
    math_suite,
    ppl,
    text,
)
from complexformer.evaluation.suite import (
    SUITES,
    EvalRun,
    Suite,
    data_spec,
    fmt_number,
    get_suite,
    model_info,
    register_suite,
)


def test_every_suite_is_registered_with_its_options():
    assert {"ppl", "text", "code", "math", "extrapolation", "heads"} <= set(SUITES)
    for name, cls in SUITES.items():
        assert cls.name == name and cls.description
        fields = set(cls.config_class.field_names())
        assert {opt.field for opt in cls.options} <= fields, name
        assert len({opt.flag for opt in cls.options}) == len(cls.options), name
    assert SUITES["extrapolation"].many_runs and not SUITES["text"].many_runs
    with pytest.raises(ValueError, match=r"unknown evaluation suite 'txt' \(did you mean 'text'"):
        get_suite("txt")


@dataclass
class _Cfg(ConfigBase):
    scale: float = 2.0


class _Toy(Suite):
    name = "toy"
    config_class = _Cfg
    lists_files = True

    def load_data(self, run):
        return torch.arange(4.0)

    def compute(self, run, data):
        return {"model": model_info(run.model), "value": float((data * self.config.scale).sum())}

    def write_files(self, payload, out):
        (out / "extra.txt").write_text("x")
        return {"extra": str(out / "extra.txt")}

    def markdown(self, payload):
        return f"# toy\n\nvalue {fmt_number(payload['value'], 1)}\n"

    def summary(self, payload):
        return f"toy: {payload['value']}"


def test_the_skeleton_runs_the_stages_and_writes_the_report(tmp_path):
    register_suite(_Toy)
    try:
        lines = []
        model = nn.Linear(3, 2)
        payload = _Toy(_Cfg(scale=3.0), lines.append).run(EvalRun(model), tmp_path)
        assert payload["suite"] == "toy" and payload["config"] == {"scale": 3.0}
        assert payload["value"] == 18.0 and payload["model"]["parameters"] == 8
        assert payload["files"] == {
            "extra": str(tmp_path / "extra.txt"),
            "json": str(tmp_path / "toy.json"),
            "markdown": str(tmp_path / "toy.md"),
        }
        assert json.loads((tmp_path / "toy.json").read_text())["value"] == 18.0
        assert "value 18.0" in (tmp_path / "toy.md").read_text()
        assert lines == ["toy: 18.0"]
        assert _Toy().run(EvalRun(model))["files"] == {}  # nothing written without out_dir
    finally:
        SUITES.pop("toy", None)


def test_shared_helpers():
    assert fmt_number(None) == "n/a" and fmt_number(float("nan"), missing="") == ""
    assert fmt_number(1.23456, 2) == "1.23" and fmt_number(0.000123, 2, "g") == "0.00012"

    class _Run:
        train_config = None
        run_dir = "runs/x"

    assert data_spec("text:a.txt", _Run(), "X.data") == "text:a.txt"
    with pytest.raises(ValueError, match="runs/x records no corpus.*set X.data"):
        data_spec(None, _Run(), "X.data")
