"""``complexformer export`` and the other commands on an exported directory."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from complexformer.cli import main  # noqa: E402
from tests.common_testlib import write_corpus  # noqa: E402
from tests.hf.hf_testlib import model_dir_with_tokenizer, tiny_lm  # noqa: E402


@pytest.fixture
def exported_by_cli(tokenizer, tmp_path, capsys):
    src = model_dir_with_tokenizer(tiny_lm(tokenizer, "cmha"), tokenizer, tmp_path)
    out = tmp_path / "hf"
    assert main(["export", "--model", str(src), "--out", str(out)]) == 0
    assert "exported" in capsys.readouterr().out
    return out


def test_export_then_generate_and_evaluate_with_ckpt_dir(exported_by_cli, tmp_path, capsys):
    out = exported_by_cli
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "hf-model" and manifest["source"].endswith("model")
    args = ["generate", "--model", str(out), "--prompt", "the cat", "--max-new-tokens", "6"]
    assert main([*args, "--temperature", "0"]) == 0
    assert capsys.readouterr().out.startswith("the cat")
    spec = write_corpus(tmp_path / "corpus", n_lines=400)
    args = ["evaluate", "--model", str(out), "--data", spec, "--max-blocks", "2", "--json"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert json.loads(text[text.index("{\n") :])["tokens"] > 0


def test_export_refuses_a_foreign_directory_with_one_line(tokenizer, tmp_path, capsys):
    src = model_dir_with_tokenizer(tiny_lm(tokenizer, "rope"), tokenizer, tmp_path)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "a.txt").write_text("x")
    assert main(["export", "--model", str(src), "--out", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not an exported model" in err


def test_export_help_lists_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = capsys.readouterr().out
    for opt in ("--model", "--out", "--device"):
        assert opt in text
