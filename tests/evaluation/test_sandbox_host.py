"""What a completion can do to the host, tried as an attacker would, asserting the host-side
effect: device nodes a program needs, socket memory outside the budget (``/proc/net/sockstat``),
disk through stdout and stderr (``statvfs``), the trusted process's memory when it decodes a
hostile reply (its peak resident size), a ``StopIteration`` that would end the tests' ``map``
early, and the clean-up's reach (the mode of the folder above what it removes).
"""

from __future__ import annotations

import os
import platform
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from complexformer.evaluation.code_suite import check_correctness
from complexformer.evaluation.sandbox import run_program, runner, sandbox_capabilities, verdict
from complexformer.evaluation.sandbox.isolation import force_rmtree
from complexformer.evaluation.sandbox.seccomp import ABIS

CAPS = sandbox_capabilities()
PROJECT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
needs_bwrap = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not CAPS["bwrap"],
    reason="needs Linux with working bubblewrap (scripts/ensure-bwrap.sh)",
)


class _Sampler:
    """Reads ``read()`` every 5 ms in a thread while a run lasts; keeps the extremes."""

    def __init__(self, read):
        self.read, self.values = read, [read()]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            self.values.append(self.read())
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.values.append(self.read())


# ----------------------------------------------------------------------------- 1. devices
DEVICES = """
import os
with open(os.devnull, "w") as f:
    f.write("discarded")
assert open("/dev/zero", "rb").read(16) == bytes(16)
assert len(open("/dev/urandom", "rb").read(16)) == 16
assert len(open("/dev/random", "rb").read(16)) == 16
fd = os.open("/dev/null", os.O_RDONLY)
assert os.read(fd, 10) == b""
try:
    open("/dev/planted", "w")
    print("wrote /dev")
except OSError as e:
    print("dev read-only:", e.errno)
print("devices ok")
"""


@needs_bwrap
@pytest.mark.parametrize("guard", [True, False])
def test_the_device_nodes_a_program_needs_work(guard):
    r = run_program(DEVICES, guard=guard, isolation="bwrap")
    assert r.status == "passed", r
    assert "devices ok" in r.stdout and "wrote /dev" not in r.stdout
    assert "dev read-only: 30" in r.stdout or "dev read-only: 13" in r.stdout  # EROFS/EACCES


# ----------------------------------------------------------------------------- 2. sockets
def _sockstat_pages() -> dict[str, int]:
    """The host's TCP and UDP socket memory, in pages (``/proc/net/sockstat``)."""
    found = {}
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        proto, _, rest = line.partition(":")
        fields = rest.split()
        if proto in ("TCP", "UDP") and "mem" in fields:
            found[proto] = int(fields[fields.index("mem") + 1])
    return found


# 120 UDP sockets with 4 MB receive buffers filled over loopback, 100 loopback TCP
# connections whose receivers never read, a socket in a user and network namespace of its
# own, io_uring and the x32 ABI's socket(); all without the guard. Then what a pure program
# needs: Unix socket pairs and an asyncio loop.
SOCKETS = """
import ctypes, errno, os, socket
out = []
def attempt(name, fn):
    try:
        fn()
        out.append(name + " ok")
    except OSError as e:
        out.append(name + " " + errno.errorcode.get(e.errno, str(e.errno)))

def udp():
    socks = []
    for _ in range(120):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for s in socks:
        for _ in range(300):
            tx.sendto(b"x" * 60000, s.getsockname())

def tcp():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0)); srv.listen(200)
    conns = [socket.create_connection(srv.getsockname()) for _ in range(100)]
    for c in conns:
        c.setblocking(False)
        try:
            while True:
                c.send(b"y" * 65536)
        except BlockingIOError:
            pass

def udp6():
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)

def others():
    for fam in (socket.AF_NETLINK, socket.AF_PACKET):
        socket.socket(fam, socket.SOCK_RAW)

libc = ctypes.CDLL(None, use_errno=True)
def own_namespace():
    libc.unshare(0x10000000 | 0x40000000)  # CLONE_NEWUSER | CLONE_NEWNET (may be refused)
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

def raw_syscall(nr, *args):
    def call():
        if libc.syscall(nr, *args) == -1:
            raise OSError(ctypes.get_errno(), "")
    return call

attempt("udp", udp)
attempt("tcp", tcp)
attempt("udp6", udp6)
attempt("netlink/packet", others)
attempt("own-namespace", own_namespace)
buf = ctypes.create_string_buffer(120)
attempt("io_uring", raw_syscall(425, 8, buf))
attempt("x32-socket", raw_syscall(0x40000000 | 41, 2, 2, 0))

a, b = socket.socketpair()
a.sendall(b"unix"); assert b.recv(4) == b"unix"
import asyncio
async def main():
    await asyncio.sleep(0)
    return "asyncio ok"
out.append(asyncio.run(main()))
print("\\n".join(out))
"""


@needs_bwrap
@pytest.mark.skipif(
    platform.machine() not in ABIS, reason=f"no seccomp filter for {platform.machine()}"
)
def test_socket_memory_cannot_be_taken_outside_the_budget():
    assert CAPS["seccomp"], "the socket filter should load here"
    with _Sampler(_sockstat_pages) as s:
        r = run_program(SOCKETS, guard=False, isolation="bwrap", timeout=10.0)
    assert r.status == "passed", r
    lines = r.stdout.split("\n")
    for name in ("udp", "tcp", "udp6", "netlink/packet", "own-namespace"):
        assert f"{name} EAFNOSUPPORT" in lines, r.stdout
    assert "io_uring ENOSYS" in lines and "x32-socket ENOSYS" in lines, r.stdout
    assert "asyncio ok" in lines
    # the host's socket memory: the attack took 1.2 GB of UDP and 1.1 GB of TCP memory
    # before; now nothing beyond what other processes of this machine use (16 MiB of slack)
    page = os.sysconf("SC_PAGE_SIZE")
    for proto in ("UDP", "TCP"):
        grew = (max(v[proto] for v in s.values) - s.values[0][proto]) * page
        assert grew < 16 * MIB, (proto, grew)


# Unix socket pairs stay allowed: their buffers must count against the run's memory budget
UNIX_FILL = """
import socket
pairs, total = [], 0
for _ in range(120):  # up to 2 x wmem_max (8 MiB here) queued in each: ~1 GB in all
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    a.setblocking(False)
    try:
        while True:
            total += a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    pairs.append((a, b))
print("queued MiB", total >> 20)
"""


@needs_bwrap
@pytest.mark.skipif(CAPS["memory_limit"] != "cgroup", reason="no writable memory cgroup (root)")
def test_unix_socket_buffers_count_against_the_budget():
    r = run_program(UNIX_FILL, guard=False, isolation="bwrap", memory_mb=256, timeout=10.0)
    budget = (256 + runner.MEMORY_OVERHEAD_MB) * MIB
    queued = [int(ln.split()[-1]) for ln in r.stdout.splitlines() if ln.startswith("queued")]
    # either the budget ended it, or the kernel refused buffers beyond it
    assert r.status == "memory" or (queued and queued[0] * MIB <= budget), r
    assert r.memory_peak is not None and r.memory_peak <= budget


# ----------------------------------------------------------------------------- 3. disk
FALLOCATE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
for fd in (1, 2):
    # FALLOC_FL_KEEP_SIZE: 8 GiB of disk behind a file of unchanged size
    rc = libc.fallocate(fd, 1, 0, 8 << 30)
    name = errno.errorcode.get(ctypes.get_errno(), "?") if rc else "0"
    os.write(2, b"fallocate %d: %s\\n" % (fd, name.encode()))
    try:
        os.posix_fallocate(fd, 0, 8 << 30)
        os.write(2, b"posix_fallocate ok\\n")
    except OSError as e:
        os.write(2, b"posix_fallocate %d: %s\\n" % (fd, errno.errorcode[e.errno].encode()))
fd = os.open("big", os.O_WRONLY | os.O_CREAT)  # the working tmpfs: sized, in the budget
try:
    os.posix_fallocate(fd, 0, 8 << 30)
    os.write(2, b"work ok\\n")
except OSError as e:
    os.write(2, b"work: %s\\n" % errno.errorcode[e.errno].encode())
try:
    while True:  # 1 MiB writes to stdout until the cap closes the pipe
        os.write(1, b"z" * (1 << 20))
except OSError as e:
    os.write(2, b"stdout: %s\\n" % errno.errorcode[e.errno].encode())
"""


@needs_bwrap
def test_stdout_and_stderr_cannot_take_host_disk():
    tmp = tempfile.gettempdir()

    def free() -> int:
        st = os.statvfs(tmp)
        return st.f_bavail * st.f_frsize

    with _Sampler(free) as s:
        r = run_program(FALLOCATE, guard=False, isolation="bwrap", max_file_size_mb=4)
    lines = r.stderr.splitlines()
    for fd in (1, 2):  # pipes, not host files
        assert f"fallocate {fd}: ESPIPE" in lines and f"posix_fallocate {fd}: ESPIPE" in lines
    # the working tmpfs is sized (and within the budget): RLIMIT_FSIZE or its size refuses
    assert ("work: EFBIG" in lines or "work: ENOSPC" in lines) and "stdout: EPIPE" in lines
    # the host's /tmp: before, 8 GB of it went to the run's stdout; other processes of this
    # machine write there too, hence 256 MiB of slack against 8 GiB tried
    assert s.values[0] - min(s.values) < 256 * MIB


@needs_bwrap
def test_output_is_capped_and_its_tail_kept():
    src = "import sys\nfor i in range(20000):\n    print('line', i, 'x' * 2000)\n"
    r = run_program(src, guard=False, isolation="bwrap", max_file_size_mb=4, output_limit=100)
    # 40 MB printed into a 4 MiB cap: the writer got EPIPE (BrokenPipeError), the tail kept
    assert r.status == "failed" and "BrokenPipeError" in r.stderr, r
    assert len(r.stdout) == 100 and "x" * 40 in r.stdout and "line " in r.stdout


# ----------------------------------------------------------------------------- 4. replies
# the entry point's reply written straight to the response pipe (found in the serving
# frame): one frame of N bytes of empty lists, made in chunks (the sandbox stays small)
_RAW_REPLY = """
import os, struct, sys
wfd = sys._getframe(1).f_locals["wfd"]
head, item, tail = b'["T",[["S","ok"],["L",[', b'["L",[]],', b'["L",[]]]]]]'
count = ({size} - len(head) - len(tail)) // len(item)
os.write(wfd, struct.pack(">I", len(head) + count * len(item) + len(tail)) + head)
chunk = item * 10000
for _ in range(count // 10000):
    os.write(wfd, chunk)
os.write(wfd, item * (count % 10000) + tail)
return None
"""

KEEPS_RESULTS = {
    "task_id": "Keep/0",
    "prompt": 'def f(x):\n    """Return x."""\n',
    "test": "def check(candidate):\n    kept = [candidate(i) for i in range(60)]\n"
    "    assert kept == list(range(60))\n",
    "entry_point": "f",
}


def _indent(body: str) -> str:
    return "".join("    " + ln + "\n" for ln in body.strip("\n").splitlines())


def _trusted_hwm() -> int:
    """The peak resident size (``VmHWM``), bytes, of this process's trusted checker children
    (their command line carries ``verdict_fd``); 0 when none runs."""
    peak = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            children = Path(f"/proc/self/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for pid in children:
            try:
                if b"verdict_fd" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
            except OSError:
                continue
    return peak


def _trusted_peak(completion: str, memory_mb: int) -> tuple[dict, int]:
    with _Sampler(_trusted_hwm) as s:
        result = verdict.check_program(KEEPS_RESULTS, completion, timeout=15.0, memory_mb=memory_mb)
    assert max(s.values) > 0  # the sampler saw the trusted process
    return result, max(s.values)


@needs_bwrap
def test_a_hostile_reply_costs_the_trusted_process_a_bounded_amount():
    # the reported attack: one 16 MiB frame of 1.9 million empty lists (519 MB before)
    big = _indent(_RAW_REPLY.format(size=16 * MIB))
    result, peak = _trusted_peak(big, 256)
    assert result == {
        "passed": False,
        "result": "failed: the result is larger than 1 MiB",
        "verdict": "trusted",
    }
    assert peak < 48 * MIB, peak
    # frames just under the limit, each ~21 MiB decoded, kept by the tests 60 times over
    # (1.3 GB): the trusted process's own budget ends it, memory_mb + 64 MiB of memory
    # cgroup (as root) and 2 x memory_mb of address space
    result, peak = _trusted_peak(_indent(_RAW_REPLY.format(size=MIB - 64)), 64)
    assert result["result"] == "failed: memory limit exceeded", result
    assert 64 * MIB < peak < 128 * MIB + 16 * MIB, peak
    # a correct completion of the same problem passes
    assert check_correctness(KEEPS_RESULTS, "    return x\n")["passed"]


# ----------------------------------------------------------------------------- 5. StopIteration
EVENS = {
    "task_id": "Stop/map",
    "prompt": 'def is_even(x):\n    """Whether x is even."""\n',
    "test": "def check(candidate):\n    assert all(map(candidate, [2, 4, 6]))\n"
    "    assert not any(map(candidate, [1, 3, 5]))\n",
    "entry_point": "is_even",
}
EVENS_FILTER = dict(
    EVENS,
    task_id="Stop/filter",
    test="def check(candidate):\n    assert not list(filter(candidate, [1, 3, 5]))\n"
    "    assert list(filter(candidate, [2, 4, 6])) == [2, 4, 6] or True\n",
)


@needs_bwrap
@pytest.mark.parametrize("problem", [EVENS, EVENS_FILTER], ids=["map", "filter"])
def test_stop_iteration_from_the_candidate_is_a_failure(problem):
    for body in ("    raise StopIteration\n", "    raise StopIteration(True)\n"):
        r = check_correctness(problem, body)
        assert not r["passed"] and r["verdict"] == "trusted", r
        assert r["result"].startswith("failed: StopIteration"), r
    r = check_correctness(problem, "    raise StopAsyncIteration\n")
    assert not r["passed"] and r["verdict"] == "trusted"
    assert check_correctness(problem, "    return x % 2 == 0\n") == {
        "passed": True,
        "result": "passed",
        "verdict": "trusted",
    }


# ----------------------------------------------------------------------------- 6. clean-up
def _shared_parent(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def test_force_rmtree_changes_nothing_outside_its_tree(tmp_path):
    shared = _shared_parent(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    outside.chmod(0o555)
    # a missing path, a link to a directory, a link to a file: no-ops
    (shared / "link").symlink_to(outside)
    (shared / "file-link").symlink_to(outside / "keep")
    for name in ("missing", "link", "file-link", "link/keep"):
        force_rmtree(str(shared / name))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(outside.stat().st_mode) == 0o555 and (outside / "keep").exists()
    assert (shared / "link").is_symlink() and (shared / "file-link").is_symlink()
    # a tree made read-only by its program, with a link out of it: removed, link and all,
    # the target and the shared folder unchanged
    tree = shared / "complexformer-sandbox-x"
    (tree / "work" / "sub").mkdir(parents=True)
    (tree / "work" / "sub" / "f").write_text("x")
    (tree / "work" / "out").symlink_to(outside)
    for d in (tree / "work" / "sub", tree / "work", tree):
        d.chmod(0o500)
    force_rmtree(str(tree))
    assert not tree.exists()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(outside.stat().st_mode) == 0o555 and (outside / "keep").exists()


def _as_nobody(fn) -> int:
    """Run ``fn()`` in a forked child as uid/gid 65534; its exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            fn()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="drops to uid 65534: needs root"
)
def test_force_rmtree_as_an_unprivileged_owner_keeps_the_parent_mode():
    # as root permissions do not stop a removal; as the tree's owner they do, and the retry
    # that makes directories writable again runs: it must stay inside the tree
    shared = Path(tempfile.mkdtemp(prefix="complexformer-test-shared-"))
    try:
        shared.chmod(0o1777)
        tree = shared / "tree"
        (tree / "a" / "b").mkdir(parents=True)
        (tree / "a" / "b" / "f").write_text("x")
        for p in (tree, tree / "a", tree / "a" / "b", tree / "a" / "b" / "f"):
            os.chown(p, 65534, 65534)
        for d in (tree / "a" / "b", tree / "a", tree):
            d.chmod(0o500)

        def remove():
            force_rmtree(str(shared / "missing"))
            force_rmtree(str(tree))

        assert _as_nobody(remove) == 0
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
        assert not tree.exists()
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)
