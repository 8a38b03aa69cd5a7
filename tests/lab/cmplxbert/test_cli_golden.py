"""cbert-finetune builds, from fixed command lines, the config the earlier code built."""

import json
import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser
from complexformer_lab.cmplxbert.cli import finetune_config

GOLDEN = json.loads((Path(__file__).parent / "cli_golden.json").read_text())["cbert-finetune"]


@pytest.mark.parametrize("line", sorted(GOLDEN))
def test_finetune_config_matches_recorded(line):
    try:
        args = build_parser().parse_args(["cbert-finetune", *shlex.split(line)])
    except SystemExit:
        assert GOLDEN[line] == "parse error"
        return
    assert finetune_config(args).to_dict() == GOLDEN[line]


def test_config_file_names_the_recipe(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('recipe = "paper"\nweight_decay = 0.1\n')
    parser = build_parser()

    def config(line):
        args = parser.parse_args(["cbert-finetune", *shlex.split(line)])
        return finetune_config(args).to_dict()

    base = "--model m --task docstrings --out o"
    by_file = config(f"{base} --config {path}")
    assert by_file == config(f"{base} --recipe paper --set weight_decay=0.1")
    assert by_file != config(f"{base} --set weight_decay=0.1")
