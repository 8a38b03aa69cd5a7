"""Options declared by config fields and ``--config`` files.

The configs that ``train``, ``prepare`` and ``retrofit`` build from a command line are
compared with the ones the same command lines gave before the options were declared by the
config fields
(``data/command_line_configs.json``, written by that earlier code).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from complexformer.cli import build_parser, train_configs
from complexformer.cli.options import build_configs
from complexformer.data.prepare import PrepareConfig
from complexformer.models.config import preset_config

GOLDEN = json.loads((Path(__file__).parent / "data" / "command_line_configs.json").read_text())


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def _train(parser, line: str):
    return train_configs(parser.parse_args(["train", *shlex.split(line)]))


@pytest.mark.parametrize("line", sorted(GOLDEN["train"]))
def test_train_builds_the_configs_it_built_before(parser, line):
    model, train = _train(parser, line)
    assert {"model": model.to_dict(), "train": train.to_dict()} == GOLDEN["train"][line]


@pytest.mark.parametrize("line", sorted(GOLDEN["prepare"]))
def test_prepare_builds_the_config_it_built_before(parser, line):
    args = parser.parse_args(["prepare", *shlex.split(line)])
    cfg = PrepareConfig(**build_configs(args, {"prepare": PrepareConfig})["prepare"])
    assert cfg.__dict__ == GOLDEN["prepare"][line]


@pytest.mark.parametrize("line", sorted(GOLDEN["retrofit"]))
def test_retrofit_builds_the_configs_it_built_before(parser, line):
    from complexformer.retrofit.cli import retrofit_configs

    cfg, train = retrofit_configs(parser.parse_args(["retrofit", *shlex.split(line)]))
    assert {"retrofit": cfg.to_dict(), "train": train.to_dict()} == GOLDEN["retrofit"][line]


def test_config_file_sets_fields_and_loses_to_options_and_set(parser, tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "micro"\nlr = 0.002\nmax_steps = 7\npos_scheme = "rope"\n'
        "[train]\nseed = 5\n[model]\ndropout = 0.25\n"
    )
    model, train = _train(parser, f"--out r --config {path}")
    want = preset_config("micro", pos_scheme="rope", dropout=0.25)
    assert model == want
    assert (train.lr, train.max_steps, train.seed) == (0.002, 7, 5)
    # an option given on the command line wins over the file, --set wins over both
    model, train = _train(parser, f"--out r --config {path} --max-steps 9 --set lr=0.003")
    assert (train.lr, train.max_steps) == (0.003, 9)
    # --preset given wins over the file's preset
    model, _ = _train(parser, f"--out r --config {path} --preset tiny")
    assert model == preset_config("tiny", pos_scheme="rope", dropout=0.25)


def test_config_file_equals_the_same_values_given_with_set(parser, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("n_layer = 3\nwarmup_frac = 0.2\nbf16 = true\n")
    by_file = _train(parser, f"--out r --config {path}")
    by_set = _train(parser, "--out r --set n_layer=3 warmup_frac=0.2 bf16=true")
    assert by_file == by_set


@pytest.mark.parametrize(
    "text, message",
    [
        ("n_layers = 3\n", "n_layer"),  # the closest field is suggested
        ("lr = \n", "not valid TOML"),
        ("[modell]\nn_layer = 2\n", "n_layer"),
    ],
)
def test_config_file_errors_name_the_file_and_the_key(parser, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        _train(parser, f"--out r --config {path}")
    assert str(path) in str(info.value)


def test_missing_config_file_is_named(parser, tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.toml"):
        _train(parser, f"--out r --config {tmp_path / 'nowhere.toml'}")


def test_cli_reports_a_bad_config_file_with_status_2(tmp_path, capsys):
    from complexformer.cli import main

    path = tmp_path / "bad.toml"
    path.write_text("max_step = 3\n")
    assert main(["train", "--out", str(tmp_path / "r"), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "max_steps" in err and str(path) in err


def test_options_declared_by_fields_take_type_default_and_help_from_the_field(parser):
    train = next(
        a
        for a in parser._subparsers._group_actions[0].choices["train"]._actions
        if "--max-steps" in a.option_strings
    )
    assert train.type is int and train.default is None
    assert train.help == "number of optimizer updates; default 2000"
