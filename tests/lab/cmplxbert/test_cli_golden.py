"""The lab's CmplxBERT commands build, from fixed command lines, the configs and the options
the earlier code built (recorded in cli_golden.json before the options were declared from the
config fields)."""

import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser
from complexformer_lab.cmplxbert.cli import finetune_config, study_config
from tests.common_testlib import check_recorded_command_line, recorded_command_lines

GOLDEN, CASES = recorded_command_lines(Path(__file__).parent / "cli_golden.json")
CONFIGS = {"cbert-finetune": finetune_config, "cbert-study": study_config}


@pytest.mark.parametrize(("command", "line"), CASES)
def test_command_line_builds_the_recorded_configs(command, line):
    config = CONFIGS.get(command)
    build = None if config is None else (lambda args: config(args).to_dict())
    check_recorded_command_line(GOLDEN, command, line, build)


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
