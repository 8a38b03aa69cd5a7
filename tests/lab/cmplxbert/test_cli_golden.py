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
