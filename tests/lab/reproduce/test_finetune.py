"""Tables 2 and 3 (fine-tuning on code and math), Table 4's task columns, the paper scale's
45-epoch budget and the cmha_ropeinit variant of ``complexformer reproduce``."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from complexformer.evaluation.math_suite import load_math_problems, math_equal
from complexformer_lab.reproduce import ReproduceConfig, plan_runs, reproduce
from complexformer_lab.reproduce.budget import WIKITEXT103_GPT2_TRAIN_TOKENS
from complexformer_lab.reproduce.cli import add_reproduce_parser
from complexformer_lab.reproduce.finetune import FINETUNE_LR, FineTuneSpec, synthetic_math_problems
from complexformer_lab.reproduce.plan import plan_finetunes, settings_diff
from complexformer_lab.reproduce.variants import SCALES, TABLES, get_scale

FIXTURES = Path(__file__).parent / "fixtures"
CODE = str(FIXTURES / "code_problems.jsonl")
MATH = str(FIXTURES / "math_problems.jsonl")


def run_cli(argv: list[str], capsys) -> str:
    p = argparse.ArgumentParser(prog="complexformer")
    add_reproduce_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["reproduce", *argv])
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_dry_run_of_tables_2_and_3_lists_every_run(tmp_path, capsys):
    out = run_cli(
        ["--table", "2", "--table", "3", "--scale", "tiny", "--out", str(tmp_path), "--dry-run"],
        capsys,
    )
    assert TABLES["2"] == TABLES["3"] == TABLES["1"]
    assert "runs (18):" in out and "fine-tuning runs (36):" in out
    for v in TABLES["2"]:
        for seed in range(3):
            assert f"  {v}/seed{seed} " in out
            for task in ("code", "math"):
                assert f"  {task}:{v}/seed{seed} " in out
                assert str(tmp_path / "finetune" / task / v / f"seed{seed}") in out
    assert "'lr': 2e-05" in out and "benchmarks humaneval" in out
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()


def test_finetune_runs_continue_the_pretraining_runs(tmp_path):
    config = ReproduceConfig(out=str(tmp_path), tables=("2", "4"), scale="tiny", seeds=(0, 1))
    ft = plan_finetunes(config)
    base = {(r.variant, r.seed): r for r in plan_runs(config)}
    assert {r.task for r in ft} == {"code", "math"}
    assert {r.variant for r in ft if r.task == "math"} == set(TABLES["4"])
    for r in ft:
        tc = r.train_config
        assert tc.init_from == str(base[(r.variant, r.seed)].run_dir)
        assert tc.lr == FINETUNE_LR == 2e-5 and tc.tokenizer is None and tc.seed == r.seed
        assert r.model_config == base[(r.variant, r.seed)].model_config
    with pytest.raises(ValueError, match="table 2 needs fine-tuning"):
        ReproduceConfig(
            out=str(tmp_path), tables=("2",), scale=SCALES["tiny"].replace(finetune=None)
        )


def test_paper_scale_trains_45_epochs_of_wikitext103(tmp_path, capsys):
    out = run_cli(["--table", "1", "--scale", "paper", "--out", str(tmp_path), "--dry-run"], capsys)
    tokens_per_step = 8 * 512
    steps = math.ceil(45 * WIKITEXT103_GPT2_TRAIN_TOKENS / tokens_per_step)
    assert 110_000_000 < WIKITEXT103_GPT2_TRAIN_TOKENS < 130_000_000
    assert f"= {steps:,} steps of 4,096 tokens (45.00 epochs)" in out
    assert f'"max_steps": {steps}' in out and "estimate" in out
    assert "estimated GPU-hours" in out
    assert SCALES["paper"].model_config("cmha").omega_schedule == "paper"
    # a count recorded by an earlier run replaces the estimate
    key = {"data": SCALES["paper"].data, "tokenizer": "gpt2", "vocab_size": 50257}
    (tmp_path / "train_tokens.json").write_text(json.dumps({"key": key, "tokens": 4096 * 10}))
    out = run_cli(["--table", "1", "--scale", "paper", "--out", str(tmp_path), "--dry-run"], capsys)
    assert "= 450 steps of 4,096 tokens" in out and "counted from the tokenised corpus" in out
    # an explicit --max-steps switches the epochs off
    assert get_scale("paper", max_steps=10).epochs is None
    out = run_cli(
        ["--scale", "paper", "--max-steps", "7", "--out", str(tmp_path), "--dry-run"], capsys
    )
    assert "(7 steps x 8 x 512)" in out and "budget:" not in out


def test_synthetic_math_problems_have_correct_references():
    rows = synthetic_math_problems(40, seed=0)
    assert rows == synthetic_math_problems(40, seed=0)
    for r in rows:
        *_, expr = r["answer"].split("\n")[0].rsplit(" has ", 1)
        a, op, b, _, result = expr.split()[:5]
        want = int(a) + int(b) if op == "+" else int(a) - int(b)
        assert math_equal(str(want), r["answer"].split("####")[1].strip()) and int(result) == want


@pytest.fixture
def task_scale(micro_scale):
    return micro_scale.replace(
        max_steps=1,
        save_every=1,
        eval_every=1,
        finetune=FineTuneSpec(
            train=dict(max_steps=1, batch_size=2, lr=FINETUNE_LR, eval_every=1, save_every=1),
            code_data=micro_scale.data,
            code_benchmarks=(CODE,),
            code=dict(num_samples=1, max_new_tokens=8, ks=(1,), batch_size=1, workers=1),
            math_train=(MATH,),
            math_benchmarks=(MATH,),
            math=dict(max_problems=1, max_new_tokens=8, batch_size=1),
        ),
    )


def test_one_step_one_problem_tables_2_3_4_end_to_end(tmp_path, task_scale):
    config = ReproduceConfig(
        out=str(tmp_path),
        tables=("2", "3", "4"),
        scale=task_scale,
        seeds=(0,),
        evaluator="none",
        threads=1,
        device="cpu",
        only=("cmha",),
    )
    out = reproduce(config, log=None)
    assert out["trained"] == 3  # the pre-training run and its two fine-tunings
    for t in ("2", "3", "4"):
        assert (tmp_path / f"table{t}.md").is_file() and (tmp_path / f"table{t}.json").is_file()
    t2, t3, t4 = (out["tables"][t]["payload"] for t in ("2", "3", "4"))
    assert t2["columns"] == ["Model", "Params (M)", "code_problems @1 (%) ↑"]
    assert t3["columns"] == ["Model", "Params (M)", "math_problems Acc. (%) ↑"]
    assert t4["columns"][-2:] == [
        "Pass@1 (%) ↑ [code_problems] (Δ vs full)",
        "Acc. (%) ↑ [math_problems] (Δ vs full)",
    ]
    rows2 = {r["variant"]: r for r in t2["rows"]}
    assert rows2["cmha"]["n"] == 1 and rows2["rope"]["n"] == 0
    (code_run,) = out["tables"]["2"]["payload"]["runs"]
    score = code_run["code"]["code_problems"]
    assert score["num_problems"] == 1 and score["total_samples"] == 1
    assert score["pass@1"] == score["passed_samples"]  # one sample: pass@1 = passed or not
    (math_run,) = out["tables"]["3"]["payload"]["runs"]
    acc = math_run["math"]["math_problems"]
    assert acc["total"] == 1 and acc["accuracy"] == acc["correct"]
    row4 = {r["variant"]: r for r in t4["rows"]}["cmha"]
    assert row4["cells"][2] == f"{100 * score['pass@1']:.1f}"
    assert row4["cells"][3] == f"{100 * acc['accuracy']:.1f}"
    # the math fine-tuning corpus is the training problems in the suite's prompt format
    docs = [json.loads(x)["text"] for x in (tmp_path / "data" / "math-train.jsonl").open()]
    first = load_math_problems(MATH)[0]
    assert docs[0] == f"Question: {first['question']}\nAnswer: {first['answer']}"
    # resumable: a second invocation trains and evaluates nothing
    again = reproduce(config, log=None)
    assert again["trained"] == 0
    log = [json.loads(x) for x in (tmp_path / "invocations.jsonl").read_text().splitlines()]
    assert [(x["trained"], x["evaluated"]) for x in log] == [(3, 3), (0, 0)]
    assert again["tables"]["2"]["payload"]["rows"] == t2["rows"]


def test_run_directories_from_before_pcl_target_are_read_by_their_former_meaning(tmp_path):
    config = ReproduceConfig(out=str(tmp_path), tables=("4",), scale="tiny", seeds=(0,))
    runs = {r.variant: r for r in plan_runs(config)}
    for v in ("rope", "cmha"):
        saved = runs[v].model_config.to_dict()
        for key in ("pcl_target", "pcl_reduce", "delta_init"):
            del saved[key]  # a config.json written before these fields existed
        runs[v].run_dir.mkdir(parents=True)
        (runs[v].run_dir / "config.json").write_text(json.dumps(saved))
    assert settings_diff(runs["rope"]) == {}  # no PCL: nothing it was trained with differs
    assert settings_diff(runs["cmha"]) == {
        "pcl_reduce": ("sum", "mean"),
        "pcl_target": ("rotated", "theta"),
    }


def test_run_directories_from_before_the_data_settings_match_the_plan(tmp_path):
    config = ReproduceConfig(out=str(tmp_path), tables=("4",), scale="tiny", seeds=(0,))
    run = plan_runs(config)[0]
    saved = run.train_config.to_dict()
    for key in ("tokenizer_sample_bytes", "cache_dir", "data_timeout"):
        del saved[key]  # a train_config.json written before these fields existed
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "train_config.json").write_text(json.dumps(saved))
    assert settings_diff(run) == {}
    saved["tokenizer_sample_bytes"] = 1000
    (run.run_dir / "train_config.json").write_text(json.dumps(saved))
    assert settings_diff(run) == {"tokenizer_sample_bytes": (1000, 1 << 28)}
