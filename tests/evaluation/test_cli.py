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
    common = ["--model", str(cmha), "--out", str(out), "--seed", "1", "--threads", "1"]
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
                "2",
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
                "--problems",
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
                "--model",
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
                "--model",
                str(cmha),
                str(rope),
                "--multipliers",
                "1",
                "2",
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
    args = ["evaluate", "--model", str(make_tiny_run("cmha")), "--out", str(out), "--threads", "1"]
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
    assert main(["evaluate", "--model", run, run, "--suite", "text"]) == 2
    assert "only by --suite extrapolation" in capsys.readouterr().err


def _evaluate_parser():
    import argparse

    from complexformer.evaluation.cli import add_evaluate_parser

    return add_evaluate_parser(argparse.ArgumentParser().add_subparsers())


def test_the_parser_lists_every_registered_suite_and_its_options():
    from complexformer.cli.options import VOCABULARY
    from complexformer.evaluation.cli import register_suites

    parser = _evaluate_parser()
    flags = {s for a in parser._actions for s in a.option_strings if a.help != "==SUPPRESS=="}
    suites = register_suites()
    assert {"ppl", "text", "code", "math", "extrapolation", "heads", "lm-eval"} <= set(suites)
    suite_action = next(a for a in parser._actions if "--suite" in a.option_strings)
    assert list(suite_action.choices) == list(suites)
    for name, cls in suites.items():
        for opt in cls.options:
            assert opt.flag in flags, f"{name}: {opt.flag} missing from the evaluate parser"
    assert flags - {"-h", "--help"} <= set(VOCABULARY)  # one vocabulary for every command
    help_text = parser.format_help()
    for name in suites:
        assert f"\n  {name} " in help_text  # listed with its description


def test_ppl_is_a_suite_and_options_bind_to_config_fields():
    from complexformer.evaluation.ppl import PplConfig, PplSuite
    from complexformer.evaluation.suite import get_suite

    assert get_suite("ppl") is PplSuite and PplSuite.config_class is PplConfig
    parser = _evaluate_parser()
    args = parser.parse_args(["--model", "m", "--max-blocks", "3", "--split", "test"])
    assert PplSuite.config_from_args(args) == PplConfig(split="test", max_blocks=3)
    args = parser.parse_args(["--model", "m", "--k", "1", "10", "--k", "100", "--problems", "p"])
    code = get_suite("code").config_from_args(args)
    assert code.ks == (1, 10, 100) and code.problems == "p"
    assert get_suite("math").config_from_args(args).data == "p"  # math's problem set


def test_a_comma_in_a_list_is_refused_with_a_hint(capsys):
    import pytest

    parser = _evaluate_parser()
    for flag in ("--k", "--multipliers", "--layers"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--model", "m", flag, "1,10"])
        err = capsys.readouterr().err
        assert "not commas" in err and "write 1 10" in err


def test_lm_eval_tasks_path_is_printed_without_a_model(capsys):
    import pytest

    from complexformer.evaluation.lmeval import TASKS_DIR

    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--lm-eval-tasks-path"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(TASKS_DIR) and (TASKS_DIR / "complexformer_mc.yaml").is_file()


def test_ppl_writes_its_report_into_the_runs_eval_folder(make_tiny_run, capsys):
    run = make_tiny_run("cmha")
    assert main(["evaluate", "--model", str(run), "--max-blocks", "2", "--json"]) == 0
    out = capsys.readouterr().out
    res = json.loads(out[out.rindex("\n{") + 1 :])
    saved = json.loads((run / "eval" / "ppl.json").read_text())
    assert saved["suite"] == "ppl" and saved["metrics"] == res and res["ppl"] > 1


def test_an_export_without_data_is_refused_by_name(make_tiny_run, tmp_path, capsys):
    import pytest

    pytest.importorskip("transformers")
    from complexformer.hf.export import export_run

    export = tmp_path / "export"
    export_run(make_tiny_run("cmha"), export)
    assert main(["evaluate", "--model", str(export), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{export} (export) records no corpus" in err and "pass --data" in err
    assert not (export / "eval").exists()
