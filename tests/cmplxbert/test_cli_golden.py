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


def test_config_file_names_the_recipe(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('recipe = "paper"\nr = 4\nwarmup_frac = 0.2\n')
    parser = build_parser()

    def configs(line):
        args = parser.parse_args(["cbert-complexify", *shlex.split(line)])
        return [c.to_dict() for c in complexify_configs(args)]

    base = "--base b --data stdlib --out o"
    by_file = configs(f"{base} --config {path}")
    assert by_file == configs(f"{base} --recipe paper --set r=4 warmup_frac=0.2")
    assert by_file != configs(f"{base} --set r=4 warmup_frac=0.2")
