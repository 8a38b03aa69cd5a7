"""``reproduce``'s options: a ``--config`` file that names the scale and sets fields plans what
the equivalent options plan, the options given win over the file, and the ladder refuses a
file's fields as it refuses ``--set``."""

from __future__ import annotations

from pathlib import Path

import pytest

import complexformer_lab.configs
from complexformer.cli import main
from complexformer.config import read_toml


def _plan(argv, capsys) -> str:
    assert main(["reproduce", "--dry-run", "--out", "out", *argv]) == 0
    return capsys.readouterr().out


def test_a_config_file_plans_what_the_equivalent_options_plan(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text(
        'scale = "small"\nmax_steps = 7\nlr = 3e-4\n\n[model]\ndropout = 0.1\n'
    )
    by_file = _plan(["--table", "1", "--config", "mine.toml"], capsys)
    by_options = _plan(
        ["--table", "1", "--scale", "small", "--max-steps", "7", "--set", "lr=3e-4", "dropout=0.1"],
        capsys,
    )
    assert by_file == by_options
    assert "scale small" in by_file and '"max_steps": 7' in by_file and '"lr": 0.0003' in by_file


def test_the_options_given_win_over_the_config_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text('scale = "small"\nmax_steps = 7\n')
    plan = _plan(["--config", "mine.toml", "--scale", "tiny", "--max-steps", "3"], capsys)
    assert plan == _plan(["--scale", "tiny", "--max-steps", "3"], capsys)


def test_the_ladder_refuses_a_config_files_fields(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.toml").write_text('scale = "tiny"\n')
    (tmp_path / "fields.toml").write_text('scale = "tiny"\nmax_steps = 7\n')
    plan = _plan(["--table", "ladder", "--config", "scale.toml"], capsys)
    assert plan == _plan(["--table", "ladder", "--scale", "tiny"], capsys)
    with pytest.raises(SystemExit, match="does not use --config"):
        main(["reproduce", "--dry-run", "--table", "ladder", "--config", "fields.toml"])


def test_help_lists_every_scale_and_ladder_of_the_data_files(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    folder = Path(complexformer_lab.configs.__file__).parent
    for name in ("scales.toml", "ladders.toml"):
        for entry in read_toml(folder / name).values():
            assert " ".join(entry["description"].split()) in text, (name, entry["description"])
