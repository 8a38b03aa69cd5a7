"""The sandbox of the code suite: limits, containment, clean-up, no network, no escapes."""

from __future__ import annotations

import json
import os
import socket
import sys
import time

import pytest

from complexformer.evaluation.sandbox import (
    find_sandbox_processes,
    run_program,
    sandbox_capabilities,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sandbox's process checks read Linux /proc"
)

CAPS = sandbox_capabilities()


def _no_strays(sandbox_id: str, wait: float = 3.0) -> list[int]:
    """Processes of the run still alive after up to ``wait`` seconds (none expected)."""
    deadline = time.monotonic() + wait
    while True:
        left = find_sandbox_processes(sandbox_id)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_runs_a_program_and_reports_its_output():
    r = run_program("import math\nprint('hi', math.factorial(5))")
    assert (r.status, r.returncode, r.stdout, r.stderr) == ("passed", 0, "hi 120\n", "")
    assert r.passed and 0 < r.wall_time < 10

    r = run_program("print('before')\n1 / 0")
    assert (r.status, r.returncode, r.stdout) == ("failed", 1, "before\n")
    assert r.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert 'File "program.py", line 2' in r.stderr  # the program's lines in the traceback

    assert run_program("import sys; sys.exit(3)").returncode == 3
    assert run_program("exit(0)").status == "passed"  # site's exit() exists under -S
    assert run_program("def f(:\n  pass").status == "failed"


def test_infinite_loop_is_stopped_by_the_timeout():
    t0 = time.monotonic()
    r = run_program("while True:\n    pass", timeout=1.0)
    assert r.status == "timeout"
    assert 1.0 <= r.wall_time < 3.0 and time.monotonic() - t0 < 5.0
    assert _no_strays(r.sandbox_id) == []


@pytest.mark.parametrize(
    "bomb",
    [
        "x = bytearray(8 * 2**30)",  # one huge allocation
        "chunks = []\nwhile True:\n    chunks.append(bytearray(2**24))",  # growth
    ],
)
def test_memory_bomb_is_stopped_by_the_memory_limit(bomb):
    r = run_program(bomb, timeout=10.0, memory_mb=256)
    assert r.status == "memory", r
    assert "MemoryError" in r.stderr and r.wall_time < 10.0


FORK_BOMB = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.005)
"""


def test_fork_bomb_is_refused_by_the_guard():
    r = run_program("import os\nwhile True:\n    os.fork()", timeout=2.0)
    assert r.status == "failed" and "os.fork is not allowed" in r.stderr
    src = """
import os, multiprocessing, subprocess
made = 0
for spawn in [os.fork, lambda: os.posix_spawn("/bin/true", ["true"], {}),
              lambda: subprocess.Popen(["true"]), lambda: os.system("true"),
              lambda: multiprocessing.Process(target=print).start()] * 50:
    try:
        spawn()
        made += 1
    except OSError:
        pass
print(made, os.getpid() if made else "")
"""
    r = run_program(src, timeout=5.0)
    assert (r.status, r.stdout.strip()) == ("passed", "0")
    assert _no_strays(r.sandbox_id) == []


@pytest.mark.skipif(
    CAPS["process_limit"] == "none",
    reason="no process cap here (root without a writable pids cgroup)",
)
def test_fork_bomb_without_the_guard_is_capped_and_killed():
    # the operating-system layer alone: the process cap stops the growth, the timeout and
    # the group / namespace / cgroup kill leave nothing behind
    r = run_program(FORK_BOMB, timeout=1.5, max_processes=12, guard=False)
    assert r.status == "timeout"
    assert _no_strays(r.sandbox_id) == []


@pytest.mark.skipif(
    CAPS["process_limit"] in ("none", "rlimit-approximate"), reason="no exact process cap here"
)
def test_process_cap_is_exact():
    src = """
import os, time
made = 0
for _ in range(40):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
    except OSError:
        pass
print(made)
"""
    r = run_program(src, timeout=5.0, max_processes=10, guard=False)
    assert r.status == "passed", r
    assert 1 <= int(r.stdout) < 10
    assert _no_strays(r.sandbox_id) == []


@pytest.mark.parametrize("detach", ["", "os.setsid()"])
def test_processes_left_behind_are_killed(detach):
    src = (
        f"import os, time\nif os.fork() == 0:\n    {detach or 'pass'}\n    time.sleep(60)\n"
        "print('parent exits')"
    )
    r = run_program(src, timeout=5.0, guard=False)
    assert (r.status, r.stdout) == ("passed", "parent exits\n")
    assert _no_strays(r.sandbox_id) == []


def test_left_behind_processes_are_killed_without_namespaces(monkeypatch):
    # the fallback where unshare is unavailable: the process group kill, then the marker
    # scan for a process that left the group with setsid
    from complexformer.evaluation.sandbox import runner as sandbox

    caps = sandbox_capabilities()
    monkeypatch.setattr(
        sandbox,
        "_caps",
        dict(
            caps,
            bwrap=None,
            isolation="none",
            unshare=[],
            namespaces=[],
            cgroup=None,
            process_limit="none",
        ),
    )
    src = (
        "import os, time\nfor detach in (False, True):\n    if os.fork() == 0:\n"
        "        if detach:\n            os.setsid()\n        time.sleep(60)\nprint('ok')"
    )
    r = run_program(src, timeout=5.0, guard=False)
    assert (r.status, r.stdout) == ("passed", "ok\n")
    assert _no_strays(r.sandbox_id) == []


@pytest.fixture
def listener():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


NET = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"hello")
    print("CONNECTED")
except OSError as e:
    print("REFUSED", type(e).__name__, e)
"""


def _assert_not_reached(r, srv):
    assert r.status == "passed" and r.stdout.startswith("REFUSED"), r
    with pytest.raises(BlockingIOError):  # nothing ever arrived at the listener
        srv.accept()


def test_network_is_refused(listener):
    port = listener.getsockname()[1]
    c = socket.create_connection(("127.0.0.1", port), timeout=2)  # reachable from here
    listener.accept()[0].close()
    c.close()
    r = run_program(NET.format(port=port))
    _assert_not_reached(r, listener)
    assert "not allowed" in r.stdout
    r = run_program("import _socket\n_socket.socket()")  # below the socket module too
    assert r.status == "failed" and "socket.__new__ is not allowed" in r.stderr


@pytest.mark.skipif("net" not in CAPS["namespaces"], reason="no network namespace here")
def test_network_namespace_without_the_guard(listener):
    r = run_program(NET.format(port=listener.getsockname()[1]), guard=False)
    _assert_not_reached(r, listener)


ESCAPES = """
import os, shutil
T = {target!r}
attempts = {{
    "open": lambda: open(os.path.join(T, "created.txt"), "w").write("x"),
    "open-append": lambda: open(os.path.join(T, "victim.txt"), "a").write("x"),
    "os.open": lambda: os.open(os.path.join(T, "created2.txt"), os.O_CREAT | os.O_WRONLY),
    "remove": lambda: os.remove(os.path.join(T, "victim.txt")),
    "rename": lambda: os.rename(os.path.join(T, "victim.txt"), "stolen.txt"),
    "mkdir": lambda: os.mkdir(os.path.join(T, "newdir")),
    "rmtree": lambda: shutil.rmtree(os.path.join(T, "subdir")),
    "chmod": lambda: os.chmod(os.path.join(T, "victim.txt"), 0o777),
    "copy": lambda: shutil.copy("inside.txt", os.path.join(T, "copied.txt")),
    "relative": lambda: open("../../" + os.path.basename(T) + "/rel.txt", "w"),
    "symlink": lambda: (os.symlink(os.path.join(T, "via_link.txt"), "link"),
                        open("link", "w").write("x")),
    "dirlink": lambda: (os.symlink(T, "dirlink"), open("dirlink/via_dir.txt", "w")),
    "truncate": lambda: os.truncate(os.path.join(T, "victim.txt"), 0),
    "dir_fd": lambda: os.open("dirfd.txt", os.O_CREAT | os.O_WRONLY,
                              dir_fd=os.open(T, os.O_RDONLY)),
    "opener": lambda: open("opener.txt", "w", opener=lambda p, f: os.open(
        p, f, dir_fd=os.open(T, os.O_RDONLY))),
}}
with open("inside.txt", "w") as f:  # writing inside the working directory works
    f.write("inside")
os.makedirs("a/b")
shutil.rmtree("a")
for name, attempt in attempts.items():
    try:
        attempt()
        print("ESCAPED", name)
    except {error}:
        print("BLOCKED", name)
print(open("inside.txt").read())
"""


def test_writing_outside_the_working_directory_fails(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "subdir").mkdir()
    (tmp_path / "subdir" / "f").write_text("keep")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    # the Python guard alone (the inner layer; bubblewrap underneath is tested below)
    r = run_program(ESCAPES.format(target=str(tmp_path), error="PermissionError"), isolation="none")
    assert r.status == "passed", r
    lines = r.stdout.splitlines()
    assert lines[-1] == "inside"
    assert "ESCAPED" not in r.stdout
    assert sum(ln.startswith("BLOCKED") for ln in lines) == 15
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert victim.read_text() == "keep me" and oct(victim.stat().st_mode)[-3:] != "777"


def test_fresh_working_directory_is_removed_and_environment_scrubbed(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("SECRET_TOKEN", "do-not-leak")
    r = run_program(
        "import json, os\nprint(json.dumps({'cwd': os.getcwd(), "
        "'env': dict(os.environ), 'files': os.listdir('.')}))"
    )
    info = json.loads(r.stdout)
    assert info["files"] == []
    assert info["env"]["HOME"] == info["cwd"] == info["env"]["TMPDIR"]
    assert "HTTP_PROXY" not in info["env"] and "SECRET_TOKEN" not in info["env"]
    assert not any("proxy" in k.lower() for k in info["env"])
    assert not os.path.exists(info["cwd"])
    assert not os.path.exists(os.path.dirname(info["cwd"]))


def test_output_tail_and_file_size_limit():
    r = run_program("print('x' * 100000)\nprint('END')", output_limit=50)
    assert r.status == "passed" and len(r.stdout) == 50 and r.stdout.endswith("END\n")
    r = run_program("open('big', 'wb').write(b'0' * (3 * 2**20))", max_file_size_mb=1)
    assert r.status == "failed" and "File too large" in r.stderr


def test_limits_are_validated():
    for kwargs in ({"timeout": 0}, {"memory_mb": -1}, {"max_processes": 0}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            run_program("pass", **kwargs)


@pytest.mark.skipif(not CAPS["bwrap"], reason="bubblewrap does not work here")
def test_writing_outside_fails_under_bubblewrap_without_the_guard(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "subdir").mkdir()
    (tmp_path / "subdir" / "f").write_text("keep")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    src = ESCAPES.format(target=str(tmp_path), error="OSError")
    r = run_program(src, guard=False, isolation="bwrap")
    assert r.status == "passed", r
    lines = r.stdout.splitlines()
    assert lines[-1] == "inside" and "ESCAPED" not in r.stdout
    assert sum(ln.startswith("BLOCKED") for ln in lines) == 15
    assert sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    assert victim.read_text() == "keep me"


def test_capabilities_are_reported():
    caps = sandbox_capabilities()
    assert set(caps) >= {"unshare", "namespaces", "cgroup", "process_limit", "bwrap", "layers"}
    assert caps["process_limit"] in ("cgroup", "rlimit", "rlimit-approximate", "none")
    assert set(caps["namespaces"]) <= {"user", "mount", "net", "pid", "ipc", "uts"}
    assert caps["isolation"] == ("bwrap" if caps["bwrap"] else "none")
    assert caps["layers"][-1].startswith("Python guard")
    if caps["bwrap"]:
        assert caps["uid"] == 65534 and caps["layers"][0].startswith("bubblewrap")
        assert {"mount", "pid", "net", "ipc", "uts"} <= set(caps["namespaces"])


INTROSPECTION = """
import ctypes, gc, resource
cpu = resource.getrlimit(resource.RLIMIT_CPU)
up = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
attempts = {
    "ctypes.dlopen": lambda: ctypes.CDLL("libc.so.6"),
    "ctypes.dlsym": lambda: ctypes.pythonapi.Py_GetVersion,
    "ctypes.string_at": lambda: ctypes.string_at(id(cpu), 8),
    "ctypes.from_address": lambda: ctypes.c_long.from_address(id(cpu)),
    "ctypes.from_buffer": lambda: (ctypes.c_char * 4).from_buffer(bytearray(4)),
    "resource.setrlimit": lambda: resource.setrlimit(resource.RLIMIT_CPU, up),
    "resource.setrlimit-lower": lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8)),
    "resource.prlimit": lambda: resource.prlimit(0, resource.RLIMIT_CPU, up),
    "gc.get_objects": lambda: gc.get_objects(),
    "gc.get_referrers": lambda: gc.get_referrers(cpu),
    "gc.get_referents": lambda: gc.get_referents(attempts),
}
for name, attempt in attempts.items():
    try:
        attempt()
        print("ESCAPED", name)
    except PermissionError as e:
        print("BLOCKED", name, e)
    except Exception as e:
        print("FAILED", name, type(e).__name__)
print("limits kept", resource.getrlimit(resource.RLIMIT_CPU) == cpu)
"""


def test_guard_blocks_ctypes_rlimits_and_gc_introspection():
    """The documented blocks of the Python guard (the inner layer, alone here): ``ctypes``
    loading, symbol lookup and raw memory, changing rlimits, and the gc walks that reach
    other objects; ``import ctypes`` itself still works (numpy needs it)."""
    r = run_program(INTROSPECTION, isolation="none", timeout=10.0)
    assert r.status == "passed", r
    lines = r.stdout.splitlines()
    assert lines[-1] == "limits kept True"
    blocked = [ln.split()[1] for ln in lines if ln.startswith("BLOCKED")]
    assert blocked == [
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.string_at",
        "ctypes.from_address",
        "ctypes.from_buffer",
        "resource.setrlimit",
        "resource.setrlimit-lower",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    ], r.stdout
    assert all("is not allowed" in ln for ln in lines if ln.startswith("BLOCKED"))
    # the same program without the guard: the introspection goes through, so the blocks
    # above are the guard's
    r = run_program(INTROSPECTION, isolation="none", guard=False, timeout=10.0)
    assert r.status == "passed", r
    for name in ("ctypes.string_at", "ctypes.from_address", "gc.get_objects", "gc.get_referents"):
        assert f"ESCAPED {name}" in r.stdout.splitlines(), r.stdout
