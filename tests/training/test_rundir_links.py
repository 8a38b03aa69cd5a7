"""Run folders that never follow a link: links planted in a run folder, as an attacker would.

Each test plants a symbolic link (or a hard link) where the run writes its own file or folder,
points it at a "victim" outside the run, runs the writer, and asserts on the host side: the
victim is byte-for-byte unchanged, the error names the link, the command line exits 2.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from complexformer.cli import main
from complexformer.lm import run_prompt, train
from complexformer.storage import SymlinkRefusedError, remove_stale_temporaries
from complexformer.training import MetricsLogger
from complexformer.training.checkpoint import (
    list_checkpoints,
    prune_checkpoints,
    step_dir_name,
)
from complexformer.training.plot import plot_loss_curves
from complexformer.training.rundir import LOCK_FILE, RUN_MARKER, clear_run, run_lock
from tests.training.test_rundir_lock import TINY


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root`` (links not followed): file bytes, link targets, folders."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


@pytest.fixture()
def victim(tmp_path) -> Path:
    """A folder outside every run, with a file and a ``step_*`` folder a prune would take."""
    v = tmp_path / "victim"
    (v / step_dir_name(1)).mkdir(parents=True)
    (v / step_dir_name(1) / "keep.txt").write_text("do not delete\n")
    (v / "secret.txt").write_text("SECRET-CONTENT-1234\n")
    return v


@pytest.fixture()
def run_copy(reference, tmp_path) -> Path:
    """A private copy of the finished 12-step reference run (checkpoints 4, 8, 12)."""
    src, _ = reference
    dst = tmp_path / "run"
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _refused(excinfo, link: Path) -> None:
    assert excinfo.value.link == link
    assert str(link) in str(excinfo.value) and "symbolic link" in str(excinfo.value)


# ------------------------------------------------------------------------------ the lock
def test_linked_lock_is_not_truncated(tmp_path, victim, model_config, make_train_config):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(victim / "secret.txt")
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError) as e:
        train(model_config, make_train_config(out, max_steps=2), log=None)
    _refused(e, out / LOCK_FILE)
    assert snapshot(victim) == before
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing else written


def test_hard_linked_lock_is_not_truncated(tmp_path, victim):
    out = tmp_path / "run"
    out.mkdir()
    os.link(victim / "secret.txt", out / LOCK_FILE)
    before = snapshot(victim)
    with pytest.raises(OSError, match="other hard link"):
        with run_lock(out):
            pass
    assert snapshot(victim) == before


def test_linked_lock_on_the_command_line(tmp_path, victim, corpus_spec, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(victim / "secret.txt")
    before = snapshot(victim)
    rc = main(["train", "--data", corpus_spec, "--out", str(out), "--max-steps", "2", *TINY])
    err = capsys.readouterr().err
    assert rc == 2
    assert "complexformer train: error:" in err and str(out / LOCK_FILE) in err
    assert snapshot(victim) == before


# ----------------------------------------------------------------------------- metrics
def test_linked_metrics_file_is_not_truncated(run_copy, victim, model_config, make_train_config):
    (run_copy / "metrics.jsonl").unlink()
    (run_copy / "metrics.jsonl").symlink_to(victim / "secret.txt")
    before = snapshot(victim)
    for kw in ({"resume": True}, {"overwrite": True}):
        with pytest.raises(SymlinkRefusedError) as e:
            train(model_config, make_train_config(run_copy, max_steps=16), log=None, **kw)
        _refused(e, run_copy / "metrics.jsonl")
    assert snapshot(victim) == before
    assert list_checkpoints(run_copy / "checkpoints")  # --overwrite deleted nothing


@pytest.mark.parametrize("resume_step", [None, 4])
def test_metrics_logger_refuses_a_link(tmp_path, victim, resume_step):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to(victim / "secret.txt")
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError):
        MetricsLogger(run, resume_step=resume_step)
    assert snapshot(victim) == before


def test_loss_plot_refuses_a_link(run_copy, victim):
    pytest.importorskip("matplotlib")
    (run_copy / "loss.png").unlink(missing_ok=True)
    (run_copy / "loss.png").symlink_to(victim / "secret.txt")
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError):
        plot_loss_curves(run_copy / "metrics.jsonl", run_copy / "loss.png", log=None)
    assert snapshot(victim) == before
    assert (run_copy / "loss.png").is_symlink()  # the link itself is not replaced either
    assert not [p for p in run_copy.iterdir() if p.name.startswith(".loss.png.")]


# ------------------------------------------------------------------------- checkpoints
def test_linked_checkpoints_folder_is_neither_written_nor_pruned(
    tmp_path, victim, model_config, make_train_config
):
    out = tmp_path / "run"
    out.mkdir()
    (out / RUN_MARKER).write_text("{}\n")
    (out / "checkpoints").symlink_to(victim, target_is_directory=True)
    before = snapshot(victim)
    for kw in ({}, {"resume": True}, {"overwrite": True}):
        with pytest.raises(SymlinkRefusedError) as e:
            train(model_config, make_train_config(out, max_steps=4, keep_last=1), log=None, **kw)
        _refused(e, out / "checkpoints")
    assert snapshot(victim) == before
    with pytest.raises(SymlinkRefusedError):
        prune_checkpoints(out / "checkpoints", keep_last=0)
    assert snapshot(victim) == before


def test_keep_last_never_deletes_through_a_linked_step(run_copy, victim):
    ckpts = run_copy / "checkpoints"
    shutil.rmtree(ckpts / step_dir_name(4))
    (ckpts / step_dir_name(1)).symlink_to(victim / step_dir_name(1), target_is_directory=True)
    before_victim, before_run = snapshot(victim), snapshot(ckpts)
    with pytest.raises(SymlinkRefusedError) as e:
        prune_checkpoints(ckpts, keep_last=1)
    _refused(e, ckpts / step_dir_name(1))
    assert snapshot(victim) == before_victim
    assert snapshot(ckpts) == before_run  # nothing pruned before the refusal


def test_resume_refuses_a_linked_step(run_copy, victim, model_config, make_train_config):
    ckpts = run_copy / "checkpoints"
    (ckpts / step_dir_name(99)).symlink_to(victim / step_dir_name(1), target_is_directory=True)
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError):
        train(model_config, make_train_config(run_copy, max_steps=16), resume=True, log=None)
    assert snapshot(victim) == before


# --------------------------------------------------------------------------- overwrite
def test_overwrite_with_a_linked_model_deletes_nothing(
    run_copy, victim, model_config, make_train_config
):
    shutil.rmtree(run_copy / "model")
    (run_copy / "model").symlink_to(victim, target_is_directory=True)
    before_victim, before_run = snapshot(victim), snapshot(run_copy)
    with pytest.raises(SymlinkRefusedError) as e:
        train(model_config, make_train_config(run_copy), overwrite=True, log=None)
    _refused(e, run_copy / "model")
    assert snapshot(victim) == before_victim
    after = snapshot(run_copy)
    after.pop(LOCK_FILE, None), before_run.pop(LOCK_FILE, None)
    assert after == before_run  # checkpoints/ and the rest are all still there
    with pytest.raises(SymlinkRefusedError):
        clear_run(run_copy)
    assert snapshot(victim) == before_victim


def test_overwrite_with_a_link_inside_an_artifact(run_copy, victim):
    (run_copy / "tokenizer" / "planted").symlink_to(victim, target_is_directory=True)
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError) as e:
        clear_run(run_copy)
    _refused(e, run_copy / "tokenizer" / "planted")
    assert snapshot(victim) == before and (run_copy / "checkpoints").is_dir()


@pytest.mark.parametrize("name", ["tokenizer", "tensorboard", "train_config.json", RUN_MARKER])
def test_resume_refuses_other_linked_run_files(
    run_copy, victim, model_config, make_train_config, name
):
    p = run_copy / name
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    p.symlink_to(victim, target_is_directory=True)
    before = snapshot(victim)
    with pytest.raises(OSError):  # the link, or a run marker that is not a regular file
        train(model_config, make_train_config(run_copy, max_steps=16), resume=True, log=None)
    assert snapshot(victim) == before


def test_stale_temporaries_are_not_followed(run_copy, victim):
    (run_copy / ".old-model-1234abcd").symlink_to(victim, target_is_directory=True)
    before = snapshot(victim)
    with pytest.raises(SymlinkRefusedError):
        remove_stale_temporaries(run_copy)
    assert snapshot(victim) == before


# ---------------------------------------------------------------------------- sampling
def test_linked_prompt_is_not_read(run_copy, victim, capsys):
    (run_copy / "prompt.txt").unlink(missing_ok=True)
    (run_copy / "prompt.txt").symlink_to(victim / "secret.txt")
    with pytest.raises(SymlinkRefusedError) as e:
        run_prompt(run_copy)
    _refused(e, run_copy / "prompt.txt")
    rc = main(["generate", "--model", str(run_copy), "--max-new-tokens", "2"])
    out, err = capsys.readouterr()
    assert rc == 2 and str(run_copy / "prompt.txt") in err
    assert "SECRET-CONTENT" not in out + err
    assert (victim / "secret.txt").read_text() == "SECRET-CONTENT-1234\n"


def test_prompt_is_not_written_through_a_link(run_copy, victim):
    (run_copy / "prompt.txt").unlink(missing_ok=True)
    (run_copy / "prompt.txt").symlink_to(victim / "new.txt")  # dangling: would be created
    with pytest.raises(SymlinkRefusedError):
        run_prompt(run_copy)
    assert not (victim / "new.txt").exists()
