"""The trusted verdict: the literal-only encoding, scrubbing, the weak fallback, the suite's
refusal to run without operating-system isolation."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from complexformer.evaluation.code_suite import CodeSuiteConfig, check_correctness, run_code_suite
from complexformer.evaluation.sandbox import runner, verdict
from complexformer.evaluation.sandbox.literal_codec import NotLiteral, decode, encode
from tests.evaluation.hostile_testlib import TOY, FakeModel, FakeTokenizer

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux"
)

VALUES = [
    None,
    True,
    False,
    0,
    -7,
    3**500,  # beyond int('...')'s 4300-digit limit in decimal
    1.5,
    -0.0,
    float("inf"),
    float("-inf"),
    "",
    "héllo \ud800 \n",
    b"\x00\xff",
    [1, [2, [3]]],
    (1, "a", (None,)),
    {"a": 1, (1, 2): [3], frozenset({1}): {2.5}},
    set(),
    {1, "x", (2, 3)},
    frozenset({b"k"}),
]


def test_literal_round_trip_keeps_values_and_exact_types():
    for v in VALUES:
        back = decode(encode(v))
        assert back == v and type(back) is type(v), v
        if isinstance(v, float):
            assert math.copysign(1.0, back) == math.copysign(1.0, v)
    nan = decode(encode(float("nan")))
    assert type(nan) is float and math.isnan(nan)
    nested = decode(encode({"k": [(1, {2})]}))
    assert type(nested["k"][0]) is tuple and type(nested["k"][0][1]) is set


def test_literal_refuses_objects_and_malformed_input():
    class Always:
        def __eq__(self, other):
            return True

    for bad in (Always(), print, lambda: 1, object(), [1, Always()], 1j, range(3)):
        with pytest.raises(NotLiteral):
            encode(bad)
    # the untrusted side converts subclasses and numpy scalars to their base values
    assert decode(encode(np.int64(3), convert=True)) == 3
    assert type(decode(encode(np.float64(0.5), convert=True))) is float
    assert type(decode(encode(np.bool_(True), convert=True))) is bool
    with pytest.raises(NotLiteral):
        encode(np.int64(3))  # not on the trusted side
    for raw in (b"", b"[]", b'["X", 1]', b'["I", 5]', b'["D", [[["L", []], ["N"]]]]', b"\xff"):
        with pytest.raises(ValueError):
            decode(raw)
    with pytest.raises(ValueError):
        decode(("[" * 5000).encode() + b'"N"' + b"]" * 5000)


def test_scrub_bounds_and_redacts(monkeypatch):
    monkeypatch.setenv("SCRUB_TEST_SECRET", "s3cr3t-value-123")
    text = "Traceback...\nValueError: leaked s3cr3t-value-123 \x1b[31m" + "x" * 500 + "\n\n"
    line = verdict.scrub(text)
    assert line.startswith("ValueError: leaked [redacted] ?[31m")
    assert len(line) == verdict.MESSAGE_LIMIT and "s3cr3t" not in line
    assert verdict.scrub("") == ""


def test_trusted_verdict_categories():
    def check(body, **kw):
        return check_correctness(TOY, body, **kw)

    r = check("    raise KeyError('secret detail')\n")
    assert r == {
        "passed": False,
        "result": "failed: KeyError: 'secret detail'",
        "verdict": "trusted",
    }
    # an exception class of the program's own is only "Exception" (a fixed set of names)
    r = check("    class Leak(Exception):\n        pass\n    raise Leak()\n")
    assert r["result"] == "failed: Exception"
    # a test's own ``except Exception`` cannot swallow a program that exits
    catching = dict(
        TOY,
        test="def check(candidate):\n    try:\n        candidate(1, 2)\n"
        "    except Exception:\n        pass\n",
    )
    r = check_correctness(catching, "    import os\n    os._exit(0)\n")
    assert r["result"] == "failed: the program exited before its tests ran"
    assert check_correctness(catching, "    return 3\n")["passed"]
    # results come back as exact built-in types: a tuple is not a list
    tuple_test = dict(TOY, test="def check(candidate):\n    assert candidate(1, 2) == [1, 2]\n")
    assert check_correctness(tuple_test, "    return [a, b]\n")["passed"]
    assert not check_correctness(tuple_test, "    return (a, b)\n")["passed"]


def test_weak_fallback_for_tests_that_cannot_run_by_value():
    passes_function = {
        "task_id": "Weak/function",
        "prompt": "def apply(f, x):\n",
        "test": "def check(candidate):\n    assert candidate(lambda v: v + 1, 1) == 2\n",
        "entry_point": "apply",
    }
    uses_helper = {
        "task_id": "Weak/helper",
        "prompt": "def twice(x):\n",
        "test": "def check(candidate):\n    assert helper(2) == 4 and candidate(2) == 4\n",
        "entry_point": "twice",
    }
    r = check_correctness(passes_function, "    return f(x)\n")
    assert r == {"passed": True, "result": "passed", "verdict": "weak"}
    assert not check_correctness(passes_function, "    return x\n")["passed"]
    good = "    return helper(x)\ndef helper(x):\n    return 2 * x\n"
    assert check_correctness(uses_helper, good) == {
        "passed": True,
        "result": "passed",
        "verdict": "weak",
    }
    assert {"Weak/function", "Weak/helper"} <= set(verdict.weak_problems())
    assert check_correctness(TOY, "    return a + b\n")["verdict"] == "trusted"


def _suite(tmp_path, **kw):
    problems = tmp_path / "toy.jsonl"
    problems.write_text(json.dumps(TOY) + "\n")
    cfg = CodeSuiteConfig(
        problems=str(problems), num_samples=2, batch_size=2, ks=(1,), progress=False, **kw
    )
    comps = ["    return a + b\n", "    return a - b\n"]
    return run_code_suite(FakeModel(), FakeTokenizer(TOY["prompt"], comps), cfg, tmp_path / "out")


def test_suite_refuses_to_run_without_os_isolation(tmp_path, monkeypatch):
    caps = runner.sandbox_capabilities()
    no_bwrap = {k: caps[k] for k in ("platform", "unshare", "cgroup", "process_limit", "euid")}
    no_bwrap.update(bwrap=None, isolation="none", uid=caps["euid"])
    no_bwrap["namespaces"] = caps["unshare_namespaces"]
    monkeypatch.setattr(runner, "_caps", no_bwrap)
    with pytest.raises(runner.SandboxUnavailableError, match="--unsafe-python-guard-only"):
        _suite(tmp_path)
    messages = []
    payload = run_code_suite(
        FakeModel(),
        FakeTokenizer(TOY["prompt"], ["    return a + b\n", "    return a - b\n"]),
        CodeSuiteConfig(
            problems=str(tmp_path / "toy.jsonl"),
            num_samples=2,
            batch_size=2,
            ks=(1,),
            progress=False,
            unsafe_python_guard_only=True,
        ),
        tmp_path / "unsafe",
        log=messages.append,
    )
    assert [s["passed"] for s in payload["problems"][0]["samples"]] == [True, False]
    on_disk = json.loads((tmp_path / "unsafe" / "code.json").read_text())
    assert on_disk["sandbox"]["isolation"] == "python-guard-only"
    assert on_disk["sandbox"]["unsafe_python_guard_only"] is True
    assert any("UNSAFE" in n for n in on_disk["notes"])
    assert any(m.startswith("WARNING: UNSAFE") for m in messages)


@pytest.mark.skipif(not runner.sandbox_capabilities()["bwrap"], reason="needs bubblewrap")
def test_suite_records_the_isolation(tmp_path):
    payload = _suite(tmp_path)
    assert [s["passed"] for s in payload["problems"][0]["samples"]] == [True, False]
    box = payload["sandbox"]
    assert box["isolation"] == "bwrap" and box["uid"] == 65534
    assert box["unsafe_python_guard_only"] is False and box["weak_verdict_problems"] == []
    assert box["layers"][0].startswith("bubblewrap")


def _res(status, stderr="", returncode=1):
    return runner.SandboxResult(status, returncode, "", stderr, 0.0, "id")


def test_build_program_is_human_evals_construction():
    problem = {"prompt": "P\n", "test": "T", "entry_point": "f"}
    assert verdict.build_program(problem, "    C") == "P\n    C\nT\ncheck(f)"


def test_scrub_keeps_printable_ascii_and_redacts_the_longest_secret_first(monkeypatch):
    monkeypatch.setenv("SCRUB_SHORT", "abcdefgh")  # 8 characters: a secret
    monkeypatch.setenv("SCRUB_LONG", "abcdefghij")
    monkeypatch.setenv("SCRUB_SEVEN", "zyxwvut")  # 7: not a secret
    secrets = verdict._secrets()
    assert "abcdefgh" in secrets and "abcdefghij" in secrets and "zyxwvut" not in secrets
    assert [len(s) for s in secrets] == sorted((len(s) for s in secrets), reverse=True)
    assert len(secrets) == len(set(secrets))
    assert verdict.scrub("first\n  x abcdefghij y zyxwvut  \n \n") == "x [redacted] y zyxwvut"
    assert verdict.scrub(" ~\x7f\x1f\té ") == "~????"  # strip, then non-printable -> ?
    assert verdict.scrub("a" * 300, limit=5) == "aaaaa"
    assert verdict.scrub("one line") == "one line" and verdict.scrub("\n\n") == ""


def test_program_message_keeps_a_line_only_of_the_named_category():
    assert verdict._program_message("KeyError", "x\nKeyError") == "failed: KeyError"
    assert verdict._program_message("KeyError", "KeyError: 'a'") == "failed: KeyError: 'a'"
    assert verdict._program_message("KeyError", "KeyErrors: a") == "failed: KeyError"
    assert verdict._program_message("KeyError", "ValueError: KeyError:") == "failed: KeyError"


def test_describe_a_sandbox_result():
    assert verdict._describe(_res("passed", returncode=0)) == "passed"
    assert verdict._describe(_res("timeout", "late")) == "timed out"
    assert verdict._describe(_res("memory", "MemoryError")) == verdict.MEMORY
    assert verdict.MEMORY == "failed: memory limit exceeded"
    assert verdict._describe(_res("error", "no bwrap\nbwrap: missing")) == "error: bwrap: missing"
    assert verdict._describe(_res("failed", "AssertionError")) == "failed: AssertionError"
    assert verdict._describe(_res("failed", "", returncode=3)) == "failed: exit status 3"
    assert verdict._describe(_res("error", "", returncode=-9)) == "error: exit status -9"


def test_result_of_each_trusted_verdict():
    def result(v, status="failed", stderr=""):
        return verdict._result(v, _res(status, stderr))

    def failed(category, **kw):
        return {"status": "failed", "category": category, **kw}

    t = "trusted"
    assert result(None) == {"passed": False, "result": "timed out", "verdict": t}
    assert result({"status": "passed"}) == {"passed": True, "result": "passed", "verdict": t}
    broken = {"passed": False, "result": "error: the trusted checker failed", "verdict": t}
    for v in ({"status": "weird"}, {"status": "failed"}, failed(3), {"category": "KeyError"}):
        assert result(v) == broken
    assert result(failed("exited")) == {"passed": False, "result": verdict.EXITED, "verdict": t}
    assert verdict.EXITED == "failed: the program exited before its tests ran"
    assert result(failed("exited"), "timeout")["result"] == "timed out"
    assert result(failed("exited"), "memory")["result"] == verdict.MEMORY
    assert result(failed("MemoryError", origin="tests"))["result"] == verdict.MEMORY
    assert result(failed("KeyError"), "memory")["result"] == verdict.MEMORY
    assert result(failed("unencodable"))["result"] == "failed: the result is not a plain value"
    assert result(failed("malformed"))["result"] == "failed: the program's reply was malformed"
    prog = failed("KeyError", origin="program")
    assert result(prog, stderr="KeyError: 'k'")["result"] == "failed: KeyError: 'k'"
    assert result(prog, stderr="other")["result"] == "failed: KeyError"
    tests = failed("AssertionError", origin="tests")
    assert result(tests, stderr="AssertionError: forged") == {
        "passed": False,
        "result": "failed: AssertionError",
        "verdict": t,
    }


def test_weak_problems_are_keyed_on_id_entry_point_and_tests(monkeypatch):
    monkeypatch.setattr(verdict, "_weak", set())
    a = {"task_id": "B/1", "entry_point": "f", "test": "t", "prompt": "p"}
    assert verdict._key(a) == json.dumps(["B/1", "f", "t"])
    verdict._weak.add(verdict._key(a))
    verdict._weak.add(verdict._key({"entry_point": "g", "test": "u"}))
    verdict._weak.add(verdict._key({"task_id": "A/0", "entry_point": "g", "test": "u"}))
    assert verdict.weak_problems() == ["?", "A/0", "B/1"]


def test_read_verdict_bounds_and_decodes(monkeypatch):
    import os
    import threading
    import time

    class Proc:
        waited = 0

        def wait(self):
            Proc.waited += 1

    def read(data, *, close=True, wait=5.0):
        r, w = os.pipe()
        try:

            def write():  # from a thread: more than a pipe's buffer may be written
                if data:
                    os.write(w, data)
                if close:
                    os.close(w)

            writer = threading.Thread(target=write)
            writer.start()
            got = verdict._read_verdict(r, Proc(), time.monotonic() + wait)
            writer.join()
            return got
        finally:
            os.close(r)
            if not close:
                os.close(w)

    assert read(b'{"status": "passed"}\n') == {"status": "passed"} and Proc.waited == 1
    assert read(b"[1, 2]") == {"status": "error"}
    assert read(b"not json") == {"status": "error"}
    assert read('{"s": "\u00e9"}'.encode()) == {"status": "error"}  # not ASCII
    assert read(b"") == {"status": "error"}
    assert read(b" " * 65536 + b"{}") == {"status": "error"}  # more than 64 KiB
    assert read(b"{}", close=False, wait=0.2) is None  # no end of file before the deadline
    assert read(b'{"a": 1}', wait=0.5) == {"a": 1}  # less than a second left is enough
    big = json.dumps({"k": "x" * 6000}).encode()  # several reads
    assert read(big) == {"k": "x" * 6000}
    at_limit = b'{"k": "' + b"x" * (65536 - 9) + b'"}'
    assert len(at_limit) == 65536 and read(at_limit) == {"k": "x" * (65536 - 9)}
    over = b'{"k": "' + b"x" * (65537 - 9) + b'"}'
    assert len(over) == 65537 and read(over) == {"status": "error"}
    assert read(b"{}", wait=-1.0) is None


def test_weak_check_passes_its_limits_on_and_needs_the_token(monkeypatch):
    import os

    calls = []

    class FakeRun:
        error = None

        def __init__(self, kw):
            self.kw = kw

        def finish(self, timeout):
            rc = 0 if status == "passed" else 1
            return runner.SandboxResult(status, rc, "x\n", err, 0.1, "id")

    def fake_start(program, **kw):
        calls.append((program, kw))
        token = os.read(kw["report"]["token_fd"], 4096)
        # the token is neither in the program nor in the settings the sandbox gets
        assert token.decode() not in program and token.decode() not in json.dumps(kw)
        out = {"echo": token, "other": b"0" * 32, "twice": token * 2, "silent": b""}[mode]
        if out:
            os.write(kw["report"]["report_fd"], out)
        return FakeRun(kw)

    monkeypatch.setattr(verdict, "start_program", fake_start)
    problem = {"prompt": "def f(x):\n", "test": "def check(c):\n    pass\n", "entry_point": "f"}
    args = (problem, "    return x\n", 2.5, 333, "none")
    mode, status, err = "echo", "passed", ""
    n_fds = len(os.listdir("/proc/self/fd"))
    assert verdict._weak_check(*args) == {"passed": True, "result": "passed", "verdict": "weak"}
    assert len(os.listdir("/proc/self/fd")) == n_fds  # every pipe end closed
    program, kw = calls[-1]
    assert program == verdict.build_program(problem, "    return x\n")
    assert (kw["timeout"], kw["memory_mb"], kw["isolation"]) == (2.5, 333, "none")
    assert sorted(kw["pass_fds"]) == sorted(kw["report"].values())
    exited = {
        "passed": False,
        "result": "failed: the program exited before its tests ran",
        "verdict": "weak",
    }
    for mode in ("silent", "other", "twice"):  # exit status 0 without exactly the token
        assert verdict._weak_check(*args) == exited, mode
    mode, status, err = "silent", "failed", "Traceback\nAssertionError"
    assert verdict._weak_check(*args) == {
        "passed": False,
        "result": "failed: AssertionError",
        "verdict": "weak",
    }


TAKES_A_FUNCTION = {
    "task_id": "Weak/forge",
    "prompt": "def apply(f, x):\n",
    "test": "def check(candidate):\n    assert candidate(lambda v: v + 1, 1) == 2\n",
    "entry_point": "apply",
}

# the forgery, widened: every 32-hex string the program can read (its own file, its
# command line and environment, its frames' constants, linecache), printed and written to
# every descriptor, then exit 0
READ_AND_FORGE = """    import linecache, os, re, sys
    texts = ["".join(v[2]) for v in list(linecache.cache.values()) if len(v) > 2 and v[2]]
    f = sys._getframe(0)
    while f is not None:
        texts += [repr(c) for c in f.f_code.co_consts]
        f = f.f_back
    for p in ("/sandbox/program.py", "program.py", "../program.py", "/proc/self/cmdline",
              "/proc/self/environ", "/proc/1/cmdline", "/proc/1/environ"):
        try:
            texts.append(open(p, "rb").read().decode(errors="replace"))
        except OSError:
            pass
    texts += sys.argv + [repr(sys.orig_argv)]
    for fd in range(3, 64):
        try:
            os.set_blocking(fd, False)
            texts.append(os.read(fd, 4096).decode(errors="replace"))
        except OSError:
            pass
    found = sorted(set(re.findall(r"[0-9a-f]{32}", " ".join(texts))))
    for t in found:
        os.write(1, ("\\n" + t + "\\n").encode())
        for fd in range(3, 64):
            try:
                os.write(fd, t.encode())
            except OSError:
                pass
    os._exit(0)
"""


@pytest.mark.skipif(not runner.sandbox_capabilities()["bwrap"], reason="needs bubblewrap")
def test_a_weak_verdict_cannot_be_forged_by_reading_the_program():
    r = check_correctness(TAKES_A_FUNCTION, READ_AND_FORGE)
    assert r == {
        "passed": False,
        "result": "failed: the program exited before its tests ran",
        "verdict": "weak",
    }
    # the same attack without the guard's help: bubblewrap only, the token still unread
    r = verdict._weak_check(TAKES_A_FUNCTION, READ_AND_FORGE, 3.0, 256, "bwrap")
    assert not r["passed"] and r["verdict"] == "weak"
    # and a correct completion of the same problem passes on this path
    assert check_correctness(TAKES_A_FUNCTION, "    return f(x)\n")["passed"]


def _weak_suite(tmp_path, **kw):
    tmp_path.mkdir()
    problems = tmp_path / "weak.jsonl"
    problems.write_text(json.dumps(dict(TAKES_A_FUNCTION, stop_sequences=["\0never"])) + "\n")
    cfg = CodeSuiteConfig(
        problems=str(problems), num_samples=2, batch_size=2, ks=(1,), progress=False, **kw
    )
    comps = ["    return f(x)\n", "    return x\n"]
    prompt = TAKES_A_FUNCTION["prompt"]
    return run_code_suite(FakeModel(), FakeTokenizer(prompt, comps), cfg, tmp_path / "out")


@pytest.mark.skipif(not runner.sandbox_capabilities()["bwrap"], reason="needs bubblewrap")
def test_weak_verdicts_are_failures_by_default_and_reports_count_them(tmp_path):
    payload = _weak_suite(tmp_path / "a")
    samples = payload["problems"][0]["samples"]
    assert [(s["passed"], s["verdict"]) for s in samples] == [(False, "weak"), (False, "weak")]
    assert samples[0]["result"] == "failed: weak verdict, scored as a failure (passed)"
    assert samples[1]["result"].startswith("failed: weak verdict, scored as a failure (failed: ")
    m, box = payload["metrics"], payload["sandbox"]
    assert (m["weak_problems"], m["weak_samples"], m["pass@1"]) == (1, 2, 0.0)
    assert box["weak_verdict_problems"] == ["Weak/forge"] and box["weak_verdict_samples"] == 2
    assert box["allow_weak_verdicts"] is False
    assert any("weak path" in n and "scored as failures" in n for n in payload["notes"])
    md = (tmp_path / "a" / "out" / "code.md").read_text()
    assert "| weak verdicts | 2 samples of 1 problems (scored as failures) |" in md

    payload = _weak_suite(tmp_path / "b", allow_weak_verdicts=True)
    samples = payload["problems"][0]["samples"]
    assert [(s["passed"], s["verdict"]) for s in samples] == [(True, "weak"), (False, "weak")]
    assert samples[0]["result"] == "passed"
    assert payload["metrics"]["pass@1"] == 0.5 and payload["metrics"]["weak_samples"] == 2
    assert payload["sandbox"]["allow_weak_verdicts"] is True
    assert (
        "| weak verdicts | 2 samples of 1 problems |"
        in (tmp_path / "b" / "out" / "code.md").read_text()
    )
    # a trusted-path report counts none
    (tmp_path / "c").mkdir()
    trusted = _suite(tmp_path / "c")
    assert (trusted["metrics"]["weak_problems"], trusted["metrics"]["weak_samples"]) == (0, 0)


def test_a_trusted_checker_that_hangs_is_killed_and_reaped(monkeypatch):
    import os

    started = []
    popen = verdict.subprocess.Popen

    def recording_popen(*a, **kw):
        started.append(popen(*a, **kw))
        started[-1].call = (a, kw)
        return started[-1]

    monkeypatch.setattr(verdict.subprocess, "Popen", recording_popen)
    hangs = dict(TOY, test="def check(candidate):\n    while True:\n        pass\n")
    r = verdict.check_program(hangs, "    return a + b\n", timeout=1.2, memory_mb=300)
    assert r == {"passed": False, "result": "timed out", "verdict": "trusted"}
    trusted = [p for p in started if p.args[1:4] == ["-I", "-S", "-B"]]  # not the sandbox's
    assert len(trusted) == 1 and trusted[0].returncode == -9  # SIGKILL, and waited for
    # an isolated interpreter (no site, no bytecode files) with a fixed, minimal environment,
    # in its own session, without the caller's standard streams
    (argv,), kw = trusted[0].call
    assert argv[:5] == [sys.executable, "-I", "-S", "-B", "-c"] and len(argv) == 7
    assert argv[5] == verdict._trusted() and argv[5].endswith("\nmain()\n")
    cfg = json.loads(argv[6])
    assert cfg["memory"] == 600 << 20 and cfg["cpu"] == 3  # 2 x memory_mb; ceil(timeout) + 1
    assert (cfg["entry_point"], cfg["prompt"], cfg["test"]) == ("add", TOY["prompt"], hangs["test"])
    assert cfg["site_packages"] == runner.site_package_dirs()
    assert kw["env"] == {"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    assert kw["stdin"] == kw["stdout"] == kw["stderr"] == verdict.subprocess.DEVNULL
    assert kw["start_new_session"] is True
    assert sorted(kw["pass_fds"]) == sorted(
        (cfg["request_fd"], cfg["response_fd"], cfg["verdict_fd"])
    )


def test_check_program_defaults_a_sandbox_error_and_the_weak_cache(monkeypatch):
    import os

    calls = []

    class FailedStart:
        error = "setup\nbwrap: cannot set up the sandbox"
        closed = False

        def close(self):
            FailedStart.closed = True

    def fake_start(source, **kw):
        calls.append((source, kw))
        return FailedStart()

    monkeypatch.setattr(verdict, "start_program", fake_start)
    n_fds = len(os.listdir("/proc/self/fd"))
    r = verdict.check_program(TOY, "    return a + b\n")
    assert r == {
        "passed": False,
        "result": "error: bwrap: cannot set up the sandbox",
        "verdict": "trusted",
    }
    assert FailedStart.closed and len(os.listdir("/proc/self/fd")) == n_fds  # pipes closed
    source, kw = calls[-1]
    assert source == TOY["prompt"] + "    return a + b\n\n"
    assert (kw["timeout"], kw["memory_mb"], kw["isolation"]) == (3.0, 1024, "auto")
    assert kw["serve"]["entry_point"] == "add" and kw["serve"]["request_fd"] == 0
    verdict.check_program(TOY, "", timeout=1.5, memory_mb=64, isolation="none")
    assert (calls[-1][1]["timeout"], calls[-1][1]["memory_mb"]) == (1.5, 64)
    assert calls[-1][1]["isolation"] == "none"
    # a problem already found weak goes to the single-program run directly
    weak_calls = []
    monkeypatch.setattr(verdict, "_weak", {verdict._key(TOY)})
    monkeypatch.setattr(verdict, "_weak_check", lambda *a: weak_calls.append(a) or {"w": 1})
    assert verdict.check_program(TOY, "    pass\n", timeout=2.0) == {"w": 1}
    assert weak_calls == [(TOY, "    pass\n", 2.0, 1024, "auto")]


def test_a_program_that_ignores_the_end_of_its_requests_gets_a_short_grace(monkeypatch):
    """After the trusted verdict the program sees end of file on its requests; one that does
    not exit then (here its exit is replaced by a sleep) is killed after a grace of 0.2 s,
    not at the check's timeout (20 s here). The verdict stays the trusted one."""
    import time

    finished = []
    start = verdict.start_program

    def timed_start(*a, **kw):
        run = start(*a, **kw)
        finish = run.finish

        def timed_finish(timeout, *fa, **fkw):
            t = time.monotonic()
            res = finish(timeout, *fa, **fkw)
            finished.append((time.monotonic() - t, res))
            return res

        run.finish = timed_finish
        return run

    monkeypatch.setattr(verdict, "start_program", timed_start)
    ignores = "    return a + b\nimport os, time\nos._exit = lambda code: time.sleep(60)\n"
    t = time.monotonic()
    r = verdict.check_program(TOY, ignores, timeout=20.0, memory_mb=300)
    elapsed = time.monotonic() - t
    assert r == {"passed": True, "result": "passed", "verdict": "trusted"}
    assert elapsed < 10.0  # generous: the timeout is 20 s
    ((wait, res),) = finished
    assert res.status == "timeout"  # it did not exit: killed at the end of the grace
    # the grace is 0.2 s after the verdict (the sandbox started a few ms after the check);
    # 0.8 s leaves room for a slow machine and still tells it from a grace of 1.2 s
    assert 0.15 < wait < 0.8
