"""Run untrusted Python programs (model-written code) in an isolated subprocess.

The code suite executes thousands of model completions; most are harmless garbage, a few loop
forever, allocate without bound, fork, delete files or open sockets, and a hostile one may try
to escape on purpose. :func:`run_program` runs one program in layers (outermost first):

* **Operating-system isolation** (:mod:`.isolation`, where bubblewrap works; see
  :func:`sandbox_capabilities`): ``bwrap`` as uid 65534 in new mount, PID, network, IPC and
  UTS namespaces (and a user namespace when not root), on a file system that holds only the
  shared libraries, the interpreter, its standard library, the site-packages, the program
  (read-only) and a private ``tmpfs`` working directory, with a fresh ``/proc``, a cleared
  environment and ``--die-with-parent``, and a seccomp filter (:mod:`.seccomp`: sockets of
  the Unix family only, no ``io_uring``). Without bubblewrap (``isolation="none"``), the older
  layer: ``unshare`` network and PID namespaces, as the caller, on the host's file system.
* **Process**: a fresh interpreter (``python -I -S -B``: no user site, no ``PYTHON*``
  variables, no ``.pth`` or ``sitecustomize`` code, no bytecode written; the site-packages
  directories appended to ``sys.path``) in a **new session**, stdin from ``/dev/null`` (or
  the caller's pipe), stdout/stderr to pipes that a thread reads, keeping the tails and
  closing a stream after ``max_file_size_mb`` (never files on the host: no disk to take).
* **Resource limits** set in the child before the program runs: ``RLIMIT_AS`` (address
  space, default 1 GiB), ``RLIMIT_CPU`` (timeout + 1 s), ``RLIMIT_FSIZE`` (largest file,
  default 16 MiB), ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0 and a
  process cap: a ``pids`` cgroup with ``pids.max`` for root where the cgroup file system is
  writable (v1 ``/sys/fs/cgroup/pids``, or v2 with ``pids`` delegated), else
  ``RLIMIT_NPROC`` (exact inside a fresh user namespace on Linux >= 5.14; approximate, the
  user's task count + the cap, without one).
* **One memory budget** (root, where a memory cgroup is writable): a memory cgroup per run
  below the evaluator's own, limited to ``memory_mb`` + ``MEMORY_OVERHEAD_MB``: all its
  processes, its ``tmpfs`` files and shared memory count together; the kernel's OOM killer
  ends a process beyond it (status ``"memory"``). Without one, ``RLIMIT_AS`` per process and
  the sized, otherwise read-only file systems.
* **Wall-clock timeout** and clean-up: the process group is SIGKILLed (also after a normal
  exit); the PID namespace dies with its init; without one, every process still carrying the
  run's marker variable is killed too; the cgroups are emptied and removed; the run's files
  are deleted. What an evaluator killed outright left behind, the next one removes
  (:func:`sweep_leftovers`).
* **Python-level guard** (``guard=True``, an audit hook, :pep:`578`; :mod:`.sandboxed_side`),
  the inner layer: refuses writes outside the working directory, creating processes,
  signalling, sockets, ``ctypes`` calls, raising limits and walking the garbage collector.
  Code written to escape can switch it off; it stays because it is cheap and turns common
  accidents into clear errors.

What it is **not**: a VM. The seccomp filter is narrow (the network stack and
``io_uring``), not an allow-list; the kernel is shared. Without
bubblewrap the program runs with the caller's permissions and can read every file the
caller can (as root: anything), and only the guard stops writes outside its directory: the
code suite refuses that unless told ``--unsafe-python-guard-only``.
:func:`sandbox_capabilities` reports which layers are active on this machine.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .isolation import (
    BWRAP_PROCESSES,
    PROGRAM_PATH,
    SANDBOX_UID,
    WORK_DIR,
    bwrap_command,
    cgroup_parent,
    filter_pipe,
    force_rmtree,
    memory_cgroup_parent,
    memory_report,
    owner_token,
    probe_bwrap,
    probe_unshare,
    remove_cgroup,
    set_memory_limit,
    sweep_dead_owners,
)
from .output import OutputPipes
from .processes import (
    MARKER_VAR,
    find_sandbox_processes,
    kill_group,
    kill_marked,
    user_task_count,
    wait_exit,
)
from .seccomp import socket_filter

__all__ = [
    "RunningProgram",
    "SandboxUnavailableError",
    "SandboxResult",
    "find_sandbox_processes",
    "make_memory_cgroup",
    "run_program",
    "sandbox_capabilities",
    "site_package_dirs",
    "start_program",
    "sweep_leftovers",
]

_MEMORY_EXIT = 97  # the child's exit status after a MemoryError
_SETUP_EXIT = 98  # the child could not set up the sandbox (limits, cgroup)
_STATUSES = ("passed", "failed", "timeout", "memory", "error")
_counter = itertools.count()
_CHILD_FILES = ("literal_codec.py", "sandboxed_side.py")
#: what the memory cgroup allows beyond ``memory_mb``: bubblewrap's processes, the
#: interpreter's own start-up and the kernel's page tables and namespaces
MEMORY_OVERHEAD_MB = 64


class SandboxUnavailableError(OSError):
    """The operating-system isolation that was asked for does not work on this machine."""


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
        memory_peak: the most memory the run's memory cgroup held at once, in bytes (all
            its processes, its ``tmpfs`` files and kernel memory); None without one.
    """

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_time: float
    sandbox_id: str
    memory_peak: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# --------------------------------------------------------------------------- capabilities
_caps_lock = threading.Lock()
_caps: dict[str, Any] | None = None
_child_source: str | None = None
_HERE = Path(__file__).resolve().parent


def _prelude() -> str:
    """The child's source: :mod:`.literal_codec` then :mod:`.sandboxed_side`, then ``main()``."""
    global _child_source
    if _child_source is None:
        parts = [(_HERE / name).read_text(encoding="utf-8") for name in _CHILD_FILES]
        _child_source = "\n".join(parts) + "\nmain()\n"
    return _child_source


def sandbox_capabilities() -> dict[str, Any]:
    """Which isolation layers :func:`run_program` uses on this machine (probed once).

    Returns:
        ``platform``; ``bwrap`` (path of a working bubblewrap, or None); ``isolation``
        (``"bwrap"``: operating-system isolation of :mod:`.isolation`, or ``"none"``);
        ``seccomp`` (whether bubblewrap loads the filter of :mod:`.seccomp`: sockets of the
        Unix family only, no ``io_uring``); ``uid`` (the user programs run as: 65534 under
        bwrap, else ``euid``); ``unshare`` (the command prefix used without bwrap, empty if
        none works); ``namespaces``
        (those in force: ``user``, ``mount``, ``pid``, ``net``, ``ipc``, ``uts``);
        ``unshare_namespaces`` (those of the ``unshare`` prefix);
        ``cgroup`` (parent directory of the per-run ``pids`` cgroups, or None);
        ``memory_cgroup`` (parent directory of the per-run memory cgroups, or None) and
        ``memory_cgroup_version`` (1 or 2); ``memory_limit``: ``"cgroup"`` (one budget for
        all processes and file systems of a run: ``memory_mb`` + ``MEMORY_OVERHEAD_MB``)
        or ``"rlimit"`` (``RLIMIT_AS`` per process and sized ``tmpfs`` mounts only);
        ``process_limit``: ``"cgroup"``, ``"rlimit"`` (exact, in a fresh user namespace),
        ``"rlimit-approximate"`` (the user's task count + the cap) or ``"none"`` (root
        without bwrap or a writable cgroup: only the guard and the timeout stop a fork
        bomb); ``euid``; ``layers``: the layers in force, outermost first.
    """
    global _caps
    with _caps_lock:
        if _caps is None:
            posix = os.name == "posix"
            program = socket_filter() if posix else None
            bwrap = probe_bwrap(site_package_dirs(), program) if program else None
            if bwrap is None:  # no filter for this machine, or one the kernel refused
                program = None
                bwrap = probe_bwrap(site_package_dirs()) if posix else None
            prefix, spaces = probe_unshare() if posix else ([], [])
            cgroup = cgroup_parent() if posix else None
            memory = memory_cgroup_parent() if posix else None
            root = posix and os.geteuid() == 0
            if cgroup is not None:
                plimit = "cgroup"
            elif bwrap is not None:
                plimit = "rlimit"  # bwrap's user namespace counts its own processes
            elif root:
                plimit = "none"
            else:
                plimit = "rlimit" if "user" in spaces else "rlimit-approximate"
            _caps = {
                "platform": sys.platform,
                "bwrap": bwrap,
                "isolation": "bwrap" if bwrap else "none",
                "seccomp": bool(bwrap and program),
                "uid": SANDBOX_UID if bwrap else (os.geteuid() if posix else None),
                "unshare": prefix,
                "namespaces": spaces,
                "cgroup": cgroup,
                "memory_cgroup": memory[0] if memory else None,
                "memory_cgroup_version": memory[1] if memory else None,
                "memory_limit": "cgroup" if memory else "rlimit",
                "process_limit": plimit,
                "euid": os.geteuid() if posix else None,
            }
        caps = dict(_caps)
    return dict(
        caps,
        namespaces=_namespaces(caps),
        unshare_namespaces=list(caps["namespaces"]),
        layers=_layers(caps),
    )


def _namespaces(caps: dict[str, Any]) -> list[str]:
    if caps.get("bwrap"):
        return ["user", "mount", "pid", "net", "ipc", "uts"]
    return list(caps["namespaces"])


def _layers(caps: dict[str, Any]) -> list[str]:
    layers = []
    if caps.get("bwrap"):
        layers += [
            f"bubblewrap ({caps['bwrap']}) as uid {SANDBOX_UID}",
            "namespaces: " + ", ".join(_namespaces(caps)),
            "read-only minimal file system, private tmpfs work directory, fresh /proc",
            "cleared environment, --die-with-parent",
        ]
        if caps.get("seccomp"):
            layers.append("seccomp filter: sockets of the Unix family only, no io_uring")
    elif caps["namespaces"]:
        layers.append("unshare namespaces: " + ", ".join(caps["namespaces"]))
    if caps["process_limit"] != "none":
        layers.append(f"process cap ({caps['process_limit']})")
    if caps.get("memory_limit") == "cgroup":
        layers.append(
            "memory cgroup: one budget for all processes and file systems "
            f"(memory_mb + {MEMORY_OVERHEAD_MB} MiB)"
        )
    layers += ["resource limits (address space, CPU, file size, open files)", "timeout"]
    layers.append("Python guard (audit hook), inner layer")
    return layers


# --------------------------------------------------------------------------- parent side
_site_dirs: list[str] | None = None


def site_package_dirs() -> list[str]:
    """This interpreter's site-packages directories (the child runs with ``-S``: no ``site``
    module, whose ``.pth`` processing triples the start-up time of a venv with editable
    installs)."""
    global _site_dirs
    if _site_dirs is None:
        dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
        _site_dirs = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
    return list(_site_dirs)


_owner_lock = threading.Lock()
_owner_cache: tuple[int, str] | None = None
_swept: int | None = None


def _owner() -> str:
    """This process's owner mark (:func:`.isolation.owner_token`), cached per pid."""
    global _owner_cache
    with _owner_lock:
        if _owner_cache is None or _owner_cache[0] != os.getpid():
            token = owner_token() or f"{os.getpid()}.0.0"
            _owner_cache = (os.getpid(), token)
        return _owner_cache[1]


def sweep_leftovers(tmp_dir: str | None = None) -> list[str]:
    """Remove the cgroups and temporary directories that sandboxes of evaluating processes
    that no longer exist left behind (an evaluator killed with SIGKILL cannot clean up).

    A name carries its owner's pid, start time and PID namespace
    (``complexformer-sandbox-PID.START.NS-...``); only names whose owner is gone are
    removed, never those of a live evaluation, nor names without that mark. The first
    :func:`start_program` of each process calls it.

    Args:
        tmp_dir: where the temporary directories are (default ``tempfile.gettempdir()``).

    Returns:
        The paths removed.
    """
    caps = sandbox_capabilities()
    parents = sorted({caps["cgroup"], caps.get("memory_cgroup")} - {None})
    return sweep_dead_owners(parents, tmp_dir or tempfile.gettempdir())


def _sweep_once() -> None:
    global _swept
    with _owner_lock:
        if _swept == os.getpid():
            return
        _swept = os.getpid()
    try:
        sweep_leftovers()
    except OSError:  # never a reason not to run the program
        pass


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
    isolation: str = "auto",
) -> SandboxResult:
    """Run the Python program ``source`` in the sandbox described in the module docstring.

    Thread-safe: the code suite runs several at once from a thread pool.

    Args:
        source: the program text (run as ``__main__`` in a fresh interpreter).
        timeout: wall-clock seconds before the process group is killed.
        memory_mb: the memory budget in MiB: ``RLIMIT_AS`` per process and, where a memory
            cgroup is available, the limit of the whole run (its processes and files) plus
            ``MEMORY_OVERHEAD_MB``.
        max_processes: cap on processes and threads (cgroup ``pids.max`` or
            ``RLIMIT_NPROC``; see :func:`sandbox_capabilities`).
        max_file_size_mb: ``RLIMIT_FSIZE`` in MiB (the ``tmpfs`` working directory holds
            4 such files), and the most of stdout and of stderr read before the stream is
            closed.
        max_open_files: ``RLIMIT_NOFILE``.
        cpu_seconds: ``RLIMIT_CPU`` (default ``ceil(timeout) + 1``).
        guard: install the Python-level guard (audit hook). Turn it off only to test the
            operating-system layers underneath it.
        site_packages: put this interpreter's site-packages directories on the program's
            ``sys.path`` (their ``.pth`` files are not run; False: the standard library only).
        output_limit: characters of stdout/stderr kept (the tails; of the last
            :data:`.output.OUTPUT_KEPT` bytes read).
        isolation: ``"auto"`` (bubblewrap where :func:`sandbox_capabilities` found it, else
            the ``unshare`` namespaces), ``"bwrap"`` (required) or ``"none"`` (no bubblewrap).

    Returns:
        A :class:`SandboxResult`; this function does not raise for anything the program does.

    Raises:
        ValueError: a non-positive limit, or an unknown ``isolation``.
        SandboxUnavailableError: ``isolation="bwrap"`` where bubblewrap does not work.
        OSError: not a POSIX system (the limits need the ``resource`` module).
    """
    _check_positive("output_limit", output_limit)
    run = start_program(
        source,
        timeout=timeout,
        memory_mb=memory_mb,
        max_processes=max_processes,
        max_file_size_mb=max_file_size_mb,
        max_open_files=max_open_files,
        cpu_seconds=cpu_seconds,
        guard=guard,
        site_packages=site_packages,
        isolation=isolation,
    )
    return run.finish(timeout, output_limit)


class RunningProgram:
    """A sandboxed program started by :func:`start_program`; :meth:`finish` ends it."""

    def __init__(self, sandbox_id: str, root: str, caps: dict[str, Any], t0: float) -> None:
        self.sandbox_id, self.root, self.caps, self.t0 = sandbox_id, root, caps, t0
        self.proc: subprocess.Popen | None = None
        self.cgroups: list[str] = []
        self.memory_cgroup: str | None = None
        self.error: str | None = None
        self.output: OutputPipes | None = None

    def _result(self, status: str, stderr: str) -> SandboxResult:
        return SandboxResult(status, None, "", stderr, time.monotonic() - self.t0, self.sandbox_id)

    def finish(self, timeout: float, output_limit: int = 4000) -> SandboxResult:
        """Wait until the program exits or ``timeout`` seconds after its start have passed,
        kill everything it left behind, remove its files, and report."""
        try:
            if self.error is not None:
                return self._result("error", self.error)
            assert self.proc is not None
            left = max(0.0, timeout - (time.monotonic() - self.t0))
            timed_out = not wait_exit(self.proc, left)
            wall = time.monotonic() - self.t0
            kill_group(self.proc.pid)  # not reaped yet: its group id is still ours
            rc = self.proc.wait()
            if self.caps["isolation"] != "bwrap" and "pid" not in self.caps["namespaces"]:
                kill_marked(self.sandbox_id)  # processes that left the group (setsid)
            peak, oom_kills = None, 0
            if self.memory_cgroup is not None:
                peak, oom_kills = memory_report(
                    self.memory_cgroup, self.caps["memory_cgroup_version"]
                )
            self._remove_cgroups()
            out = err = ""
            if self.output is not None:
                self.output.close()
                out, err = (self.output.text(n, output_limit) for n in ("stdout", "stderr"))
            status = _status(rc, err, timed_out)
            if oom_kills and status == "failed":
                status = "memory"  # the cgroup's OOM killer ended a process of the run
            return SandboxResult(status, rc, out, err, wall, self.sandbox_id, peak)
        finally:
            self.close()

    def close(self) -> None:
        """Kill the program (if still running) and remove its cgroup and files."""
        if self.proc is not None and self.proc.returncode is None:
            kill_group(self.proc.pid)
            self.proc.wait()
        self._remove_cgroups()
        if self.output is not None:
            self.output.close()
        force_rmtree(self.root)

    def _remove_cgroups(self) -> None:
        while self.cgroups:
            remove_cgroup(self.cgroups.pop())
        self.memory_cgroup = None


def _resolve_caps(isolation: str) -> dict[str, Any]:
    caps = sandbox_capabilities()
    if isolation not in ("auto", "bwrap", "none"):
        raise ValueError(f"isolation must be 'auto', 'bwrap' or 'none', got {isolation!r}")
    if isolation == "bwrap" and not caps["bwrap"]:
        raise SandboxUnavailableError(
            "isolation='bwrap' but bubblewrap does not work here: install it "
            "(scripts/ensure-bwrap.sh, or apt-get install bubblewrap) and make sure user "
            "namespaces are allowed"
        )
    if isolation == "none" and caps["bwrap"]:
        spaces = caps["unshare_namespaces"]
        if caps["cgroup"]:
            plimit = "cgroup"
        elif caps["euid"] == 0:
            plimit = "none"
        else:
            plimit = "rlimit" if "user" in spaces else "rlimit-approximate"
        caps = dict(
            caps,
            bwrap=None,
            isolation="none",
            seccomp=False,
            namespaces=spaces,
            process_limit=plimit,
        )
    return caps


#: the ``sh`` wrapper that joins the run's cgroups (the arguments before ``--``), then
#: becomes bwrap (after it)
_JOIN = (
    'while [ "$1" != -- ]; do echo 0 > "$1" || { echo "sandbox setup failed: cannot join '
    '$1" >&2; exit 98; }; shift; done; shift; exec "$@"'
)


def _make_cgroups(
    run: RunningProgram,
    caps: dict[str, Any],
    sandbox_id: str,
    max_processes: int,
    memory_mb: int,
    bwrap: bool,
) -> None:
    """The run's ``pids`` and memory cgroups (one, where both controllers share a
    directory: cgroup v2), with their limits; recorded on ``run`` before any limit is set,
    so that :meth:`RunningProgram.close` removes what was made."""
    name = f"complexformer-sandbox-{sandbox_id}"
    pids_parent, mem_parent = caps["cgroup"], caps.get("memory_cgroup")
    if pids_parent is not None:
        path = os.path.join(pids_parent, name)
        os.mkdir(path)
        run.cgroups.append(path)
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(str(max_processes + (BWRAP_PROCESSES if bwrap else 0)))
    if mem_parent is not None:
        path = os.path.join(mem_parent, name)
        if path not in run.cgroups:
            os.mkdir(path)
            run.cgroups.append(path)
        run.memory_cgroup = path
        limit = (int(memory_mb) + MEMORY_OVERHEAD_MB) << 20
        set_memory_limit(path, caps["memory_cgroup_version"], limit)


def make_memory_cgroup(memory_mb: int, role: str) -> str | None:
    """A fresh memory cgroup limited to ``memory_mb`` + :data:`MEMORY_OVERHEAD_MB` (below
    the evaluator's own, named with its owner mark so that :func:`sweep_leftovers` removes
    it after a crash), or None without a writable memory cgroup. The caller removes it
    (:func:`.isolation.remove_cgroup`). ``role`` is a word in its name (``trusted``)."""
    caps = sandbox_capabilities()
    parent = caps.get("memory_cgroup")
    if parent is None:
        return None
    name = f"complexformer-sandbox-{_owner()}-{role}-{next(_counter)}-{uuid.uuid4().hex[:12]}"
    path = os.path.join(parent, name)
    os.mkdir(path)
    try:
        limit = (int(memory_mb) + MEMORY_OVERHEAD_MB) << 20
        set_memory_limit(path, caps["memory_cgroup_version"], limit)
    except OSError:
        remove_cgroup(path)
        raise
    return path


def start_program(
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
    isolation: str = "auto",
    serve: dict[str, Any] | None = None,
    report: dict[str, int] | None = None,
    stdin: int | None = None,
    pass_fds: tuple[int, ...] = (),
) -> RunningProgram:
    """Start ``source`` in the sandbox (the arguments of :func:`run_program`) and return at
    once; :meth:`RunningProgram.finish` waits, kills and reports.

    Args:
        serve: ``{"entry_point", "request_fd", "response_fd"}``: after the program ran, answer
            calls of the entry point over these descriptors (see :mod:`.sandboxed_side`).
        report: ``{"token_fd", "report_fd"}``: read a token from the first before the
            program runs, and write it to the second when the program ran to its end (see
            :mod:`.sandboxed_side`; both must be in ``pass_fds``).
        stdin: descriptor for the program's standard input (default ``/dev/null``).
        pass_fds: further descriptors the program inherits (same numbers).
    """
    limits = dict(timeout=timeout, memory_mb=memory_mb, max_processes=max_processes)
    limits.update(max_file_size_mb=max_file_size_mb, max_open_files=max_open_files)
    for name, value in limits.items():
        _check_positive(name, value)
    _check_positive("cpu_seconds", cpu_seconds, allow_none=True)
    if os.name != "posix":
        raise OSError(f"the sandbox needs a POSIX system (resource limits); this is {os.name!r}")
    caps = _resolve_caps(isolation)
    bwrap = caps["bwrap"]
    _sweep_once()
    owner = _owner()
    sandbox_id = f"{owner}-{next(_counter)}-{uuid.uuid4().hex[:12]}"
    root = tempfile.mkdtemp(prefix=f"complexformer-sandbox-{owner}-")
    run = RunningProgram(sandbox_id, root, caps, 0.0)
    run.t0 = time.monotonic()
    try:
        work = WORK_DIR if bwrap else os.path.join(run.root, "work")
        if not bwrap:
            os.mkdir(work, 0o700)
        program = os.path.join(run.root, "program.py")
        with open(program, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(source)
        os.chmod(program, 0o644)  # read by uid 65534 through a read-only bind
        nproc = _nproc_limit(caps["process_limit"], max_processes, bool(bwrap))
        try:
            _make_cgroups(run, caps, sandbox_id, max_processes, memory_mb, bool(bwrap))
        except OSError as e:
            run.error = f"sandbox: cgroup setup failed: {e}"
            return run
        procs = [os.path.join(c, "cgroup.procs") for c in run.cgroups]
        cfg = {
            "work": work,
            "program": PROGRAM_PATH if bwrap else program,
            "guard": bool(guard),
            "memory": int(memory_mb) << 20,
            "fsize": int(max_file_size_mb) << 20,
            "cpu": int(cpu_seconds or math.ceil(timeout) + 1),
            "nofile": int(max_open_files),
            "nproc": nproc,
            "cgroup_procs": [] if bwrap else procs,
            "memory_exit": _MEMORY_EXIT,
            "setup_exit": _SETUP_EXIT,
            "site_packages": site_package_dirs() if site_packages else [],
            "serve": serve,
            "report": report,
        }
        _spawn(run, cfg, procs, program, int(max_file_size_mb) << 20, stdin, pass_fds)
        return run
    except BaseException:
        run.close()
        raise


def _nproc_limit(process_limit: str, max_processes: int, bwrap: bool) -> int | None:
    """RLIMIT_NPROC of the sandboxed program for the way processes are limited here."""
    if process_limit == "rlimit":
        # counted in the new user namespace too: unshare, or bwrap's init when not root
        # (as root the inner bwrap stays outside it)
        return max_processes + (0 if bwrap and os.geteuid() == 0 else 1)
    if process_limit == "rlimit-approximate":
        return user_task_count(os.getuid()) + max_processes
    return None


def _spawn(
    run: RunningProgram,
    cfg: dict[str, Any],
    procs: list[str],
    program: str,
    output_cap: int,
    stdin: int | None,
    pass_fds: tuple[int, ...],
) -> None:
    """Start the sandboxed interpreter for ``cfg`` (under bubblewrap where the run's caps
    have it, else under unshare) with capped output pipes; ``run.error`` says why not."""
    caps, work = run.caps, cfg["work"]
    bwrap = caps["bwrap"]
    env = {
        "PATH": os.defpath,
        "HOME": work,
        "TMPDIR": work,
        "TMP": work,
        "TEMP": work,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        MARKER_VAR: run.sandbox_id,
    }
    args = ["-I", "-S", "-B", "-c", _prelude(), json.dumps(cfg)]
    ends: list[int] = []  # descriptors only the child needs: closed here once it started
    try:
        if bwrap:
            seccomp = socket_filter() if caps.get("seccomp") else None
            fd = None if seccomp is None else filter_pipe(seccomp)
            ends += [] if fd is None else [fd]
            cmd = bwrap_command(bwrap, program, env, cfg["site_packages"], 4 * output_cap, fd)
            cmd += args
            if procs:  # join the cgroups as root, before bwrap drops to uid 65534
                cmd = ["/bin/sh", "-c", _JOIN, "sh", *procs, "--", *cmd]
            outer_env = {k: env[k] for k in ("PATH", "LANG", "LC_ALL", MARKER_VAR)}
            cwd = run.root
        else:
            cmd = [*caps["unshare"], sys.executable, *args]
            outer_env, cwd = env, work
        # stdout and stderr: capped pipes read by a thread, never files on the host
        out_r, out_w = os.pipe()
        ends.append(out_w)
        err_r, err_w = os.pipe()
        ends.append(err_w)
        run.output = OutputPipes({"stdout": out_r, "stderr": err_r}, output_cap)
        try:
            run.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=out_w,
                stderr=err_w,
                cwd=cwd,
                env=outer_env,
                start_new_session=True,
                close_fds=True,
                pass_fds=(*pass_fds, *(fd for fd in ends if fd not in (out_w, err_w))),
            )
        except OSError as e:
            run.error = f"sandbox: could not start: {e}"
    finally:
        for fd in ends:
            os.close(fd)
        if run.output is not None:
            run.output.start()
