"""Options declared by config fields, named configurations as TOML files, and ``--config``.

The configs that ``train``, ``prepare`` and ``retrofit`` build from a command line are
compared with the ones the same command lines gave before the options were declared by the
config fields
(``data/command_line_configs.json``, written by that earlier code).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from complexformer.cli import build_parser, train_configs
from complexformer.cli.options import build_configs
from complexformer.config import NamedConfigs, field_docs, named_configs
from complexformer.data.prepare import PrepareConfig
from complexformer.models.config import PRESETS, preset_config

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


def test_presets_file_resolves_extends_as_base_plus_differences():
    assert PRESETS["small"] == {**PRESETS["tiny"], "d_ff": 256, "tie_embeddings": False}
    assert PRESETS["gpt2"]["omega_schedule"] == "rope" and PRESETS["paper"]["omega_schedule"] == (
        "paper"
    )
    assert PRESETS["gpt2"]["vocab_size"] == PRESETS["paper"]["vocab_size"] == 50257
    PRESETS["tiny"]["n_layer"] = 99  # a copy: the file's values cannot be changed by a caller
    assert PRESETS["tiny"]["n_layer"] == 4
    with pytest.raises(ValueError, match="did you mean 'tiny'"):
        PRESETS["tinny"]


def test_named_configs_extends_merges_tables_and_refuses_cycles():
    data = {
        "a": {"description": "A", "x": {"p": 1, "q": 2}, "y": 3},
        "b": {"extends": "a", "x": {"q": 5}},
    }
    named = NamedConfigs.from_dict(data, "recipe", "f.toml")
    assert named["b"] == {"x": {"p": 1, "q": 5}, "y": 3}
    assert named.descriptions == {"a": "A", "b": ""}
    with pytest.raises(ValueError, match="extends itself"):
        NamedConfigs.from_dict({"a": {"extends": "b"}, "b": {"extends": "a"}}, "recipe", "f")
    with pytest.raises(ValueError, match="unknown recipe to extend"):
        NamedConfigs.from_dict({"a": {"extends": "zz"}}, "recipe", "f")


def test_cmplxbert_recipes_come_from_the_shipped_file():
    from complexformer.cmplxbert.config import CmplxBertConfig, ComplexLoRAConfig, recipe_configs

    recipes = named_configs("cmplxbert_recipes.toml", "recipe")
    assert recipes.names() == ["library", "paper"]
    paper = recipe_configs("paper")
    assert paper["model"] == CmplxBertConfig.paper()
    assert paper["lora"] == ComplexLoRAConfig.paper()
    assert paper["mlm"]["batch_size"] == 512 and paper["mlm"]["lr"] == 1e-4
    assert paper["finetune"] == {"lr": 1e-4, "epochs": 2, "base_lr_ratio": 1.0}
    assert recipe_configs("library")["model"] == CmplxBertConfig()


def test_field_docs_read_the_attributes_section():
    @dataclass
    class Base:
        """Base.

        Attributes:
            a: the first
                field, on two lines.
            b (int): uses ``code`` and :class:`~pkg.mod.Thing`.

        Raises:
            ValueError: not a field.
        """

        a: int = 1
        b: int = 2

    @dataclass
    class Child(Base):
        """Child.

        Attributes:
            b: redefined.
            c: *new*.
        """

        c: int = 3

    assert field_docs(Base) == {
        "a": "the first field, on two lines.",
        "b": "uses code and Thing.",
    }
    assert field_docs(Child) == {
        "a": "the first field, on two lines.",
        "b": "redefined.",
        "c": "new.",
    }


def test_options_declared_by_fields_take_type_default_and_help_from_the_field(parser):
    train = next(
        a
        for a in parser._subparsers._group_actions[0].choices["train"]._actions
        if "--max-steps" in a.option_strings
    )
    assert train.type is int and train.default is None
    assert train.help == "number of optimizer updates; default 2000"
