"""Atomic writes of files and directories: build a temporary sibling, flush it to disk, then
move it onto the final name.

A crash at any point leaves either the old file or directory or the complete new one, never a
partial one under the final name. Files and directories get the modes of the user's umask
(``0o666 & ~umask`` and ``0o777 & ~umask``), as ``open`` and ``mkdir`` would create them, also
when the writer makes its file private (``safetensors`` writes with mode ``0o600``).

A directory is built in ``.tmp-<name>-XXXXXXXX`` beside it. If ``<name>`` exists, it is moved
into ``.old-<name>-XXXXXXXX/<name>`` just before the new one takes its place, and deleted
after; a crash between the two renames leaves ``<name>`` missing and its previous complete
state in the ``.old-*`` directory, which :func:`remove_stale_temporaries` moves back.

A symbolic link at the final name is refused with
:class:`~complexformer.storage.SymlinkRefusedError` naming it, before anything is written
and again just before the rename: the package never writes through a link, and never
replaces one it did not make.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .safe_paths import refuse_link

__all__ = [
    "OLD_PREFIX",
    "TMP_PREFIX",
    "atomic_dir",
    "atomic_output",
    "atomic_write",
    "atomic_write_text",
    "remove_stale_temporaries",
]

#: Prefix of a directory being built by :func:`atomic_dir` (``.tmp-<name>-XXXXXXXX``).
TMP_PREFIX = ".tmp-"
#: Prefix of the directory holding the replaced one during the swap (``.old-<name>-XXXXXXXX``).
OLD_PREFIX = ".old-"


def _fsync_path(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):  # not supported on every platform or filesystem
        _fsync_path(path)


def _mode(path: str | os.PathLike[str]) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _set_mode(path: str | os.PathLike[str], mode: int) -> None:
    if _mode(path) != mode:
        os.chmod(path, mode)


def _finish_tree(root: Path, dir_mode: int) -> None:
    """Give every file and directory under ``root`` the umask's mode (``dir_mode`` for
    directories, without the execute bits for files that have none), then fsync them,
    deepest first."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            executable = _mode(p) & stat.S_IXUSR
            _set_mode(p, dir_mode if executable else dir_mode & 0o666)
            _fsync_path(p)
        _set_mode(dirpath, dir_mode)
        _fsync_dir(dirpath)


def _temp_name(parent: Path, prefix: str, suffix: str = "") -> Path:
    return parent / f"{prefix}{secrets.token_hex(4)}{suffix}"


def _make_temp_file(parent: Path, prefix: str, suffix: str) -> Path:
    """Create an empty new file in ``parent`` with mode ``0o666 & ~umask``."""
    while True:
        path = _temp_name(parent, prefix, suffix)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path


def _make_temp_dir(parent: Path, prefix: str) -> Path:
    """Create a new directory in ``parent`` with mode ``0o777 & ~umask``."""
    while True:
        path = _temp_name(parent, prefix)
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary file name next to ``path`` for a writer that takes a file name
    (``safetensors``' ``save_file``, ``savefig``); on success it is synced and moved onto
    ``path``, on an exception it is removed and ``path`` is left untouched.

    Raises:
        SymlinkRefusedError: ``path`` is a symbolic link (its target is never written).
    """
    path = Path(path)
    refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = str(_make_temp_file(path.parent, f".{path.name}.", ".tmp"))
    mode = _mode(tmp)  # what the umask gives a new file
    try:
        yield tmp
        _set_mode(tmp, mode)  # the writer may have replaced the file with a private one
        _fsync_path(tmp)
        refuse_link(path)  # planted while the writer ran; os.replace would replace the link
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success move it onto ``path`` atomically.

    Args:
        path: the final file name.
        mode: ``"wb"`` or ``"w"`` (text mode writes UTF-8).

    Yields:
        The open temporary file.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', got {mode!r}")
    with atomic_output(path) as tmp:
        kwargs = {"encoding": "utf-8"} if mode == "w" else {}
        with open(tmp, mode, **kwargs) as f:
            yield f


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_write(path, "w") as f:
        f.write(text)
    return Path(path)


def _swap_dir(tmp: Path, final: Path) -> None:
    """Move the complete directory ``tmp`` onto ``final``, replacing an existing one."""
    if not final.exists():
        os.replace(tmp, final)
        return
    old = _make_temp_dir(final.parent, f"{OLD_PREFIX}{final.name}-")
    os.replace(final, old / final.name)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a new empty directory beside ``path`` to write into; on success it replaces
    ``path``.

    The directory is ``.tmp-<name>-XXXXXXXX`` in the parent of ``path`` (created if
    missing). When the block ends normally, every file and directory in it is given the mode
    of the user's umask and fsynced, and it is renamed onto ``path``; an existing ``path``
    stays complete and in place until that rename (see the module's docstring for a crash in
    between). When the block raises, the
    temporary directory is deleted and ``path`` is left untouched.

    Args:
        path: the final directory.

    Yields:
        The temporary directory.

    Raises:
        SymlinkRefusedError: ``path`` is a symbolic link (nothing is written).
    """
    final = Path(path)
    refuse_link(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _make_temp_dir(final.parent, f"{TMP_PREFIX}{final.name}-")
    dir_mode = _mode(tmp)  # what the umask gives a new directory
    try:
        yield tmp
        _finish_tree(tmp, dir_mode)
        refuse_link(final)
        _swap_dir(tmp, final)
        _fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _restore_old(old: Path) -> None:
    """Move ``.old-<name>-*/<name>`` back to ``<name>`` if a swap stopped between its renames."""
    inner = [p for p in old.iterdir() if p.is_dir() and not p.is_symlink()]
    if len(inner) != 1:
        return
    name = inner[0].name
    if old.name.startswith(f"{OLD_PREFIX}{name}-") and not (old.parent / name).exists():
        os.replace(inner[0], old.parent / name)


def remove_stale_temporaries(root: str | os.PathLike[str]) -> list[Path]:
    """Delete the ``.tmp-*`` and ``.old-*`` directories an interrupted :func:`atomic_dir`
    left under ``root``; a replaced directory whose successor never arrived is moved back
    first. Call it only while no other process writes into ``root``.

    Returns:
        The deleted directories.

    Raises:
        SymlinkRefusedError: an entry named like a temporary is a symbolic link (nothing is
            removed or moved).
    """
    root = Path(root)
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for p in sorted(root.iterdir()):
        if p.name.startswith((TMP_PREFIX, OLD_PREFIX)):
            refuse_link(p)
    for p in sorted(root.iterdir()):
        if p.is_dir() and p.name.startswith(OLD_PREFIX):
            with contextlib.suppress(OSError):
                _restore_old(p)
    for p in sorted(root.iterdir()):
        if p.is_dir() and p.name.startswith((TMP_PREFIX, OLD_PREFIX)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed
