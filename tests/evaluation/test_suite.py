"""The evaluation-suite skeleton: registry, the four stages, the report files."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from importlib.metadata import EntryPoint

import pytest
import torch
from torch import nn

from complexformer.config import ConfigBase, field_defaults, field_docs
from complexformer.evaluation.cli import register_suites
from complexformer.evaluation.suite import (
    SUITES,
    SUITES_GROUP,
    EvalRun,
    Suite,
    _defaults_said,
    data_spec,
    fmt_number,
    get_suite,
    load_suite_entry_points,
    model_info,
    register_suite,
)
from complexformer.runtime import plugins


def test_every_suite_is_registered_with_its_options():
    register_suites()
    assert {"ppl", "text", "code", "math", "extrapolation", "heads"} <= set(SUITES)
    for name, cls in SUITES.items():
        assert cls.name == name and cls.description
        fields = set(cls.config_class.field_names())
        assert {opt.field for opt in cls.options} <= fields, name
        assert len({opt.flag for opt in cls.options}) == len(cls.options), name
    assert SUITES["extrapolation"].many_runs and not SUITES["text"].many_runs
    with pytest.raises(ValueError, match=r"unknown evaluation suite 'txt' \(did you mean 'text'"):
        get_suite("txt")


def _evaluate_helps() -> dict[str, str]:
    from complexformer.cli import build_parser

    parser = build_parser()
    evaluate = next(
        a.choices["evaluate"] for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return {flag: a.help for a in evaluate._actions for flag in a.option_strings}


def test_every_suite_option_says_the_default_of_each_suite_that_reads_it():
    """The defaults in evaluate's help are the configs' own, suite by suite; an option one
    suite reads says its field's documentation, so neither is written twice."""
    suites = register_suites()
    helps = _evaluate_helps()
    for name, cls in suites.items():
        defaults = field_defaults(cls.config_class)
        docs = field_docs(cls.config_class)
        for opt in cls.options:
            text, value = helps[opt.flag], defaults[opt.field]
            readers = [n for n, c in suites.items() if any(o.flag == opt.flag for o in c.options)]
            if len(readers) == 1:
                assert text.startswith(docs[opt.field].rstrip(".")), opt.flag
            if value is None:
                continue
            said = " ".join(map(str, value)) if isinstance(value, tuple) else str(value)
            said = said.lower() if isinstance(value, bool) else said
            assert f"default {said}" in text or f"{name} {said}" in text, (name, opt.flag, text)
    assert helps["--temperature"].endswith(
        "default: text 1.0, code 0.8, math 0.0 [text, code, math]"
    )
    assert "default val (text test, math test)" in helps["--split"]
    assert helps["--max-problems"] == "use the first N problems (none: all) [code, math]"
    assert helps["--timeout"] == "sandbox wall-clock seconds per program; default 3.0"


@pytest.mark.parametrize(
    ("defaults", "said"),
    [
        ({"a": 8}, "default 8"),
        ({"a": None}, None),
        ({"a": 0, "b": 0}, "default 0"),
        ({"a": None, "b": None}, None),
        ({"a": "val", "b": "test", "c": "val"}, "default val (b test)"),
        ({"a": 1.0, "b": 0.8}, "default: a 1.0, b 0.8"),
        ({"a": None, "b": "x", "c": None}, "default: b x"),
        ({"a": None, "b": 8, "c": 8, "d": 2}, "default 8 (d 2)"),
        ({"a": (1, 2), "b": False}, "default: a 1 2, b false"),
    ],
)
def test_the_defaults_are_said_by_suite_where_they_differ(defaults, said):
    assert _defaults_said(defaults) == said


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


NOT_A_SUITE = object()


def test_suites_of_the_entry_point_group_are_added_and_a_bad_one_is_left_out(monkeypatch, capsys):
    """A Suite subclass named in SUITES_GROUP joins the registry; one that does not import,
    is not a Suite or is named other than its suite is left out with one warning each."""
    group_eps = [
        EntryPoint("toy", f"{__name__}:_Toy", SUITES_GROUP),
        EntryPoint("missing", "no_such_module_of_complexformer:Suite", SUITES_GROUP),
        EntryPoint("not-a-suite", f"{__name__}:NOT_A_SUITE", SUITES_GROUP),
        EntryPoint("renamed", f"{__name__}:_Toy", SUITES_GROUP),
    ]
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: group_eps if group == SUITES_GROUP else []
    )
    monkeypatch.setattr(plugins, "_warned", set())
    try:
        load_suite_entry_points()
        load_suite_entry_points()  # a second call warns no more
        assert get_suite("toy") is _Toy
        assert list(register_suites())[-1] == "toy"  # no position declared: listed last
        assert "renamed" not in SUITES and "not-a-suite" not in SUITES
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 3, err
        assert err[0].startswith(
            "complexformer: warning: entry point 'missing' (no_such_module_of_complexformer:Suite) "
            "of group complexformer.suites is left out: ModuleNotFoundError"
        ), err[0]
        assert "'not-a-suite'" in err[1] and "is not a Suite subclass" in err[1]
        assert "'renamed'" in err[2] and "named 'toy', not 'renamed'" in err[2]
    finally:
        SUITES.pop("toy", None)


def test_the_lab_adds_the_heads_suite_through_the_entry_point_group():
    from complexformer_lab.evaluation.heads import HeadsSuite

    installed = {ep.name: ep.value for ep in plugins.entry_points(group=SUITES_GROUP)}
    assert installed == {"heads": "complexformer_lab.evaluation.heads:HeadsSuite"}
    suites = register_suites()
    assert suites["heads"] is HeadsSuite
    # the lab's suite takes the place it declares, between the library's own
    assert list(suites)[:7] == ["ppl", "text", "code", "math", "extrapolation", "heads", "lm-eval"]
    del SUITES["heads"]  # as in a process that has not built the evaluate command
    try:
        assert get_suite("heads") is HeadsSuite  # found in the group by name
    finally:
        SUITES["heads"] = HeadsSuite


def test_shared_helpers():
    assert fmt_number(None) == "n/a" and fmt_number(float("nan"), missing="") == ""
    assert fmt_number(1.23456, 2) == "1.23" and fmt_number(0.000123, 2, "g") == "0.00012"

    class _Run:
        train_config = None
        run_dir = "runs/x"

    assert data_spec("text:a.txt", _Run(), "X.data") == "text:a.txt"
    with pytest.raises(ValueError, match="runs/x records no corpus.*set X.data"):
        data_spec(None, _Run(), "X.data")
