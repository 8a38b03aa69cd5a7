"""The trusted verdict: the literal-only encoding, scrubbing, the weak fallback, the suite's
refusal to run without operating-system isolation."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from complexformer.evaluation import sandbox, verdict
from complexformer.evaluation.code import CodeSuiteConfig, check_correctness, run_code_suite
from complexformer.evaluation.literal import NotLiteral, decode, encode
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
    caps = sandbox.sandbox_capabilities()
    no_bwrap = {k: caps[k] for k in ("platform", "unshare", "cgroup", "process_limit", "euid")}
    no_bwrap.update(bwrap=None, isolation="none", uid=caps["euid"])
    no_bwrap["namespaces"] = caps["unshare_namespaces"]
    monkeypatch.setattr(sandbox, "_caps", no_bwrap)
    with pytest.raises(sandbox.SandboxUnavailableError, match="--unsafe-python-guard-only"):
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


@pytest.mark.skipif(not sandbox.sandbox_capabilities()["bwrap"], reason="needs bubblewrap")
def test_suite_records_the_isolation(tmp_path):
    payload = _suite(tmp_path)
    assert [s["passed"] for s in payload["problems"][0]["samples"]] == [True, False]
    box = payload["sandbox"]
    assert box["isolation"] == "bwrap" and box["uid"] == 65534
    assert box["unsafe_python_guard_only"] is False and box["weak_verdict_problems"] == []
    assert box["layers"][0].startswith("bubblewrap")
