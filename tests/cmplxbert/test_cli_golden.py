"""cbert-complexify and cbert-predict build, from fixed command lines, the configs and the
options the earlier code built (recorded in cli_golden.json before the options were declared
from the config fields)."""

import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser
from complexformer.cmplxbert.cli import complexify_configs
from tests.common_testlib import check_recorded_command_line, recorded_command_lines

GOLDEN, CASES = recorded_command_lines(Path(__file__).parent / "cli_golden.json")


@pytest.mark.parametrize(("command", "line"), CASES)
def test_command_line_builds_the_recorded_configs(command, line):
    def configs(args):
        return [c.to_dict() for c in complexify_configs(args)]

    build = configs if command == "cbert-complexify" else None
    check_recorded_command_line(GOLDEN, command, line, build)


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
