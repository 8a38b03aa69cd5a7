"""evaluate builds, from fixed command lines, the options and the suites' configs the earlier
code built (recorded in cli_golden.json before the suites' options took their type, help and
defaults from the config fields)."""

from pathlib import Path

import pytest

from complexformer.evaluation.cli import register_suites
from tests.common_testlib import check_recorded_command_line, recorded_command_lines

GOLDEN, CASES = recorded_command_lines(Path(__file__).parent / "cli_golden.json")


@pytest.mark.parametrize(("command", "line"), CASES)
def test_command_line_builds_the_recorded_configs(command, line):
    suites = register_suites()

    def configs(args):
        return [{"suite": n, **c.config_from_args(args).to_dict()} for n, c in suites.items()]

    check_recorded_command_line(GOLDEN, command, line, configs)


def test_the_record_covers_every_option_of_every_suite():
    given = " ".join(GOLDEN["evaluate"])
    flags = {opt.flag for cls in register_suites().values() for opt in cls.options}
    assert {flag for flag in flags if flag not in given.split()} == set()
