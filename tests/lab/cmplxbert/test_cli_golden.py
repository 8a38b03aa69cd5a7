"""The lab's CmplxBERT commands build, from fixed command lines, the configs and the options
the earlier code built (recorded in cli_golden.json before the options were declared from the
config fields)."""

import json
import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser
from complexformer_lab.cmplxbert.cli import finetune_config, study_config

GOLDEN = json.loads((Path(__file__).parent / "cli_golden.json").read_text())
CASES = [(command, line) for command in sorted(GOLDEN) for line in sorted(GOLDEN[command])]
CONFIGS = {"cbert-finetune": finetune_config, "cbert-study": study_config}


def _plain(value):
    return json.loads(json.dumps(value, default=list))


@pytest.mark.parametrize(("command", "line"), CASES)
def test_command_line_builds_the_recorded_configs(command, line):
    args = build_parser().parse_args([command, *shlex.split(line)])
    want = GOLDEN[command][line]
    assert _plain({k: getattr(args, k) for k in want["args"]}) == want["args"]
    if command in CONFIGS:
        assert _plain(CONFIGS[command](args).to_dict()) == want["configs"]


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
