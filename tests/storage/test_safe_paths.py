"""Safe file operations: no link, FIFO or hard-linked file is ever written through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from complexformer.storage import (
    SymlinkRefusedError,
    atomic_dir,
    atomic_output,
    atomic_write_text,
    check_no_links,
    open_file,
    read_text,
    remove_entry,
)


@pytest.fixture()
def secret(tmp_path) -> Path:
    p = tmp_path / "outside" / "secret.txt"
    p.parent.mkdir()
    p.write_text("SECRET\n")
    return p


def test_open_file_refuses_a_link_for_every_mode(tmp_path, secret):
    link = tmp_path / "f.txt"
    link.symlink_to(secret)
    for mode in ("r", "rb", "w", "wb", "a", "ab"):
        with pytest.raises(SymlinkRefusedError) as e:
            open_file(link, mode)
        assert e.value.link == link and str(link) in str(e.value) and str(secret) in str(e.value)
    with pytest.raises(SymlinkRefusedError):
        read_text(link)
    assert secret.read_text() == "SECRET\n"


def test_open_file_refuses_a_linked_folder_below_the_root(tmp_path, secret):
    run = tmp_path / "run"
    run.mkdir()
    (run / "sub").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(SymlinkRefusedError) as e:
        open_file(run / "sub" / "secret.txt", "w", root=run)
    assert e.value.link == run / "sub"
    with pytest.raises(SymlinkRefusedError):
        check_no_links(run / "sub" / "x" / "y", run)
    assert secret.read_text() == "SECRET\n"


def test_a_fifo_or_a_hard_link_is_refused_without_blocking(tmp_path, secret):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for mode in ("r", "w", "a"):
        with pytest.raises(OSError, match="not a regular file") as e:
            open_file(fifo, mode)
        # removing it is advised only where the package writes, never for an input
        assert str(e.value).endswith("; remove it") == (mode != "r"), str(e.value)
    with pytest.raises(OSError, match=f"{tmp_path} is not a regular file$"):
        open_file(tmp_path, "r")  # a folder named as an input file
    hard = tmp_path / "hard.txt"
    os.link(secret, hard)
    for mode in ("w", "a"):
        with pytest.raises(OSError, match="other hard link"):
            open_file(hard, mode)
    assert secret.read_text() == "SECRET\n"
    assert read_text(hard) == "SECRET\n"  # reading one is harmless


def test_write_truncates_only_after_the_checks(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("old contents\n")
    with open_file(p, "w") as f:
        f.write("new\n")
    with open_file(p, "a") as f:
        f.write("more\n")
    assert p.read_text() == "new\nmore\n"


def test_remove_entry_refuses_links_and_removes_only_inside(tmp_path, secret):
    run = tmp_path / "run"
    (run / "d" / "e").mkdir(parents=True)
    (run / "d" / "e" / "f").write_text("x")
    (run / "link").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(SymlinkRefusedError):
        remove_entry(run / "link", run)
    with pytest.raises(SymlinkRefusedError):
        remove_entry(run / "link" / "secret.txt", run)
    (run / "d" / "inner").symlink_to(secret.parent, target_is_directory=True)
    assert remove_entry(run / "d", run)  # rmtree unlinks a link inside, never its target
    assert not (run / "d").exists() and secret.read_text() == "SECRET\n"
    assert not remove_entry(run / "missing", run)
    with pytest.raises(ValueError, match="not inside"):
        remove_entry(secret, run)


def test_atomic_writers_refuse_a_link_at_the_destination(tmp_path, secret):
    link = tmp_path / "out.json"
    link.symlink_to(secret)
    with pytest.raises(SymlinkRefusedError):
        atomic_write_text(link, "overwritten\n")
    with pytest.raises(SymlinkRefusedError):
        with atomic_output(link) as tmp:
            Path(tmp).write_text("x")
    dlink = tmp_path / "model"
    dlink.symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(SymlinkRefusedError):
        with atomic_dir(dlink) as tmp:
            (tmp / "f").write_text("x")
    assert secret.read_text() == "SECRET\n" and link.is_symlink() and dlink.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "out.json", "outside"]


def test_a_link_planted_while_the_writer_runs_is_refused(tmp_path, secret):
    """``os.replace`` would replace a link rather than follow it; the writer refuses it all
    the same and removes its temporary file."""
    dest = tmp_path / "loss.png"
    with pytest.raises(SymlinkRefusedError):
        with atomic_output(dest) as tmp:
            Path(tmp).write_bytes(b"png")
            dest.symlink_to(secret)
    assert secret.read_text() == "SECRET\n" and dest.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loss.png", "outside"]


def test_os_replace_replaces_a_link_itself(tmp_path, secret):
    """What the writers rely on: a rename onto a link replaces the link, not its target."""
    link, new = tmp_path / "l", tmp_path / "n"
    link.symlink_to(secret)
    new.write_text("new\n")
    os.replace(new, link)
    assert not link.is_symlink() and link.read_text() == "new\n"
    assert secret.read_text() == "SECRET\n"
