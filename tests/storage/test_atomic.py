"""Atomic files and directories: the user's umask, the swap, and recovery after a crash."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.storage import (
    atomic,
    atomic_dir,
    atomic_output,
    atomic_write_text,
    remove_stale_temporaries,
)


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_directories_follow_the_umask(tmp_path, umask):
    text = atomic_write_text(tmp_path / "a.json", "{}\n")
    assert _mode(text) == 0o666 & ~umask
    with atomic_output(tmp_path / "b.bin") as tmp:
        Path(tmp).write_bytes(b"x")
    assert _mode(tmp_path / "b.bin") == 0o666 & ~umask
    with atomic_dir(tmp_path / "d") as tmp:
        (tmp / "f.txt").write_text("x")
    assert _mode(tmp_path / "d") == 0o777 & ~umask


def test_saved_weights_and_manifest_follow_the_umask(tmp_path, umask):
    cfg = GPTConfig(vocab_size=16, n_layer=1, n_head=2, d_model=8, d_ff=16, max_seq_len=8)
    torch.manual_seed(0)
    ComplexFormerLM(cfg).save_pretrained(tmp_path / "m")
    files = [p for p in (tmp_path / "m").iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"model.safetensors", "manifest.json"}
    for p in files:
        assert _mode(p) == 0o666 & ~umask, p.name


def test_atomic_dir_replaces_only_when_complete(tmp_path):
    final = tmp_path / "out"
    with atomic_dir(final) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".tmp-out-")
        (tmp / "v").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "v").write_text("2")
        raise RuntimeError("crash while writing")
    assert (final / "v").read_text() == "1"
    with atomic_dir(final) as tmp:
        (tmp / "v").write_text("3")
    assert (final / "v").read_text() == "3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no .tmp-*/.old-* left


def test_a_crash_between_the_renames_is_recovered(tmp_path, monkeypatch):
    final = tmp_path / "model"
    with atomic_dir(final) as tmp:
        (tmp / "v").write_text("old")
    real_replace = os.replace

    def replace(src, dst):  # the process dies after moving the old directory aside
        real_replace(src, dst)
        if Path(dst).parent.name.startswith(".old-model-"):
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt), atomic_dir(final) as tmp:
        (tmp / "v").write_text("new")
    monkeypatch.undo()
    assert not final.exists()
    assert [p.name[:11] for p in tmp_path.iterdir()] == [".old-model-"]
    removed = remove_stale_temporaries(tmp_path)
    assert len(removed) == 1
    assert (final / "v").read_text() == "old"  # the previous complete state is back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_stale_temporaries_are_removed_and_current_directories_kept(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / ".tmp-model-ab12cd34").mkdir()  # an interrupted build
    (tmp_path / ".old-model-ab12cd34" / "model").mkdir(parents=True)  # model exists: stale
    (tmp_path / ".tmp-file").write_text("a file, not ours")
    removed = remove_stale_temporaries(tmp_path)
    assert sorted(p.name for p in removed) == [".old-model-ab12cd34", ".tmp-model-ab12cd34"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-file", "model"]


def test_private_files_of_a_writer_get_the_umask_modes(tmp_path, umask):
    with atomic_output(tmp_path / "w.bin") as tmp:  # a writer that makes its file private
        os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    assert _mode(tmp_path / "w.bin") == 0o666 & ~umask
    with atomic_dir(tmp_path / "d") as tmp:
        (tmp / "sub").mkdir(mode=0o700)
        fd = os.open(tmp / "sub" / "w.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        fd = os.open(tmp / "run.sh", os.O_WRONLY | os.O_CREAT, 0o700)
        os.close(fd)
    assert _mode(tmp_path / "d" / "sub") == 0o777 & ~umask
    assert _mode(tmp_path / "d" / "sub" / "w.bin") == 0o666 & ~umask
    assert _mode(tmp_path / "d" / "run.sh") == 0o777 & ~umask
