"""One writer per run directory; verified final models; nothing left behind by a failed start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from complexformer.cli import main
from complexformer.lm import train
from complexformer.training.rundir import LOCK_FILE, RunLockedError, run_lock

TINY = [
    "--preset",
    "tiny",
    "--batch-size",
    "4",
    "--vocab-size",
    "300",
    "--threads",
    "1",
    "--sample-tokens",
    "0",
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
    "eval_blocks=2",
]


def test_lock_refuses_a_second_writer(tmp_path, model_config, make_train_config):
    out = tmp_path / "run"
    with run_lock(out, "test holder"):
        assert "test holder" in (out / LOCK_FILE).read_text()
        with pytest.raises(RunLockedError, match="being written by another process.*test holder"):
            train(model_config, make_train_config(out, max_steps=2), log=None)
        with pytest.raises(RunLockedError):  # the same process, a second holder
            with run_lock(out):
                pass
    assert not (out / "model").exists()  # the refused run wrote nothing
    with run_lock(out):  # released: the next writer gets it
        pass


def test_failed_start_leaves_no_empty_folder(tmp_path, model_config, make_train_config):
    out = tmp_path / "new" / "run"
    bad = make_train_config(out, data=f"text:{tmp_path}/no-such-corpus/*.txt")
    with pytest.raises((ValueError, OSError)):
        train(model_config, bad, log=None)
    assert not out.exists()
    assert not (tmp_path / "new").exists()  # nor the folder it made to hold the run


def test_failed_start_keeps_folders_that_were_there_or_hold_files(tmp_path):
    keep = tmp_path / "theirs"
    keep.mkdir()
    with pytest.raises(RuntimeError), run_lock(keep / "a" / "b" / "run"):
        (keep / "a" / "note.txt").write_text("a user's file")  # written meanwhile
        raise RuntimeError("failed start")
    assert not (keep / "a" / "b").exists()  # made by the lock, empty again: removed
    assert (keep / "a" / "note.txt").read_text() == "a user's file"  # not empty: kept
    assert keep.is_dir()


def test_two_concurrent_train_commands(tmp_path, corpus_spec, session_cache):
    """The second `train` into the same folder exits 2 at once; the first finishes intact."""
    out = tmp_path / "run"
    env = {**os.environ, "COMPLEXFORMER_CACHE": str(session_cache), "OMP_NUM_THREADS": "1"}
    args = ["train", "--data", corpus_spec, "--out", str(out), *TINY]
    first = subprocess.Popen(
        [sys.executable, "-m", "complexformer", *args, "--max-steps", "2000", "--seed", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        lock = out / LOCK_FILE
        while not (lock.is_file() and lock.read_text().strip()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.05)
        second = subprocess.run(
            [sys.executable, "-m", "complexformer", *args, "--max-steps", "5", "--seed", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert first.poll() is None, "the first run ended before the second started"
        assert second.returncode == 2, second.stderr
        assert "being written by another process" in second.stderr
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stderr
    assert json.loads((out / "train_config.json").read_text())["seed"] == 1
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 2000
    assert json.loads((out / "summary.json").read_text())["steps"] == 2000


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, corpus_spec):
    out = tmp_path_factory.mktemp("flip") / "run"
    code = main(["train", "--data", corpus_spec, "--out", str(out), *TINY, "--max-steps", "2"])
    assert code == 0
    return out


def test_byte_flipped_final_model_is_refused(finished_run, tmp_path, capsys):
    manifest = json.loads((finished_run / "model" / "manifest.json").read_text())
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}
    assert main(["info", "--model", str(finished_run)]) == 0
    weights = finished_run / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    original = bytes(data)
    for i in (len(data) // 3, len(data) // 2, len(data) - 5):  # three flipped bytes
        data[i] ^= 0xFF
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    try:
        assert main(["info", "--model", str(finished_run)]) == 2
        assert "sha256 does not match" in capsys.readouterr().err
        code = main(
            ["generate", "--model", str(finished_run), "--prompt", "a", "--max-new-tokens", "2"]
        )
        assert code == 2
        assert "sha256 does not match" in capsys.readouterr().err
    finally:
        weights.write_bytes(original)
    assert main(["info", "--model", str(finished_run)]) == 0


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_generate_refuses_non_finite_temperature(finished_run, bad, capsys):
    code = main(["generate", "--model", str(finished_run), "--prompt", "a", "--temperature", bad])
    assert code == 2
    assert "temperature must be >= 0 and finite" in capsys.readouterr().err


def test_train_refuses_non_finite_temperature_before_training(tmp_path, capsys):
    args = [a for a in TINY if a not in ("--sample-tokens", "0")]
    code = main(["train", "--out", str(tmp_path / "r"), "--temperature", "nan", *args])
    assert code == 2
    assert "temperature must be >= 0 and finite" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_missing_local_paths_are_named(tmp_path, capsys):
    assert main(["info", "--model", str(tmp_path / "no-run")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    missing = Path(tmp_path / "no-tokenizer")
    code = main(["train", "--out", str(tmp_path / "r"), "--tokenizer", str(missing), *TINY])
    assert code == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
