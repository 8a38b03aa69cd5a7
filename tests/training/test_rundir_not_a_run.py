"""``--out`` at a folder that is not a run: refused before anything in it is touched."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from complexformer.cli import main
from complexformer.lm import train
from complexformer.training import NotARunFolderError
from complexformer.training.rundir import LOCK_FILE, RUN_MARKER, is_run_folder
from tests.training.test_rundir_links import snapshot
from tests.training.test_rundir_lock import TINY


@pytest.fixture()
def user_folder(tmp_path) -> Path:
    """A user's folder holding names a run writes and names its atomic writes clean up."""
    d = tmp_path / "project"
    (d / "tokenizer").mkdir(parents=True)
    (d / "tokenizer" / "vocab.txt").write_text("mine\n")
    (d / ".tmp-notes-1").mkdir()
    (d / ".tmp-notes-1" / "draft.txt").write_text("draft\n")
    (d / ".old-photos-2").mkdir()
    (d / "config.json").write_text('{"mine": true}\n')
    (d / "summary.json").write_text('{"mine": true}\n')
    (d / "notes.txt").write_text("hello\n")
    return d


def _stat_snapshot(root: Path) -> dict[str, object]:
    return {
        **snapshot(root),
        **{
            f"{p}@mtime": os.lstat(Path(root, p)).st_mtime_ns
            for p in snapshot(root)
            if not p.endswith("@mtime")
        },
    }


@pytest.mark.parametrize(
    "kw", [{}, {"overwrite": True}, {"resume": True}], ids=["fresh", "overwrite", "resume"]
)
def test_train_refuses_a_folder_that_is_not_a_run(user_folder, model_config, make_train_config, kw):
    before = _stat_snapshot(user_folder)
    with pytest.raises(NotARunFolderError) as e:
        train(model_config, make_train_config(user_folder, max_steps=2), log=None, **kw)
    msg = str(e.value)
    assert str(user_folder) in msg and "not a complexformer run folder" in msg
    assert "nothing in it was changed" in msg and "another out_dir" in msg
    assert _stat_snapshot(user_folder) == before  # not even a .lock
    assert not (user_folder / LOCK_FILE).exists()


@pytest.mark.parametrize("flag", [[], ["--overwrite"], ["--resume"]])
def test_train_command_refuses_a_folder_that_is_not_a_run(user_folder, corpus_spec, capsys, flag):
    before = _stat_snapshot(user_folder)
    argv = ["train", "--data", corpus_spec, "--out", str(user_folder), "--max-steps", "2"]
    rc = main([*argv, *TINY, *flag])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"complexformer train: error: {user_folder} is not empty" in err
    assert "Choose another --out" in err
    assert _stat_snapshot(user_folder) == before


def test_retrofit_and_complexify_refuse_a_folder_that_is_not_a_run(
    user_folder, tmp_path, corpus_spec, capsys
):
    base = tmp_path / "bert"
    base.mkdir()
    (base / "config.json").write_text("{}\n")  # never loaded: the refusal comes first
    before = _stat_snapshot(user_folder)
    for argv in (
        ["retrofit", "--base", str(tmp_path / "no-model"), "--data", corpus_spec],
        ["cbert-complexify", "--base", str(base), "--data", corpus_spec],
    ):
        for flag in ([], ["--overwrite"]):
            rc = main([*argv, "--out", str(user_folder), *flag])
            err = capsys.readouterr().err
            assert rc == 2, err
            assert f"{user_folder} is not empty" in err and "Choose another --out" in err
    assert _stat_snapshot(user_folder) == before


def test_a_linked_run_marker_does_not_make_a_run(
    user_folder, tmp_path, model_config, make_train_config
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / RUN_MARKER).write_text("{}\n")
    (user_folder / RUN_MARKER).symlink_to(elsewhere / RUN_MARKER)
    assert not is_run_folder(user_folder)
    before = _stat_snapshot(user_folder)
    with pytest.raises(NotARunFolderError):
        train(model_config, make_train_config(user_folder, max_steps=2), overwrite=True, log=None)
    assert _stat_snapshot(user_folder) == before


@pytest.mark.parametrize("content", ["empty", "lock only"])
def test_an_empty_folder_or_a_failed_start_is_fine(
    tmp_path, model_config, make_train_config, content
):
    out = tmp_path / "run"
    out.mkdir()
    if content == "lock only":
        (out / LOCK_FILE).write_text("pid 1 on host, training run since then\n")
    train(model_config, make_train_config(out, max_steps=2, save_every=2), log=None)
    assert is_run_folder(out) and (out / RUN_MARKER).is_file()
    assert json.loads((out / RUN_MARKER).read_text())["kind"] == "complexformer-run"
    assert (out / "model").is_dir()


def test_a_run_of_an_earlier_version_is_still_a_run(
    reference, tmp_path, model_config, make_train_config
):
    """Runs written before the marker existed carry ``train_config.json``: they still resume
    and overwrite, and get the marker."""
    src, _ = reference
    out = tmp_path / "old-run"
    shutil.copytree(src, out)
    (out / RUN_MARKER).unlink()
    assert is_run_folder(out)
    train(model_config, make_train_config(out, max_steps=14), resume=True, log=None)
    assert (out / RUN_MARKER).is_file()
    (out / RUN_MARKER).unlink()
    (out / "mine.txt").write_text("kept\n")
    train(model_config, make_train_config(out, max_steps=2), overwrite=True, log=None)
    assert (out / "mine.txt").read_text() == "kept\n"  # --overwrite deletes only the run's files
