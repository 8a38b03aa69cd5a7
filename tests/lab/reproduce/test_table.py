"""The table builder of ``complexformer reproduce`` on fabricated results and run directories:
means, sample standard deviations, paired differences and t-tests (Shao et al. 2025, Tables
1 and 4)."""

from __future__ import annotations

import json
import math

import pytest

from complexformer_lab.reproduce.runner import (
    ReproduceConfig,
    cached_result,
    eval_paths,
    eval_settings,
    plan_runs,
)
from complexformer_lab.reproduce.table import (
    TABLE1_METRICS,
    build_extrapolation_table,
    build_table1,
    build_table4,
    format_mean_std,
    mean_std,
    paired_comparison,
    paired_t_test,
    write_table,
)


def _result(variant, seed, **metrics):
    base = dict(
        params=1_234_567,
        val_ppl=100.0,
        test_ppl=110.0,
        gen_ppl=50.0,
        dist_1=0.5,
        dist_2=0.8,
        rep_4=0.02,
    )
    return {"variant": variant, "seed": seed, **base, **metrics}


# ---------------------------------------------------------------------- statistics
def test_table_statistics_are_the_results_package_s():
    from complexformer import results

    assert paired_t_test is results.paired_t_test  # one home, re-exported by reproduce
    assert mean_std is results.mean_std
    s = mean_std([1.0, 2.0, 3.0, 4.0])
    assert format_mean_std(s, 2) == "2.50 ± 1.29"
    assert format_mean_std(mean_std([7.0]), 1) == "7.0"
    assert format_mean_std(mean_std([]), 2) == "n/a"


# ---------------------------------------------------------------------- tables
def _table1_results():
    rope = [
        _result("rope", s, val_ppl=v, gen_ppl=g, rep_4=0.03)
        for s, v, g in [(0, 100.0, 40.0), (1, 102.0, 42.0), (2, 104.0, 44.0)]
    ]
    # cmha: val ppl differs from rope's by -1, -2, -3 (same seed), gen-PPL by +1, +1, +1.
    cmha = [
        _result("cmha", s, val_ppl=v, gen_ppl=g, rep_4=0.01, params=1_300_000)
        for s, v, g in [(0, 99.0, 41.0), (1, 100.0, 43.0), (2, 101.0, 45.0)]
    ]
    return rope + cmha + [_result("learned", 0, val_ppl=130.0)]


def test_table1_columns_means_and_paired_differences():
    payload = build_table1(_table1_results())
    assert payload["columns"] == [
        "Model",
        "Params (M)",
        "val ppl ↓",
        "test ppl ↓",
        "gen-PPL ↓",
        "Dist-1 ↑",
        "Dist-2 ↑",
        "Rep-4 (×10⁻²) ↓",
    ]
    rows = {r["variant"]: r for r in payload["rows"]}
    assert [r["variant"] for r in payload["rows"]] == [
        "learned",
        "sinusoidal",
        "gpt2",
        "rope",
        "cmha_shared",
        "cmha",
    ]
    assert rows["rope"]["cells"][:5] == [
        "1.23",
        "102.00 ± 2.00",
        "110.00 ± 0.00",
        "42.00 ± 2.00",
        "0.500 ± 0.000",
    ]
    assert rows["cmha"]["cells"][1] == "100.00 ± 1.00"
    assert rows["cmha"]["cells"][-1] == "1.00 ± 0.00"  # Rep-4 0.01 -> 1.00 x 10^-2
    assert rows["learned"]["n"] == 1 and rows["learned"]["cells"][1] == "130.00"
    assert rows["sinusoidal"]["n"] == 0 and set(rows["sinusoidal"]["cells"]) == {"n/a"}
    assert rows["rope"]["stats"]["val_ppl"]["values"] == [100.0, 102.0, 104.0]

    paired = {(r["variant"], r["metric"]): r for r in payload["paired"]["rows"]}
    val = paired[("cmha", "val_ppl")]
    assert val["seeds"] == [0, 1, 2] and val["diffs"] == [-1.0, -2.0, -3.0]
    assert val["mean"] == -2.0 and val["t"] == pytest.approx(-2 * math.sqrt(3))
    assert round(val["p"], 4) == 0.0742 and val["favours"] == "variant"
    gen = paired[("cmha", "gen_ppl")]
    assert gen["diffs"] == [1.0, 1.0, 1.0] and gen["p"] is None and gen["favours"] == "baseline"
    learned = paired[("learned", "val_ppl")]
    assert learned["diffs"] == [30.0] and "no test" in learned["note"]
    assert ("rope", "val_ppl") not in paired  # the baseline is not compared with itself
    md = payload["markdown"]
    assert "| Model | Params (M) | val ppl ↓ |" in md
    assert "Paired comparison with RoPE" in md and "0.074" in md and "no test possible" in md


def test_table4_deltas_against_the_full_model():
    res = [_result("cmha", s, gen_ppl=30.0 + s, val_ppl=90.0 + s) for s in range(3)]
    res += [_result("cmha_nopcl", s, gen_ppl=32.0 + s, val_ppl=89.0 + s) for s in range(3)]
    res += [_result("rope", s, gen_ppl=35.0, val_ppl=95.0) for s in range(3)]
    payload = build_table4(res)
    assert payload["columns"] == ["Variant", "gen-PPL ↓ (Δ vs full)", "val ppl ↓ (Δ vs full)"]
    rows = {r["variant"]: r for r in payload["rows"]}
    assert rows["cmha"]["cells"] == ["31.00 ± 1.00", "91.00 ± 1.00"]
    assert rows["cmha_nopcl"]["cells"] == ["33.00 ± 1.00 (+2.00)", "90.00 ± 1.00 (-1.00)"]
    assert rows["cmha_nopcl"]["delta_vs_full"] == {"gen_ppl": 2.0, "val_ppl": -1.0}
    assert rows["cmha_fixed"]["cells"] == ["n/a", "n/a"]
    full = {(r["variant"], r["metric"]): r for r in payload["paired_full"]["rows"]}
    assert full[("cmha_nopcl", "gen_ppl")]["diffs"] == [2.0, 2.0, 2.0]
    vs_rope = {(r["variant"], r["metric"]): r for r in payload["paired"]["rows"]}
    assert vs_rope[("cmha", "val_ppl")]["diffs"] == [-5.0, -4.0, -3.0]
    assert "w/o PCL" in payload["markdown"]


def test_extrapolation_table_learned_is_na_beyond_t():
    res = [dict(_result("rope", s), extrapolation={"1": 10.0 + s, "2": 11.0 + s}) for s in range(2)]
    res += [dict(_result("learned", s), extrapolation={"1": 9.0, "2": None}) for s in range(2)]
    payload = build_extrapolation_table(res, multipliers=(1, 2))
    rows = {r["variant"]: r for r in payload["rows"]}
    assert payload["columns"] == ["Model", "1×T ↓", "2×T ↓"]
    assert rows["rope"]["cells"] == ["10.50 ± 0.71", "11.50 ± 0.71"]
    assert rows["learned"]["cells"] == ["9.00 ± 0.00", "n/a"]
    paired = {(r["variant"], r["metric"]): r for r in payload["paired"]["rows"]}
    assert paired[("learned", "ppl_x1")]["diffs"] == [-1.0, -2.0]
    assert paired[("learned", "ppl_x2")]["diffs"] == []


def test_paired_comparison_only_uses_shared_seeds():
    res = [
        _result("rope", 0, val_ppl=10.0),
        _result("rope", 1, val_ppl=12.0),
        _result("cmha", 1, val_ppl=11.0),
        _result("cmha", 2, val_ppl=9.0),
    ]
    rows = paired_comparison(res, ["rope", "cmha"], "rope", TABLE1_METRICS[1:2])["rows"]
    assert rows == [dict(rows[0], seeds=[1], diffs=[-1.0])]


def test_write_table_files(tmp_path):
    payload = build_table1(_table1_results())
    json_path, md_path = write_table(tmp_path, payload)
    assert json_path.name == "table1.json" and md_path.name == "table1.md"
    data = json.loads(json_path.read_text())
    assert "markdown" not in data and data["rows"][3]["variant"] == "rope"
    ext = build_extrapolation_table([], multipliers=(1, 2))
    assert write_table(tmp_path, ext)[1].name == "table_extrapolation.md"


# ---------------------------------------------------------------------- fabricated run dirs
def _fabricate_run(run, settings, val_ppl, gen_ppl):
    """Write what training and evaluation leave in a run directory (no model)."""
    d = run.run_dir
    d.mkdir(parents=True)
    (d / "summary.json").write_text(
        json.dumps({"steps": 10, "elapsed_s": 3.0, "tokens_seen": 1280, "val_ppl": val_ppl})
    )
    paths = eval_paths(d, settings, 10)
    paths["ppl"].parent.mkdir(parents=True)
    paths["ppl"].write_text(
        json.dumps(
            {
                "params": 5000,
                "time_s": 1.0,
                "val": {"loss": math.log(val_ppl), "ppl": val_ppl},
                "test": {"loss": math.log(val_ppl + 1), "ppl": val_ppl + 1},
            }
        )
    )
    paths["text"].parent.mkdir(parents=True)
    paths["text"].write_text(
        json.dumps(
            {
                "metrics": {"gen_ppl": gen_ppl, "dist_1": 0.5, "dist_2": 0.9, "rep_4": None},
                "timing": {"generate_s": 1.0, "score_s": 2.0},
            }
        )
    )


def test_tables_from_fabricated_run_directories(tmp_path, micro_scale):
    config = ReproduceConfig(
        out=str(tmp_path), tables=("1",), scale=micro_scale, seeds=(0, 1, 2), evaluator="none"
    )
    settings = eval_settings(config)
    runs = {(r.variant, r.seed): r for r in plan_runs(config)}
    for s in range(3):
        _fabricate_run(runs[("rope", s)], settings, 100.0 + s, 40.0 + 2 * s)
        _fabricate_run(runs[("cmha", s)], settings, 98.0 + s, 41.0 + 2 * s)
    assert cached_result(runs[("learned", 0)], settings) is None  # not trained
    results = [cached_result(r, settings) for r in runs.values()]
    results = [r for r in results if r is not None]
    assert len(results) == 6
    one = next(r for r in results if r["variant"] == "cmha" and r["seed"] == 1)
    assert one["val_ppl"] == 99.0 and one["test_ppl"] == 100.0 and one["gen_ppl"] == 43.0
    assert one["rep_4"] is None and one["eval_time_s"] == 4.0 and one["train_time_s"] == 3.0
    payload = build_table1(results)
    rows = {r["variant"]: r for r in payload["rows"]}
    assert rows["cmha"]["cells"][1] == "99.00 ± 1.00"
    assert rows["cmha"]["cells"][-1] == "n/a"
    paired = {(r["variant"], r["metric"]): r for r in payload["paired"]["rows"]}
    assert paired[("cmha", "val_ppl")]["diffs"] == [-2.0, -2.0, -2.0]
    assert paired[("cmha", "gen_ppl")]["diffs"] == [1.0, 1.0, 1.0]
    # other evaluation settings have other result files: nothing cached under them
    other = eval_settings(
        ReproduceConfig(
            out=str(tmp_path),
            tables=("1",),
            scale=micro_scale,
            seeds=(0, 1, 2),
            evaluator="gpt2-large",
        )
    )
    assert cached_result(runs[("cmha", 0)], other) is None
