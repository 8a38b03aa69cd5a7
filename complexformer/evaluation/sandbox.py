"""Run untrusted Python programs (model-written code) in a constrained subprocess.

The code suite executes thousands of model completions; most are harmless garbage, a few loop
forever, allocate without bound, fork, delete files or open sockets. :func:`run_program` runs
one program so that such accidents cannot hurt the evaluation or the machine, in the spirit of
the ``reliability_guard`` of human-eval (Chen et al., "Evaluating Large Language Models Trained
on Code", 2021), but with operating-system limits underneath the Python-level guard:

* **Process**: a fresh interpreter (``sys.executable -I -S -B``: no user site, no ``PYTHON*``
  variables, no current directory on ``sys.path``, no ``.pth`` or ``sitecustomize`` code,
  no bytecode written; the site-packages directories are appended to ``sys.path``) in a
  **new session**, stdin from ``/dev/null``, stdout/stderr to files (never unbounded pipes).
* **Namespaces** where ``unshare`` works (as root, or unprivileged through a user namespace;
  probed once at run time): a **network namespace** (only a downed loopback: no connection
  anywhere, not even to 127.0.0.1) and a **PID namespace** whose init is the program, so that
  when it ends or is killed the kernel kills every process it left behind.
* **Resource limits** set in the child before the program runs: ``RLIMIT_AS`` (address
  space, default 1 GiB), ``RLIMIT_CPU`` (timeout + 1 s), ``RLIMIT_FSIZE`` (largest file,
  default 16 MiB; stdout/stderr included), ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0 and a
  process cap: ``RLIMIT_NPROC`` (exact inside a fresh user namespace on Linux >= 5.14, which
  counts processes per namespace; approximate, the user's current task count + the cap,
  without one; the kernel ignores it for root), or for root a ``pids`` cgroup with
  ``pids.max`` where the cgroup file system is writable (v1 ``/sys/fs/cgroup/pids``, or v2
  with ``pids`` delegated).
* **Wall-clock timeout** and clean-up: the whole process group is SIGKILLed (also after a
  normal exit, for processes left in the background); without a PID namespace every process
  still carrying the run's marker variable is killed too (one that left the group with
  ``setsid``); the cgroup is emptied and removed.
* **Files**: a fresh temporary working directory (also ``HOME`` and ``TMPDIR``), deleted
  afterwards; the environment is scrubbed (no proxy variables, no tokens: only ``PATH``,
  ``HOME``, ``TMPDIR``, locale and the marker).
* **Python-level guard** (``guard=True``, an audit hook, :pep:`578`): refuses opening files
  for writing, removing, renaming, linking, ``chmod``-ing or creating directories *outside*
  the working directory (paths resolved through symbolic links and ``dir_fd``), creating
  processes (``os.fork``, ``subprocess``, ``os.system``, ``exec*``, ``posix_spawn``),
  signalling (``os.kill``), sockets and DNS, loading libraries and calling or poking memory
  with ``ctypes`` (``import ctypes`` itself works, so numpy imports), raising resource limits
  and walking the garbage collector's object graph; ``os.setsid``/``setpgid``/``mknod``/
  ``chroot`` and ``_posixsubprocess.fork_exec`` are replaced by functions that raise.

What it is **not**: a VM or a container. The guard is best-effort against *accidents*: code
written to escape can (for instance) race a symbolic link between the check and the open,
or reach interpreter internals. The program runs with the caller's file permissions (a user
namespace maps it to the same user) and can *read* every file the caller can (as root:
anything); only the guard stops writes outside its directory. There is no seccomp filter, no mount
isolation, no limit on total memory across the (capped) processes beyond processes x
``RLIMIT_AS``. Without a PID namespace, killed orphans are re-parented to PID 1, which may
leave zombies where PID 1 does not reap. Run evaluations of untrusted models as an
unprivileged user, or in a container.
:func:`sandbox_capabilities` reports which layers are active on this machine.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SandboxResult",
    "find_sandbox_processes",
    "run_program",
    "sandbox_capabilities",
]

MARKER_VAR = "COMPLEXFORMER_SANDBOX"
_MEMORY_EXIT = 97  # the child's exit status after a MemoryError
_SETUP_EXIT = 98  # the child could not set up the sandbox (limits, cgroup)
_STATUSES = ("passed", "failed", "timeout", "memory", "error")
_counter = itertools.count()


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one sandboxed program.

    Attributes:
        status: ``"passed"`` (exit status 0), ``"failed"`` (a non-zero exit: an exception,
            a failed assert, a crash), ``"timeout"`` (wall-clock or CPU limit), ``"memory"``
            (``MemoryError`` under the address-space limit, or killed for memory) or
            ``"error"`` (the sandbox itself could not run the program).
        returncode: exit status of the outermost process (negative: killed by that signal);
            None when it never started.
        stdout: the last ``output_limit`` characters of standard output.
        stderr: the last ``output_limit`` characters of standard error.
        wall_time: seconds from start to exit (or kill).
        sandbox_id: the marker value of this run (see :func:`find_sandbox_processes`).
    """

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_time: float
    sandbox_id: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# --------------------------------------------------------------------------- child side
def _sandbox_child() -> None:  # pragma: no cover - runs in the sandboxed interpreter
    """The sandboxed interpreter's entry point, shipped to it as source (``python -c``).

    Self-contained (it sees none of this module). Reads its settings from ``sys.argv[1]``
    (JSON), joins the cgroup, sets the resource limits, enters the working directory,
    installs the guard, then runs the program as ``__main__``.
    """
    import json
    import os
    import resource
    import sys

    cfg = json.loads(sys.argv[1])
    try:
        if cfg["cgroup_procs"]:
            with open(cfg["cgroup_procs"], "w") as f:
                f.write("0")
        inf = resource.RLIM_INFINITY
        limits = [
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_AS", cfg["memory"], cfg["memory"]),
            ("RLIMIT_CPU", cfg["cpu"], cfg["cpu"] + 1),
            ("RLIMIT_FSIZE", cfg["fsize"], cfg["fsize"]),
            ("RLIMIT_NOFILE", cfg["nofile"], cfg["nofile"]),
            ("RLIMIT_NPROC", cfg["nproc"], cfg["nproc"]),
        ]
        for name, soft, hard in limits:
            if soft is None or not hasattr(resource, name):
                continue
            res = getattr(resource, name)
            _, cur_hard = resource.getrlimit(res)
            if cur_hard != inf:
                soft, hard = min(soft, cur_hard), min(hard, cur_hard)
            resource.setrlimit(res, (soft, hard))
        os.chdir(cfg["work"])
        with open(cfg["program"], encoding="utf-8") as f:
            source = f.read()
    except Exception as e:  # report, do not run the program unconstrained
        sys.stderr.write(f"sandbox setup failed: {type(e).__name__}: {e}\n")
        sys.stderr.flush()
        os._exit(cfg["setup_exit"])
    sys.dont_write_bytecode = True
    sys.path.extend(cfg["site_packages"])  # without .pth processing (-S): fast, no hooks
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.help = _sitebuiltins._Helper()

    if cfg["guard"]:
        import errno

        work = os.path.realpath(cfg["work"])
        prefix = work + os.sep
        write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        devices = {"/dev/null"}
        forbidden = frozenset(
            (
                "os.system",
                "os.exec",
                "os.posix_spawn",
                "os.spawn",
                "os.fork",
                "os.forkpty",
                "os.kill",
                "os.killpg",
                "subprocess.Popen",
                "pty.spawn",
                "os.startfile",
                "socket.__new__",
                "socket.bind",
                "socket.connect",
                "socket.getaddrinfo",
                "socket.gethostbyname",
                "socket.gethostbyaddr",
                "socket.getnameinfo",
                "socket.sendto",
                "socket.sendmsg",
                "socket.sethostname",
                "ctypes.dlsym",
                "ctypes.dlsym/handle",
                "ctypes.cdata",
                "ctypes.cdata/buffer",
                "ctypes.call_function",
                "ctypes.string_at",
                "ctypes.wstring_at",
                "resource.setrlimit",
                "resource.prlimit",
                "gc.get_objects",
                "gc.get_referrers",
                "gc.get_referents",
            )
        )
        # event -> ((index of a path argument, index of its dir_fd argument or None), ...)
        checked = {
            "os.remove": ((0, 1),),
            "os.rmdir": ((0, 1),),
            "os.mkdir": ((0, 2),),
            "os.chmod": ((0, 2),),
            "os.chown": ((0, 3),),
            "os.utime": ((0, 3),),
            "os.truncate": ((0, None),),
            "os.chflags": ((0, None),),
            "os.lchflags": ((0, None),),
            "os.setxattr": ((0, None),),
            "os.removexattr": ((0, None),),
            "os.rename": ((0, 2), (1, 3)),
            "os.link": ((0, 2), (1, 3)),
            "os.symlink": ((1, 2),),
            "shutil.rmtree": ((0, 1),),
            "shutil.chown": ((0, None),),
            "shutil.copyfile": ((1, None),),
            "shutil.copymode": ((1, None),),
            "shutil.copystat": ((1, None),),
            "shutil.move": ((0, None), (1, None)),
        }
        realpath, isabs, join, fsdecode = (
            os.path.realpath,
            os.path.isabs,
            os.path.join,
            os.fsdecode,
        )

        def denied(what: str, path: object = None) -> PermissionError:
            msg = f"sandbox: {what} is not allowed"
            return (
                PermissionError(errno.EACCES, msg)
                if path is None
                else PermissionError(errno.EACCES, msg, path)
            )

        def inside(path: object, dir_fd: object) -> bool:
            if isinstance(path, int):  # an open descriptor: checked when it was opened
                return True
            try:
                p = fsdecode(path)
                if p in devices:
                    return True
                if not isabs(p):
                    if isinstance(dir_fd, int) and dir_fd >= 0:
                        base = os.readlink(f"/proc/self/fd/{dir_fd}")
                    else:
                        base = os.getcwd()
                    p = join(base, p)
                real = realpath(p)
            except Exception:
                return False
            return real == work or real.startswith(prefix)

        def hook(event: str, args: tuple) -> None:
            if event == "open":
                path, mode, flags = (tuple(args) + (None, None, None))[:3]
                writing = (isinstance(flags, int) and flags & write_flags) or (
                    isinstance(mode, str) and any(c in mode for c in "wax+")
                )
                if writing and not inside(path, None):
                    raise denied("writing outside the working directory", path)
                return
            if event in forbidden or (event == "ctypes.dlopen" and args[0] is not None):
                raise denied(event)  # dlopen(None) lets ``import ctypes`` (numpy) work
            spec = checked.get(event)
            if spec is not None:
                for pi, fi in spec:
                    if pi < len(args):
                        fd = args[fi] if fi is not None and fi < len(args) else None
                        if not inside(args[pi], fd):
                            raise denied(f"{event} outside the working directory", args[pi])

        sys.addaudithook(hook)
        os_open = os.open

        def guarded_open(
            path: object, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
        ) -> int:
            # the "open" audit event omits dir_fd: resolve it here
            if dir_fd is not None and flags & write_flags and not inside(path, dir_fd):
                raise denied("writing outside the working directory", path)
            return os_open(path, flags, mode, dir_fd=dir_fd)

        os.open = guarded_open

        def blocked(*_args: object, **_kwargs: object) -> None:
            raise denied("this operation")

        import _posixsubprocess

        _posixsubprocess.fork_exec = blocked
        for name in ("setsid", "setpgid", "setpgrp", "mknod", "chroot", "unshare", "setns"):
            if hasattr(os, name):
                setattr(os, name, blocked)
        del hook, blocked, guarded_open, _posixsubprocess

    import linecache
    import types

    filename = "program.py"
    main = types.ModuleType("__main__")
    main.__dict__["__file__"] = os.path.join(cfg["work"], filename)
    sys.modules["__main__"] = main
    sys.argv = [filename]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    memory_exit = cfg["memory_exit"]
    del cfg
    try:
        exec(compile(source, filename, "exec"), main.__dict__)
    except MemoryError:
        try:
            sys.stderr.write("\nMemoryError: the sandbox's memory limit was reached\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(memory_exit)


# --------------------------------------------------------------------------- capabilities
_caps_lock = threading.Lock()
_caps: dict[str, Any] | None = None
_child_source: str | None = None


def _prelude() -> str:
    global _child_source
    if _child_source is None:
        import textwrap

        _child_source = textwrap.dedent(inspect.getsource(_sandbox_child)) + (
            "\n_sandbox_child()\n"
        )
    return _child_source


def _probe(cmd: list[str]) -> bool:
    try:
        r = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=20,
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _probe_unshare() -> tuple[list[str], list[str]]:
    """The first ``unshare`` prefix that runs Python here, and the namespaces it gives."""
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


def _cgroup_parent() -> str | None:
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
            _remove_cgroup(probe)
    return None


def _has_pids_v2(parent: str) -> bool:
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            return "pids" in f.read().split()
    except OSError:
        return False


def sandbox_capabilities() -> dict[str, Any]:
    """Which isolation layers :func:`run_program` uses on this machine (probed once).

    Returns:
        ``platform``; ``unshare`` (the command prefix, empty if none works); ``namespaces``
        (subset of ``user``, ``net``, ``pid``); ``cgroup`` (parent directory of the per-run
        ``pids`` cgroups, or None); ``process_limit``: ``"cgroup"``, ``"rlimit"`` (exact, in
        a fresh user namespace), ``"rlimit-approximate"`` (the user's task count + the cap)
        or ``"none"`` (root without a writable cgroup: only the guard and the timeout stop a
        fork bomb); ``euid``.
    """
    global _caps
    with _caps_lock:
        if _caps is None:
            posix = os.name == "posix"
            prefix, spaces = _probe_unshare() if posix else ([], [])
            cgroup = _cgroup_parent() if posix else None
            root = posix and os.geteuid() == 0
            if cgroup is not None:
                plimit = "cgroup"
            elif root:
                plimit = "none"
            elif "user" in spaces:
                plimit = "rlimit"
            else:
                plimit = "rlimit-approximate"
            _caps = {
                "platform": sys.platform,
                "unshare": prefix,
                "namespaces": spaces,
                "cgroup": cgroup,
                "process_limit": plimit,
                "euid": os.geteuid() if posix else None,
            }
        return dict(_caps)


# --------------------------------------------------------------------------- parent side
_site_dirs: list[str] | None = None


def _site_packages() -> list[str]:
    """This interpreter's site-packages directories (the child runs with ``-S``: no ``site``
    module, whose ``.pth`` processing triples the start-up time of a venv with editable
    installs)."""
    global _site_dirs
    if _site_dirs is None:
        import site

        dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
        _site_dirs = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
    return list(_site_dirs)


def _user_task_count() -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) of this real user."""
    uid, total = os.getuid(), 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields.get("Threads", "1"))
        except (OSError, KeyError, ValueError):
            continue
    return total


def find_sandbox_processes(sandbox_id: str) -> list[int]:
    """Live (non-zombie) processes that carry the marker of run ``sandbox_id`` in their
    environment (Linux ``/proc``; ``[]`` elsewhere or where it cannot be read)."""
    marker = f"{MARKER_VAR}={sandbox_id}".encode() + b"\0"
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker not in f.read() + b"\0":
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _kill_group(pgid: int) -> None:
    for _ in range(2):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.002)


def _kill_marked(sandbox_id: str, rounds: int = 3) -> None:
    for _ in range(rounds):
        pids = find_sandbox_processes(sandbox_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _remove_cgroup(path: str, wait: float = 2.0) -> None:
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


def _wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until ``proc`` exits *without reaping it* (so its process group id stays
    valid for :func:`_kill_group`); False on timeout."""
    if not hasattr(os, "waitid"):
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    delay = 0.001
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, flags) is not None:
                return True
        except ChildProcessError:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.02)


def _tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * limit))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def _force_rmtree(path: str) -> None:
    def retry(func, p, _exc):  # a program may have chmod-ed its files read-only
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def _status(rc: int, stderr: str, timed_out: bool) -> str:
    if timed_out or rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "timeout"
    if rc == 0:
        return "passed"
    if rc == _MEMORY_EXIT or "MemoryError" in stderr.strip().rsplit("\n", 1)[-1]:
        return "memory"
    if rc == _SETUP_EXIT and "sandbox setup failed" in stderr:
        return "error"
    return "failed"


def _check_positive(name: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def run_program(
    source: str,
    *,
    timeout: float = 3.0,
    memory_mb: int = 1024,
    max_processes: int = 16,
    max_file_size_mb: int = 16,
    max_open_files: int = 256,
    cpu_seconds: int | None = None,
    guard: bool = True,
    site_packages: bool = True,
    output_limit: int = 4000,
) -> SandboxResult:
    """Run the Python program ``source`` in the sandbox described in the module docstring.

    Thread-safe: the code suite runs several at once from a thread pool.

    Args:
        source: the program text (run as ``__main__`` in a fresh interpreter).
        timeout: wall-clock seconds before the process group is killed.
        memory_mb: ``RLIMIT_AS`` per process, in MiB.
        max_processes: cap on processes and threads (cgroup ``pids.max`` or
            ``RLIMIT_NPROC``; see :func:`sandbox_capabilities`).
        max_file_size_mb: ``RLIMIT_FSIZE`` in MiB (also bounds stdout and stderr).
        max_open_files: ``RLIMIT_NOFILE``.
        cpu_seconds: ``RLIMIT_CPU`` (default ``ceil(timeout) + 1``).
        guard: install the Python-level guard (audit hook). Turn it off only to test the
            operating-system layers underneath it.
        site_packages: put this interpreter's site-packages directories on the program's
            ``sys.path`` (their ``.pth`` files are not run; False: the standard library only).
        output_limit: characters of stdout/stderr kept (the tails).

    Returns:
        A :class:`SandboxResult`; this function does not raise for anything the program does.

    Raises:
        ValueError: a non-positive limit.
        OSError: not a POSIX system (the limits need the ``resource`` module).
    """
    for name, value in (
        ("timeout", timeout),
        ("memory_mb", memory_mb),
        ("max_processes", max_processes),
        ("max_file_size_mb", max_file_size_mb),
        ("max_open_files", max_open_files),
        ("output_limit", output_limit),
    ):
        _check_positive(name, value)
    _check_positive("cpu_seconds", cpu_seconds, allow_none=True)
    if os.name != "posix":
        raise OSError(f"the sandbox needs a POSIX system (resource limits); this is {os.name!r}")
    caps = sandbox_capabilities()
    sandbox_id = f"{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:12]}"
    root = tempfile.mkdtemp(prefix="complexformer-sandbox-")
    cgroup = None
    t0 = time.monotonic()
    try:
        work = os.path.join(root, "work")
        os.mkdir(work, 0o700)
        program = os.path.join(root, "program.py")
        with open(program, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(source)
        if caps["process_limit"] == "rlimit":
            nproc = max_processes + 1  # unshare is counted in the new user namespace too
        elif caps["process_limit"] == "rlimit-approximate":
            nproc = _user_task_count() + max_processes
        else:
            nproc = None
        if caps["cgroup"] is not None:
            cgroup = os.path.join(caps["cgroup"], f"complexformer-sandbox-{sandbox_id}")
            try:
                os.mkdir(cgroup)
                with open(os.path.join(cgroup, "pids.max"), "w") as f:
                    f.write(str(max_processes))
            except OSError as e:
                return SandboxResult(
                    "error",
                    None,
                    "",
                    f"sandbox: cgroup setup failed: {e}",
                    time.monotonic() - t0,
                    sandbox_id,
                )
        cfg = {
            "work": work,
            "program": program,
            "guard": bool(guard),
            "memory": int(memory_mb) << 20,
            "fsize": int(max_file_size_mb) << 20,
            "cpu": int(cpu_seconds or math.ceil(timeout) + 1),
            "nofile": int(max_open_files),
            "nproc": nproc,
            "cgroup_procs": cgroup and os.path.join(cgroup, "cgroup.procs"),
            "memory_exit": _MEMORY_EXIT,
            "setup_exit": _SETUP_EXIT,
            "site_packages": _site_packages() if site_packages else [],
        }
        env = {
            "PATH": os.defpath,
            "HOME": work,
            "TMPDIR": work,
            "TMP": work,
            "TEMP": work,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            MARKER_VAR: sandbox_id,
        }
        cmd = [
            *caps["unshare"],
            sys.executable,
            "-I",
            "-S",
            "-B",
            "-c",
            _prelude(),
            json.dumps(cfg),
        ]
        out_path, err_path = os.path.join(root, "stdout"), os.path.join(root, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=work,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as e:
                return SandboxResult(
                    "error",
                    None,
                    "",
                    f"sandbox: could not start: {e}",
                    time.monotonic() - t0,
                    sandbox_id,
                )
            timed_out = not _wait_exit(proc, timeout)
            wall = time.monotonic() - t0
            _kill_group(proc.pid)  # the leader is not reaped yet: its group id is still ours
            rc = proc.wait()
        if "pid" not in caps["namespaces"]:
            _kill_marked(sandbox_id)  # processes that left the group (setsid)
        if cgroup is not None:
            _remove_cgroup(cgroup)
            cgroup = None
        stdout, stderr = _tail(out_path, output_limit), _tail(err_path, output_limit)
        return SandboxResult(_status(rc, stderr, timed_out), rc, stdout, stderr, wall, sandbox_id)
    finally:
        if cgroup is not None:
            _remove_cgroup(cgroup)
        _force_rmtree(root)
