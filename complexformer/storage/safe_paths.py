"""File operations inside a folder the package owns (a run folder) that never follow a link.

A symbolic link planted in a run folder (``.lock``, ``metrics.jsonl``, ``checkpoints/``,
``model`` ...) would otherwise make a writer truncate, fill or delete its target, which can
be any file the process may write (any file at all for root). Every file the package opens
or removes inside such a folder goes through this module:

* :func:`open_file` and :func:`read_text` open with ``O_NOFOLLOW`` (a link as the last
  component fails instead of being followed) and ``O_NONBLOCK`` (a planted FIFO does not
  hang the open), accept only a regular file, and for writing only one with no other hard
  link; a file opened for writing is truncated only after these checks;
* :func:`check_no_links` checks every component between the folder and a path with
  ``lstat``, for the folders in between (``checkpoints/step_0000004/...``);
* :func:`remove_entry` removes a file or a whole folder only when neither it nor a folder on
  the way to it is a link (``shutil.rmtree`` itself removes links inside a tree without
  following them);
* :func:`check_tree` walks a folder without following links and refuses the first link.

Every refusal is a :class:`SymlinkRefusedError` (an ``OSError``, so the command line prints
it as one line with exit status 2) naming the link. The folder itself may be a link (the user
chose it); only what lies inside it is checked. The checks see the folder as it is when the
package opens a file: a process that swaps a folder for a link between the check and the
open could still win that race, which needs write access to the run folder while the run
writes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
from pathlib import Path
from typing import IO

__all__ = [
    "SymlinkRefusedError",
    "check_no_links",
    "check_tree",
    "is_regular_file",
    "open_fd",
    "open_file",
    "read_text",
    "refuse_link",
    "remove_entry",
]

_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # O_NOFOLLOW on a link: ELOOP (Linux), EMLINK (BSD)


class SymlinkRefusedError(OSError):
    """A symbolic link where the package expects its own file or folder.

    Attributes:
        link: the path of the link.
    """

    def __init__(self, link: str | os.PathLike[str]) -> None:
        self.link = Path(link)
        try:
            target = f" (to {os.readlink(link)})"
        except OSError:
            target = ""
        super().__init__(
            errno.ELOOP,
            f"{self.link} is a symbolic link{target}; complexformer does not follow links "
            "inside a folder it writes: remove the link or choose another folder",
        )

    def __str__(self) -> str:
        return self.strerror


def refuse_link(path: str | os.PathLike[str]) -> None:
    """Raise :class:`SymlinkRefusedError` if ``path`` is a symbolic link (a missing path is
    fine)."""
    if os.path.islink(path):
        raise SymlinkRefusedError(path)


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one; ``lstat``)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def check_no_links(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """Check that no component of ``path`` below ``root`` is a symbolic link.

    ``root`` itself is not checked; components that do not exist yet are fine.

    Args:
        path: a path inside ``root``.
        root: the folder the package owns (a run folder).

    Returns:
        ``path``.

    Raises:
        SymlinkRefusedError: a component is a link (it is named).
        ValueError: ``path`` is not inside ``root``.
    """
    path, root = Path(path), Path(root)
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise ValueError(f"{path} is not inside {root}") from None
    cur = root
    for part in rel.parts:
        if part in ("..", "."):
            raise ValueError(f"{path} leaves {root}")
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise SymlinkRefusedError(cur)
    return path


def check_tree(path: str | os.PathLike[str]) -> None:
    """Refuse a link at ``path`` or anywhere inside it (links are not followed).

    Raises:
        SymlinkRefusedError: the first link found (it is named).
    """
    refuse_link(path)
    if not os.path.isdir(path):
        return
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            refuse_link(os.path.join(dirpath, name))


def _not_regular(path: Path, writing: bool) -> str:
    # where a file is to be written the thing in its place is in the way; a path to read
    # (an input the user named, such as a folder) is theirs: it is only named
    return f"{path} is not a regular file" + ("; remove it" if writing else "")


def _open_fd(path: Path, flags: int, writing: bool) -> int:
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno in _LINK_ERRNOS and os.path.islink(path):
            raise SymlinkRefusedError(path) from None
        if os.path.lexists(path) and not is_regular_file(path):  # a FIFO with no reader ...
            raise OSError(errno.EINVAL, _not_regular(path, writing)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, _not_regular(path, writing))
        if writing and st.st_nlink > 1:
            raise OSError(
                errno.EMLINK,
                f"{path} has {st.st_nlink - 1} other hard link(s); complexformer does not "
                "write a file shared with another name: remove it",
            )
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_fd(
    path: str | os.PathLike[str], flags: int, *, root: str | os.PathLike[str] | None = None
) -> int:
    """``os.open`` a regular file without following a link; see :func:`open_file`.

    ``O_TRUNC`` in ``flags`` is applied only after the checks (with ``ftruncate``).

    Returns:
        The file descriptor (close-on-exec).
    """
    path = Path(path)
    if root is not None:
        check_no_links(path.parent, root)
    writing = bool(flags & (os.O_WRONLY | os.O_RDWR))
    fd = _open_fd(path, flags & ~os.O_TRUNC, writing)
    if flags & os.O_TRUNC:
        os.ftruncate(fd, 0)
    return fd


def open_file(
    path: str | os.PathLike[str],
    mode: str = "r",
    *,
    root: str | os.PathLike[str] | None = None,
) -> IO:
    """Open a regular file without following a symbolic link.

    Args:
        path: the file.
        mode: ``"r"``, ``"rb"``, ``"w"``, ``"wb"``, ``"a"`` or ``"ab"`` (text is UTF-8;
            ``"w"`` creates or truncates, ``"a"`` creates or appends).
        root: the folder the package owns; the folders between it and ``path`` are checked
            too (:func:`check_no_links`).

    Returns:
        The open file.

    Raises:
        SymlinkRefusedError: ``path`` or a folder below ``root`` on the way is a link.
        OSError: ``path`` is not a regular file, or (for writing) has other hard links.
    """
    flags = {
        "r": os.O_RDONLY,
        "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
        "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    }.get(mode.rstrip("b"))
    if flags is None:
        raise ValueError(f"open_file mode must be r, w or a (with b), got {mode!r}")
    fd = open_fd(path, flags, root=root)
    try:
        if "b" in mode:
            return os.fdopen(fd, mode)
        return os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def read_text(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> str:
    """The UTF-8 text of a regular file, read without following a link (see
    :func:`open_file`)."""
    with open_file(path, "r", root=root) as f:
        return f.read()


def remove_entry(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Remove the file or folder ``path`` inside ``root``, never through a link.

    Args:
        path: what to remove (a missing path is fine).
        root: the folder the package owns (not checked itself).

    Returns:
        Whether something was removed.

    Raises:
        SymlinkRefusedError: ``path`` or a folder on the way to it is a link; nothing is
            removed.
    """
    path = check_no_links(path, root)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return True
