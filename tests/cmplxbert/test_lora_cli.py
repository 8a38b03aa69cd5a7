"""The CmplxBERT commands end to end on a tiny BERT saved with a real tokenizer:
cbert-complexify (MLM pre-training, resume), cbert-embeddings, cbert-finetune; and their error
messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import complexformer.configs
from complexformer.cli import main
from complexformer.cmplxbert.loading import resolve_base
from complexformer.config import read_toml
from complexformer.training.rundir import run_lock
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir, write_docstring_corpus

pytest.importorskip("transformers")


def test_complexify_then_analyze_then_finetune(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path / "cache"))
    base = save_tiny_bert_dir(tmp_path / "bert", "BertForMaskedLM")  # has an MLM head
    spec = write_docstring_corpus(tmp_path / "corpus.jsonl", 200)
    out = tmp_path / "run"
    args = [
        "cbert-complexify",
        "--base",
        str(base),
        "--rank",
        "2",
        "--data",
        spec,
        "--out",
        str(out),
        "--max-steps",
        "4",
        "--batch-size",
        "4",
        "--seq-len",
        "32",
        "--eval-every",
        "2",
        "--save-every",
        "2",
        "--eval-blocks",
        "2",
        "--threads",
        "1",
        "--lr",
        "1e-3",
        "--log-every",
        "1",
    ]
    assert main(args) == 0
    assert "validation MLM loss" in capsys.readouterr().out
    meta = json.loads((out / "model" / "cmplxbert.json").read_text())
    assert meta["hf_class"] == "BertForMaskedLM" and meta["lora"]["r"] == 2
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and "val_loss" in rows[-1]
    # a finished run refuses to be clobbered; --resume continues (nothing left to do)
    assert main(args) == 2
    assert "overwrite" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    # one writer at a time: a second complexify into a folder being written stops at once
    capsys.readouterr()
    with run_lock(out, "test holder"):
        assert main(args + ["--resume"]) == 2
    assert "being written by another process (" in capsys.readouterr().err

    assert (
        main(
            [
                "cbert-embeddings",
                "--model",
                str(out / "model"),
                "--n",
                "300",
                "--out",
                str(tmp_path / "emb"),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "emb" / "embeddings.json").read_text())
    assert 0.0 < res["imaginary_energy_share"] < 1.0  # the adapters moved off the real axis
    assert (tmp_path / "emb" / "embeddings.png").stat().st_size > 1000

    task = tmp_path / "task.jsonl"
    task.write_text(
        "\n".join(
            json.dumps({"text": f"item {i} " + "word " * (i % 5), "label": i % 2})
            for i in range(80)
        )
        + "\n"
    )
    assert (
        main(
            [
                "cbert-finetune",
                "--model",
                str(out / "model"),
                "--task",
                str(task),
                "--out",
                str(tmp_path / "ft"),
                "--seeds",
                "0",
                "--epochs",
                "1",
                "--seq-len",
                "16",
                "--models",
                "cmplxbert",
                "real",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "CmplxBERT-LoRA" in text and "majority class" in text
    summary = json.loads((tmp_path / "ft" / "finetune.json").read_text())["summary"]
    assert set(summary) == {"cmplxbert", "real"}


def test_cli_errors_name_the_bad_value(tmp_path, capsys):
    assert main(["cbert-embeddings", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a CmplxBERT directory" in err and "`complexformer cbert-complexify`" in err
    assert main(["cbert-finetune", "--base", "minilm", "--task", str(tmp_path / "none.csv")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "bert").mkdir()
    assert (
        main(
            [
                "cbert-complexify",
                "--base",
                str(tmp_path / "bert"),
                "--data",
                "stdlib",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "holds no config.json" in capsys.readouterr().err
    full_keep = ["--attention-score", "modulus", "--whiten", "full", "--start", "keep"]
    argv = ["cbert-complexify", "--base", "minilm", "--data", "stdlib", "--out"]
    assert main([*argv, str(tmp_path / "fk"), *full_keep]) == 2
    assert "use whiten='scalar' or start='paper'" in capsys.readouterr().err
    assert not (tmp_path / "fk").exists()


def test_a_missing_local_base_says_no_such_file_before_any_hub_lookup(tmp_path, capsys):
    missing = str(tmp_path / "no_bert")
    argv = ["cbert-complexify", "--base", missing, "--data", "stdlib", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert f"base {missing}: no such file or directory" in capsys.readouterr().err
    assert resolve_base("org/some-bert") == "org/some-bert"  # a hub name passes through


@pytest.mark.parametrize("command", ["cbert-complexify", "cbert-finetune", "cbert-study"])
def test_help_lists_every_recipe_with_its_description(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")
    path = Path(complexformer.configs.__file__).with_name("cmplxbert_recipes.toml")
    for name, entry in read_toml(path).items():
        assert f"{name}: {' '.join(entry['description'].split())}" in text, name
