"""cbert-complexify builds, from fixed command lines, the configs the earlier code built."""

import json
import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser
from complexformer.cmplxbert.cli import complexify_configs

GOLDEN = json.loads((Path(__file__).parent / "cli_golden.json").read_text())["cbert-complexify"]


@pytest.mark.parametrize("line", sorted(GOLDEN))
def test_complexify_configs_match_recorded(line):
    args = build_parser().parse_args(["cbert-complexify", *shlex.split(line)])
    assert [c.to_dict() for c in complexify_configs(args)] == GOLDEN[line]
