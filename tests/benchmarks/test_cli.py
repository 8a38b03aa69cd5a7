"""Every benchmark module and the renderer answer ``--help`` with their ``python -m`` name."""

from __future__ import annotations

import importlib

import pytest

MODULES = ("attention", "train", "complex_attention", "cbert", "retrofit", "render")


@pytest.mark.parametrize("name", MODULES)
def test_help(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exc:
        module.build_parser().parse_args(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m benchmarks.{name}")
    assert "--out-md" not in out  # measuring and rendering are separate steps


@pytest.mark.parametrize("name", MODULES[:5])
def test_measuring_scripts_have_json_output(name):
    module = importlib.import_module(f"benchmarks.{name}")
    args = module.build_parser().parse_args(["--out-json", "none", "--threads", "1"])
    assert args.out_json == "none" and args.threads == 1
