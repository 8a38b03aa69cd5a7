"""The `complexformer` command line end to end, and its errors on bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from complexformer.cli import main
from complexformer.config import parse_overrides

SCRIPT = Path(sys.executable).with_name("complexformer")
SMALL = [
    "--max-steps",
    "20",
    "--batch-size",
    "4",
    "--vocab-size",
    "400",
    "--eval-every",
    "10",
    "--save-every",
    "10",
    "--threads",
    "1",
    "--set",
    "max_seq_len=32",
    "--set",
    "n_layer=1",
    "--set",
    "d_model=32",
    "--set",
    "n_head=2",
    "--set",
    "d_ff=64",
    "--set",
    "eval_blocks=4",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """Real Python source: a few standard-library modules as .txt documents."""
    root = tmp_path_factory.mktemp("corpus")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for sub in ("json", "email", "logging", "http", "urllib"):
        for src in sorted((stdlib / sub).glob("*.py")):
            shutil.copy(src, root / f"{sub}_{src.stem}.txt")
    return f"text:{root}/*.txt"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("COMPLEXFORMER_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> Path:
    """One 20-step run through the installed console script (a real subprocess)."""
    out = tmp_path_factory.mktemp("run") / "run"
    env = {**os.environ, "COMPLEXFORMER_CACHE": str(tmp_path_factory.getbasetemp() / "cache")}
    cmd = [
        str(SCRIPT),
        "train",
        "--preset",
        "tiny",
        "--data",
        corpus,
        "--out",
        str(out),
        *SMALL,
        "--sample-tokens",
        "16",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "validation perplexity:" in res.stdout
    assert "run directory:" in res.stdout and "sample (" in res.stdout
    return out


def test_train_outputs(trained):
    for name in (
        "config.json",
        "train_config.json",
        "metrics.jsonl",
        "loss.png",
        "tokenizer",
        "model/model.safetensors",
        "model/config.json",
    ):
        assert (trained / name).exists(), name
    rows = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 20 and "val_ppl" in rows[-1]
    assert json.loads((trained / "config.json").read_text())["pos_scheme"] == "cmha"
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == [
        "step_0000010",
        "step_0000020",
    ]


def test_generate_evaluate_info(trained, corpus, capsys):
    assert (
        main(
            [
                "generate",
                "--model",
                str(trained),
                "--prompt",
                "def f(x):",
                "--max-new-tokens",
                "12",
                "--seed",
                "1",
                "--temperature",
                "0",
            ]
        )
        == 0
    )
    greedy = capsys.readouterr().out
    assert greedy.startswith("def f(x):")
    assert (
        main(
            [
                "generate",
                "--model",
                str(trained),
                "--prompt",
                "def f(x):",
                "--max-new-tokens",
                "12",
                "--temperature",
                "0",
                "--no-cache",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == greedy  # KV cache and full recompute agree

    assert (
        main(
            [
                "evaluate",
                "--model",
                str(trained),
                "--data",
                corpus,
                "--split",
                "val",
                "--json",
                "--max-blocks",
                "4",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    res = json.loads(out[out.rindex("\n{") + 1 :])  # the corpus summary comes first
    assert res["ppl"] > 1 and res["tokens"] > 0 and res["split"] == "val"


def test_info(trained, capsys):
    assert main(["info", "--model", str(trained)]) == 0
    out = capsys.readouterr().out
    assert "adaptation" in out and "pos_scheme" in out and "layer 0: |delta|" in out
    assert main(["info", "--model", str(trained), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["adaptation"] == 32  # n_layer x d_model


def test_generate_prompt_file(trained, tmp_path, capsys):
    f = tmp_path / "p.txt"
    f.write_text("import sys\n")
    assert (
        main(
            [
                "generate",
                "--model",
                str(trained),
                "--prompt-file",
                str(f),
                "--max-new-tokens",
                "5",
                "--seed",
                "0",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("import sys\n")


def test_parse_overrides():
    assert parse_overrides(["a=1", "b=0.5", "c=true", "d=rope", "e=null", "f=[0.9, 0.95]"]) == {
        "a": 1,
        "b": 0.5,
        "c": True,
        "d": "rope",
        "e": None,
        "f": [0.9, 0.95],
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overrides(["novalue"])


def run_cli(args, capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def test_bad_input_errors(tmp_path, corpus, capsys):
    out = str(tmp_path / "r")
    code, err = run_cli(["train", "--preset", "tinny", "--out", out], capsys)
    assert code == 2 and "unknown preset 'tinny'" in err and "'tiny'" in err
    code, err = run_cli(["train", "--out", out, "--set", "n_layers=2"], capsys)
    assert code == 2 and "unknown config key 'n_layers'" in err and "'n_layer'" in err
    code, err = run_cli(
        ["train", "--out", out, "--data", f"text:{tmp_path}/nothing/*.txt", *SMALL], capsys
    )
    assert code == 2 and "nothing" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("   \n")
    code, err = run_cli(["train", "--out", out, "--data", f"text:{empty}/*.txt", *SMALL], capsys)
    assert code == 2 and "empty" in err.lower()
    code, err = run_cli(["generate", "--model", str(tmp_path / "missing"), "--prompt", "x"], capsys)
    assert code == 2 and "missing" in err
    code, err = run_cli(
        ["generate", "--model", out, "--prompt-file", str(tmp_path / "nofile")], capsys
    )
    assert code == 2 and "nofile" in err
    # an OSError with a file name is said as "<file>: <reason>", and nothing is written
    missing, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    argv = ["cbert-predict", "--model", out, "--input", str(missing), "--output", str(dst)]
    code, err = run_cli(argv, capsys)
    assert (code, err) == (
        2,
        f"complexformer cbert-predict: error: {missing}: No such file or directory\n",
    )
    assert not dst.exists()


def test_damaged_checkpoint_is_refused_and_good_run_kept(trained, tmp_path, corpus, capsys):
    run = tmp_path / "copy"
    shutil.copytree(trained, run)
    weights = run / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])  # truncated final model
    code, err = run_cli(["info", "--model", str(run / "model")], capsys)
    assert code == 2 and "model.safetensors" in err
    ckpt = run / "checkpoints" / "step_0000020" / "model.safetensors"
    ckpt.write_bytes(ckpt.read_bytes()[:-10])  # truncated checkpoint
    code, err = run_cli(["info", "--model", str(run / "checkpoints" / "step_0000020")], capsys)
    assert code == 2 and "step_0000020" in err
    good = (trained / "model" / "model.safetensors").read_bytes()
    code, err = run_cli(
        ["train", "--preset", "tiny", "--data", corpus, "--out", str(trained), *SMALL], capsys
    )
    assert code == 2 and "--resume" in err and "--overwrite" in err
    assert (trained / "model" / "model.safetensors").read_bytes() == good
