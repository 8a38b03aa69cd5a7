"""``complexformer evaluate --suite ...`` end to end on tiny trained runs (offline)."""

from __future__ import annotations

import json

from complexformer.cli import main

TOY = {
    "task_id": "toy/0",
    "prompt": 'def add(a, b):\n    """Add two numbers."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
    "entry_point": "add",
}


def test_every_suite_from_the_command_line(make_tiny_run, eval_corpus_spec, tmp_path, capsys):
    cmha, rope = make_tiny_run("cmha"), make_tiny_run("rope")
    out = tmp_path / "eval"
    common = ["--ckpt", str(cmha), "--out", str(out), "--seed", "1", "--threads", "1"]
    assert (
        main(
            [
                "evaluate",
                *common,
                "--suite",
                "text",
                "--data",
                eval_corpus_spec,
                "--num-prompts",
                "2",
                "--prompt-tokens",
                "8",
                "--max-new-tokens",
                "12",
                "--evaluator",
                "none",
            ]
        )
        == 0
    )
    text = json.loads((out / "text.json").read_text())
    assert 0.0 <= text["metrics"]["dist_1"] <= 1.0

    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(TOY) + "\n")
    assert (
        main(
            [
                "evaluate",
                *common,
                "--suite",
                "code",
                "--problems",
                str(problems),
                "--num-samples",
                "2",
                "--k",
                "1",
                "--max-new-tokens",
                "8",
            ]
        )
        == 0
    )
    code = json.loads((out / "code.json").read_text())
    assert code["metrics"]["pass@1"] == 0.0  # a 20-step toy model writes no working code

    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "1 + 1?", "answer": "#### 2"}) + "\n")
    assert (
        main(
            [
                "evaluate",
                *common,
                "--suite",
                "math",
                "--math-data",
                str(qa),
                "--max-new-tokens",
                "6",
            ]
        )
        == 0
    )
    assert 0.0 <= json.loads((out / "math.json").read_text())["metrics"]["accuracy"] <= 1.0

    assert (
        main(
            [
                "evaluate",
                "--ckpt",
                str(cmha),
                "--suite",
                "heads",
                "--out",
                str(out),
                "--prompt",
                "the cat sat",
                "--num-blocks",
                "2",
            ]
        )
        == 0
    )
    assert (out / "heads.json").is_file() and (out / "attention_maps.png").is_file()

    assert (
        main(
            [
                "evaluate",
                "--suite",
                "extrapolation",
                "--ckpt",
                str(cmha),
                "--ckpt",
                str(rope),
                "--multipliers",
                "1,2",
                "--max-tokens",
                "600",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    ex = json.loads((out / "extrapolation.json").read_text())
    assert len(ex["runs"]) == 2
    assert "| " in capsys.readouterr().out  # the markdown tables are printed


def test_code_suite_without_bubblewrap_needs_the_unsafe_flag(
    make_tiny_run, tmp_path, capsys, monkeypatch
):
    from complexformer.evaluation.sandbox import runner as sandbox

    caps = sandbox.sandbox_capabilities()
    no_bwrap = {k: caps[k] for k in ("platform", "unshare", "cgroup", "process_limit", "euid")}
    no_bwrap.update(bwrap=None, isolation="none", uid=caps["euid"])
    no_bwrap["namespaces"] = caps["unshare_namespaces"]
    monkeypatch.setattr(sandbox, "_caps", no_bwrap)
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(TOY) + "\n")
    out = tmp_path / "eval"
    args = ["evaluate", "--ckpt", str(make_tiny_run("cmha")), "--out", str(out), "--threads", "1"]
    args += ["--suite", "code", "--problems", str(problems), "--num-samples", "1", "--k", "1"]
    args += ["--max-new-tokens", "4"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "needs operating-system isolation" in err and "--unsafe-python-guard-only" in err
    assert not (out / "code.json").exists()
    assert main([*args, "--unsafe-python-guard-only"]) == 0
    assert "WARNING: UNSAFE" in capsys.readouterr().out
    code = json.loads((out / "code.json").read_text())
    assert code["sandbox"]["unsafe_python_guard_only"] is True
    assert code["sandbox"]["isolation"] == "python-guard-only"


def test_evaluate_errors(make_tiny_run, capsys):
    run = str(make_tiny_run("cmha"))
    assert main(["evaluate", "--ckpt", run, "--ckpt", run, "--suite", "text"]) == 2
    assert "only by --suite extrapolation" in capsys.readouterr().err
