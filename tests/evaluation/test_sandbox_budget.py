"""The sandbox's memory budget, its leftovers and its file system, tried as an attacker would.

* One memory budget per program: a completion that re-imports ``_posixsubprocess`` (past the
  Python guard) and starts fresh interpreters cannot fill ``/dev/shm`` or ``/dev`` (read-only),
  nor take more than ``memory_mb`` + the stated overhead across several processes and the
  ``tmpfs`` working directory together (the run's memory cgroup, read host-side).
* Nothing left behind: the cgroups and temporary directory of an evaluator killed with
  SIGKILL are removed by the next evaluation, never those of a live one.
* Imports work wherever the environment lives: a venv under a temporary folder (mounted
  after ``/tmp``), and only its own site-packages are visible.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from complexformer.evaluation.code_suite import check_completions
from complexformer.evaluation.sandbox import (
    find_sandbox_processes,
    run_program,
    runner,
    sandbox_capabilities,
    sweep_leftovers,
)
from complexformer.evaluation.sandbox.isolation import owner_token
from tests.evaluation.hostile_testlib import _FORK_EXEC, TOY

CAPS = sandbox_capabilities()
PROJECT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
BUDGET = (256 + runner.MEMORY_OVERHEAD_MB) * MIB  # memory_mb=256 and the stated overhead

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not CAPS["bwrap"],
    reason="needs Linux with working bubblewrap (scripts/ensure-bwrap.sh)",
)
needs_memory_cgroup = pytest.mark.skipif(
    CAPS["memory_limit"] != "cgroup", reason="no writable memory cgroup here (root only)"
)

# a fresh interpreter, past the guard, that writes up to 1 GiB into each place and prints
# how many MiB it wrote where
_WRITER = """
import os, sys
for d in sys.argv[1:]:
    n = 0
    try:
        with open(os.path.join(d, "fill"), "wb") as f:
            for _ in range(1024):
                f.write(b"x" * 2**20)
                f.flush()
                n += 1
    except OSError:
        pass
    print(d, n, flush=True)
"""

FILL_DEVICES = (
    _FORK_EXEC
    + f"""
import time
spawn([sys.executable, "-c", {_WRITER!r}, "/dev/shm", "/dev", "/", "/tmp", "/sandbox"])
time.sleep(2.0)
"""
)


def test_dev_shm_and_the_other_file_systems_cannot_be_filled():
    shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    r = run_program(FILL_DEVICES, memory_mb=256, timeout=3.0)
    wrote = {ln.split()[0]: int(ln.split()[1]) for ln in r.stdout.splitlines()}
    # /dev (and /dev/shm in it), the root and /sandbox are read-only; as root the inner
    # bwrap's /tmp holds 1 MiB (a 1 MiB file does not fit beside nothing: 0 or 1)
    assert wrote == {"/dev/shm": 0, "/dev": 0, "/": 0, "/tmp": wrote["/tmp"], "/sandbox": 0}, r
    assert wrote["/tmp"] <= 1
    assert (set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()) == shm
    if CAPS["memory_limit"] == "cgroup":
        assert r.memory_peak is not None and r.memory_peak <= BUDGET


# three fresh interpreters and the program itself, 200 MiB each, touched page by page
THREE_CHILDREN = (
    _FORK_EXEC
    + """
import time
child = "b = bytearray(200 * 2**20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n" \\
        "import time; time.sleep(5)"
for _ in range(3):
    spawn([sys.executable, "-c", child])
w = bytearray(200 * 2**20)
for i in range(0, len(w), 4096):
    w[i] = 1
time.sleep(1.5)
print("all 800 MiB held", flush=True)
"""
)

# the working directory's tmpfs made 4 GiB large (max_file_size_mb=1024): three processes
# write 400 MiB each into it
TMPFS_FILL = (
    _FORK_EXEC
    + """
import time
writer = "import os\\nwith open('f%d' % os.getpid(), 'wb') as f:\\n" \\
         "    for _ in range(400):\\n        f.write(b'x' * 2**20)\\n        f.flush()\\n" \\
         "print('wrote 400 MiB', flush=True)"
for _ in range(3):
    spawn([sys.executable, "-c", writer])
time.sleep(2.5)
"""
)


# System V shared memory, filled and detached (it outlives every mapping), 6 x 200 MiB
SYSV_SHM = """
import ctypes
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for n in range(6):
    sid = libc.shmget(0, 200 * 2**20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 200 * 2**20)
    libc.shmdt(ctypes.c_void_p(addr))
    print("segment", n, flush=True)
"""


@needs_memory_cgroup
@pytest.mark.parametrize("attack", ["processes", "tmpfs", "sysv-shm"])
def test_all_processes_and_files_share_one_memory_budget(attack):
    src, size = {
        "processes": (THREE_CHILDREN, 16),
        "tmpfs": (TMPFS_FILL, 1024),
        "sysv-shm": (SYSV_SHM, 16),
    }[attack]
    # the guard off for the System V attack (it refuses ctypes; the others re-import
    # _posixsubprocess past it)
    r = run_program(
        src, memory_mb=256, timeout=3.0, max_file_size_mb=size, guard=attack != "sysv-shm"
    )
    # the kernel's count of the run's memory cgroup: never above memory_mb + the overhead
    assert r.memory_peak is not None and r.memory_peak <= BUDGET, r.memory_peak
    assert r.memory_peak > 200 * MIB  # it did try
    if attack == "processes":
        assert r.status == "memory" and "all 800 MiB held" not in r.stdout, r
    elif attack == "tmpfs":
        assert r.stdout.count("wrote 400 MiB") < 3, r
    else:
        assert r.status == "memory" and r.stdout.count("segment") < 2, r
    assert find_sandbox_processes(r.sandbox_id) == []
    leftover = [p for p in os.listdir(CAPS["memory_cgroup"]) if r.sandbox_id in p]
    assert leftover == []


@needs_memory_cgroup
def test_the_evaluator_stays_within_two_budgets_with_two_workers():
    # each hog: four processes of 200 MiB (under RLIMIT_AS, so only the cgroup stops them)
    hog = _FORK_EXEC + (
        "\nchild = 'b = bytearray(200 * 2**20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
        "import time\\ntime.sleep(3)'"
        "\nfor _ in range(3):\n    spawn([sys.executable, '-c', child])\n"
        "w = bytearray(200 * 2**20)\nfor i in range(0, len(w), 4096):\n    w[i] = 1\n"
        "import time\ntime.sleep(1)\nreturn a + b\n"
    )
    hog = "".join("    " + ln + "\n" for ln in hog.splitlines())
    parent = CAPS["memory_cgroup"]
    v1 = CAPS["memory_cgroup_version"] == 1
    usage_file = "memory.usage_in_bytes" if v1 else "memory.current"
    peak_file = "memory.max_usage_in_bytes" if v1 else "memory.peak"
    owner = f"complexformer-sandbox-{owner_token()}-"
    # highest sums seen: over the sandboxed programs' cgroups, and over those and the trusted
    # checkers' cgroups (each check has both, docs/evaluation_code.md)
    total_peak, peaks, done = {"programs": 0, "all": 0}, {}, threading.Event()

    def read(*parts: str) -> int:
        try:
            return int(Path(*parts).read_text())
        except (OSError, ValueError):
            return 0

    def watch():  # this process's live sandboxes, read from the host
        while not done.is_set():
            names = [n for n in os.listdir(parent) if n.startswith(owner)]
            usage = {n: read(parent, n, usage_file) for n in names}
            programs = sum(v for n, v in usage.items() if "-trusted-" not in n)
            total_peak["programs"] = max(total_peak["programs"], programs)
            total_peak["all"] = max(total_peak["all"], sum(usage.values()))
            for n in names:
                peaks[n] = max(peaks.get(n, 0), read(parent, n, peak_file))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        pairs = [(TOY, hog), (TOY, hog), (TOY, "    return a + b\n")]
        # a generous timeout: under load the hogs must meet the memory limit, not the clock
        results = check_completions(pairs, workers=2, memory_mb=256, timeout=10.0)
    finally:
        done.set()
        watcher.join()
    # each hog tried 800 MiB in four processes; each held at most one budget, the two
    # sandboxed programs together at most two, and with the trusted checkers (one budget
    # each, beside each program) at most two per worker
    assert [r["result"] for r in results[:2]] == ["failed: memory limit exceeded"] * 2
    assert results[2]["passed"] and results[2]["verdict"] == "trusted"
    assert max(peaks.values()) > 200 * MIB and all(v <= BUDGET for v in peaks.values()), peaks
    assert total_peak["programs"] <= 2 * BUDGET, total_peak
    assert total_peak["all"] <= 2 * 2 * BUDGET, total_peak


# --------------------------------------------------------------------------- leftovers
_KILLED = """
import json, os, signal, sys
from complexformer.evaluation.sandbox import start_program
run = start_program("import time\\ntime.sleep(60)", timeout=60)
print(json.dumps({"root": run.root, "cgroups": run.cgroups}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
_NEXT = """
from complexformer.evaluation.sandbox import run_program
print(run_program("print(6 * 7)").stdout.strip())
"""


def _evaluator(code: str, tmp: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJECT), TMPDIR=str(tmp))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_next_evaluation_removes_what_a_killed_one_left(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed = _evaluator(_KILLED, tmp)
    assert killed.returncode == -signal.SIGKILL
    left = json.loads(killed.stdout)
    assert os.path.isdir(left["root"]) and Path(left["root"]).parent == tmp
    for cgroup in left["cgroups"]:  # it could not remove them itself
        assert os.path.isdir(cgroup)
    # a live evaluation's (this process's) directories and cgroups, and names without an
    # owner mark: never touched
    live = f"complexformer-sandbox-{owner_token()}-live"
    keep = [tmp / live, tmp / "complexformer-sandbox-unmarked", tmp / "other"]
    for d in keep:
        d.mkdir()
    parents = sorted({os.path.dirname(c) for c in left["cgroups"]})
    live_cgroups = [os.path.join(p, live) for p in parents]
    for c in live_cgroups:
        os.mkdir(c)
    try:
        nxt = _evaluator(_NEXT, tmp)
        assert nxt.stdout.strip() == "42", nxt.stderr
        assert not os.path.exists(left["root"])
        for cgroup in left["cgroups"]:
            assert not os.path.exists(cgroup)
        assert all(d.is_dir() for d in keep)
        assert all(os.path.isdir(c) for c in live_cgroups)
        assert sorted(p.name for p in tmp.iterdir()) == sorted(d.name for d in keep)
        # sweeping again, from here, finds nothing of a dead owner and keeps the live ones
        monkeypatch.setattr(tempfile, "tempdir", str(tmp))
        assert sweep_leftovers() == []
        assert all(d.is_dir() for d in keep) and all(os.path.isdir(c) for c in live_cgroups)
    finally:
        for c in live_cgroups:
            os.rmdir(c)


def test_a_reused_pid_is_not_its_owner(tmp_path):
    # the same pid with another start time (a new process that got the pid) is dead
    pid, start, ns = owner_token().split(".")
    stale = tmp_path / f"complexformer-sandbox-{pid}.{int(start) + 1}.{ns}-x"
    other_ns = tmp_path / f"complexformer-sandbox-{pid}.{int(start) + 1}.{int(ns) + 1}-x"
    stale.mkdir()
    (stale / "f").write_text("left")
    other_ns.mkdir()
    assert sweep_leftovers(str(tmp_path)) == [str(stale)]
    assert not stale.exists() and other_ns.is_dir()  # another namespace: cannot tell


# --------------------------------------------------------------------------- environments
_IN_VENV = """
import json, sys, types
for name in ("complexformer", "complexformer.evaluation"):  # no torch in this venv
    m = types.ModuleType(name)
    m.__path__ = [{project!r} + "/" + name.replace(".", "/")]
    sys.modules[name] = m
from complexformer.evaluation.sandbox import run_program, site_package_dirs
src = '''
import json, os, sys
import venv_probe
try:
    import numpy
    numpy_found = True
except ImportError:
    numpy_found = False
base = os.path.join(os.path.dirname(os.__file__), "site-packages")
print(json.dumps({{"probe": venv_probe.X, "numpy": numpy_found,
                  "base_site": os.listdir(base) if os.path.isdir(base) else None}}))
'''
r = run_program(src, isolation="bwrap")
print(json.dumps({{"site": site_package_dirs(), "status": r.status, "out": r.stdout,
                  "err": r.stderr[-500:]}}))
"""


def test_imports_work_from_a_venv_under_a_tmp_folder(tmp_path):
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert site.startswith(str(tmp_path))  # the environment lives under a tmp folder
    Path(site, "venv_probe.py").write_text("X = 'found in the venv'\n")
    out = subprocess.run(
        [str(py), "-I", "-c", _IN_VENV.format(project=str(PROJECT))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["site"] == [site] and got["status"] == "passed", got
    inside = json.loads(got["out"])
    assert inside["probe"] == "found in the venv"
    # only this environment's site-packages: not the project's venv (numpy), and the base
    # interpreter's own site-packages is an empty directory
    assert inside["numpy"] is False
    assert inside["base_site"] in (None, [])
