"""``complexformer reproduce`` end to end at a micro scale: the plan, determinism (same seeds,
same tables), resuming (finished runs and evaluations are skipped) and refusing a run
directory trained with other settings."""

from __future__ import annotations

import argparse
import json

import pytest

from complexformer.training.rundir import RunLockedError, run_lock
from complexformer_lab.reproduce import ReproduceConfig, format_plan, plan_runs, reproduce
from complexformer_lab.reproduce.cli import add_reproduce_parser
from complexformer_lab.reproduce.variants import SCALES, TABLES, get_scale, run_dir


def test_plan_tables_share_runs_and_differ_only_in_the_model(tmp_path):
    config = ReproduceConfig(out=str(tmp_path), tables=("1", "4"), scale="tiny", seeds=(0, 1, 2))
    runs = plan_runs(config)
    # Table 4 adds cmha_pclrot, cmha_fixed, cmha_nopcl and cmha_ropeinit to Table 1's six
    assert len(runs) == 30 and len({r.variant for r in runs}) == 10
    assert runs[0].run_dir == run_dir(tmp_path, "learned", 0) == tmp_path / "runs/learned/seed0"
    # identical training settings except the seed and the directory
    tcs = {
        json.dumps(
            {k: v for k, v in r.train_config.to_dict().items() if k not in ("out_dir", "seed")},
            sort_keys=True,
        )
        for r in runs
    }
    assert len(tcs) == 1
    assert {r.train_config.seed for r in runs} == {0, 1, 2}
    models = {r.variant: r.model_config for r in runs}
    assert models["cmha"].pcl and models["cmha_shared"].pcl and not models["cmha_nopcl"].pcl
    assert models["cmha_fixed"].pos_scheme == "cmha_fixed" and models["gpt2"].d_ff == 512
    assert models["cmha_ropeinit"].delta_init == "rope" and models["cmha"].delta_init == "paper"
    assert models["cmha_pclrot"].pcl_target == "rotated" and models["cmha"].pcl_target == "theta"
    assert models["gpt2"].tie_embeddings and not models["learned"].tie_embeddings
    for v, m in models.items():  # only the positional scheme, PCL and the GPT-2 shape differ
        diff = {k for k, x in m.to_dict().items() if x != models["rope"].to_dict()[k]}
        assert diff <= {
            "pos_scheme",
            "pcl",
            "d_ff",
            "tie_embeddings",
            "delta_init",
            "pcl_target",
        }, v
    text = format_plan(config, runs)
    assert "runs (30):" in text and text.count(" new") == 30 + 2 * 7 * 3  # + Table 4 fine-tuning
    assert "Table 4: ablation" in text and "tokens per run: 512,000" in text


def test_paper_scale_is_the_papers_appendix_a():
    paper = SCALES["paper"]
    m, t = paper.model_config("cmha"), paper.train_config("x", 0)
    assert (m.n_layer, m.d_model, m.n_head, m.d_ff, m.dropout, m.max_seq_len) == (
        8,
        512,
        8,
        1024,
        0.1,
        512,
    )
    assert m.pcl and not m.tie_embeddings
    assert (t.lr, t.betas, t.eps, t.weight_decay, t.warmup_frac, t.schedule, t.batch_size) == (
        1e-4,
        (0.9, 0.98),
        1e-9,
        0.01,
        0.05,
        "cosine",
        8,
    )
    assert t.data == "hf:Salesforce/wikitext:wikitext-103-raw-v1" and t.tokenizer == "gpt2"
    assert paper.evaluator == "gpt2-large"
    text = paper.text_config(t.data, paper.evaluator)
    assert (text.max_new_tokens, text.top_p) == (256, 0.9)
    assert get_scale("paper", max_steps=10).train_config("x", 0).max_steps == 10
    with pytest.raises(ValueError, match="scale"):
        get_scale("huge")


def test_cli_dry_run(tmp_path, capsys):
    p = argparse.ArgumentParser(prog="complexformer")
    add_reproduce_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(
        [
            "reproduce",
            "--table",
            "4",
            "--scale",
            "tiny",
            "--seeds",
            "0",
            "1",
            "--out",
            str(tmp_path),
            "--dry-run",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "runs (14):" in out and "cmha_nopcl/seed1" in out and "cmha_pclrot/seed1" in out
    assert not (tmp_path / "runs").exists()


def _config(out, scale, evaluator_dir, **kw):
    return ReproduceConfig(
        out=str(out),
        tables=("1", "4", "extrapolation"),
        scale=scale,
        seeds=(0,),
        evaluator=str(evaluator_dir),
        threads=1,
        device="cpu",
        only=("rope", "cmha"),
        **kw,
    )


def _table_numbers(payload):
    return {k: payload[k] for k in ("columns", "rows", "paired")}


def test_micro_reproduction_is_deterministic_and_resumable(
    tmp_path, micro_scale, tiny_evaluator_dir, tiny_evaluator
):
    a = reproduce(
        _config(tmp_path / "a", micro_scale, tiny_evaluator_dir), log=None, evaluator=tiny_evaluator
    )
    b = reproduce(
        _config(tmp_path / "b", micro_scale, tiny_evaluator_dir), log=None, evaluator=tiny_evaluator
    )
    assert a["trained"] == b["trained"] == 2 and len(a["runs"]) == 2
    for t in ("1", "4", "extrapolation"):
        assert _table_numbers(a["tables"][t]["payload"]) == _table_numbers(
            b["tables"][t]["payload"]
        )
    row = {r["variant"]: r for r in a["tables"]["1"]["payload"]["rows"]}
    assert row["cmha"]["n"] == 1 and row["learned"]["n"] == 0
    res = {r["variant"]: r for r in a["runs"]}
    assert res["cmha"]["pcl"] and res["cmha"]["gen_ppl"] is not None
    assert set(res["rope"]["extrapolation"]) == {"1", "2"}
    # the tables read the same run directories (cmha and rope appear in 1, 4, extrapolation)
    for name in (
        "table1.md",
        "table4.md",
        "table_extrapolation.md",
        "table1.json",
        "loss_table1.png",
        "loss_table4.png",
        "table_extrapolation.png",
        "reproduce.json",
        "invocations.jsonl",
    ):
        assert (tmp_path / "a" / name).is_file(), name
    assert "ComplexFormer" in (tmp_path / "a" / "table1.md").read_text()

    # rerunning into the same directory retrains and re-evaluates nothing
    run = tmp_path / "a" / "runs" / "cmha" / "seed0"
    watched = [
        run / "summary.json",
        run / "model" / "model.safetensors",
        *sorted((run / "eval").rglob("*.json")),
    ]
    before = {p: p.stat().st_mtime_ns for p in watched}
    lines: list[str] = []
    again = reproduce(
        _config(tmp_path / "a", micro_scale, tiny_evaluator_dir),
        log=lines.append,
        evaluator=tiny_evaluator,
    )
    assert again["trained"] == 0 and again["skipped"] == 2
    log = [json.loads(x) for x in (tmp_path / "a" / "invocations.jsonl").read_text().splitlines()]
    assert [(x["trained"], x["evaluated"]) for x in log] == [(2, 2), (0, 0)]
    assert {p: p.stat().st_mtime_ns for p in watched} == before
    assert sum("finished already" in m for m in lines) == 2
    assert sum("evaluated already" in m for m in lines) == 2
    assert _table_numbers(again["tables"]["1"]["payload"]) == _table_numbers(
        a["tables"]["1"]["payload"]
    )
    assert "finished, evaluated" in format_plan(
        _config(tmp_path / "a", micro_scale, tiny_evaluator_dir)
    )

    # a run directory trained with other settings is refused, not mixed into the table
    longer = micro_scale.replace(max_steps=11)
    with pytest.raises(ValueError, match="other settings"):
        reproduce(
            _config(tmp_path / "a", longer, tiny_evaluator_dir), log=None, evaluator=tiny_evaluator
        )


def test_interrupted_run_resumes_and_train_only(tmp_path, micro_scale):
    """An interrupted run (checkpoint, no summary) continues from its checkpoint; with
    ``train_only`` nothing is evaluated."""
    from complexformer.lm import train

    config = ReproduceConfig(
        out=str(tmp_path),
        tables=("4",),
        scale=micro_scale,
        seeds=(0,),
        evaluator="none",
        threads=1,
        device="cpu",
        only=("rope/seed0",),
        train_only=True,
    )
    (run,) = [r for r in plan_runs(config) if r.selected]

    class Stop(Exception):
        pass

    def stop_at_5(info):
        if info["step"] == 5:
            raise Stop

    with pytest.raises(Stop):
        train(
            run.model_config, run.train_config.replace(save_every=5), log=None, callback=stop_at_5
        )
    assert run.checkpoint_step() == 5 and not run.finished
    lines: list[str] = []
    out = reproduce(config, log=lines.append)
    assert out["trained"] == 1 and run.finished and out["tables"] == {}
    assert any("resuming from step 5" in m for m in lines)
    assert json.loads((run.run_dir / "summary.json").read_text())["resumed_from"] == 5
    assert not (run.run_dir / "eval").exists()
    assert TABLES["4"][-1] == "rope"


def test_a_second_reproduce_into_the_same_folder_is_refused(
    tmp_path, micro_scale, tiny_evaluator_dir
):
    config = _config(tmp_path, micro_scale, tiny_evaluator_dir)
    with run_lock(tmp_path, "reproduce"):
        with pytest.raises(RunLockedError, match="being written by another process"):
            reproduce(config, log=None)
    assert not (tmp_path / "runs").exists()  # nothing was trained
