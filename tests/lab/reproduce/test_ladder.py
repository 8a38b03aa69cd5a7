"""The compute ladder: its plan (token rule, span, reference rung, order, selection), the fit
on synthetic data with a known exponent, the report against naive arithmetic, the command
line, and a small ladder trained end to end and resumed."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

import pytest
import torch

from complexformer.cli import main
from complexformer.models import ComplexFormerLM
from complexformer.models.config import GPTConfig, preset_fields
from complexformer.storage import SymlinkRefusedError
from complexformer_lab.reproduce.budget import WIKITEXT103_GPT2_TRAIN_TOKENS
from complexformer_lab.reproduce.ladder import (
    LADDER_VARIANTS,
    LADDERS,
    LadderConfig,
    plan_ladder,
    run_ladder,
)
from complexformer_lab.reproduce.ladder_fit import (
    fit_power_law,
    gap_at,
    gap_trend,
    linear_fit,
    t_quantile,
)
from complexformer_lab.reproduce.ladder_report import ladder_payload
from complexformer_lab.reproduce.variants import SCALES

TINY = LADDERS["tiny"]


def _blocks_params(cfg: GPTConfig) -> int:
    torch.manual_seed(0)
    return sum(p.numel() for p in ComplexFormerLM(cfg).blocks.parameters())


# ---------------------------------------------------------------------- plan
def test_cpu_ladder_spans_16x_with_three_or_more_rungs_and_follows_the_token_rule():
    ns = [_blocks_params(TINY.model_config(r, "rope")) for r in TINY.rungs]
    assert len(ns) >= 3 and max(ns) / min(ns) >= 16
    ref = ns[[r.name for r in TINY.rungs].index(TINY.reference)]
    for rung, n in zip(TINY.rungs, ns, strict=True):
        assert TINY.non_embedding_params(rung) == n
        steps = round(TINY.reference_steps * math.sqrt(n / ref))
        assert TINY.steps(rung) == steps
        assert TINY.tokens(rung) == steps * 16 * 128
        assert TINY.compute(rung) == pytest.approx(6 * n * steps * 16 * 128)
    # tokens grow with the size
    tokens = [TINY.tokens(r) for r in TINY.rungs]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_reference_rung_is_the_tiny_scale_of_table_4():
    rung = TINY.rung("d128")
    ours = TINY.model_config(rung, "cmha_nopcl").to_dict()
    table4 = SCALES["tiny"].model_config("cmha_nopcl").to_dict()
    assert ours == table4
    tc = TINY.train_config(rung, "/tmp/x", 0, "stdlib")
    t4 = SCALES["tiny"].train_config("/tmp/x", 0)
    assert tc.max_steps == t4.max_steps == 250
    for key in (
        "batch_size",
        "lr",
        "warmup_frac",
        "min_lr_ratio",
        "schedule",
        "weight_decay",
        "betas",
        "eps",
        "grad_clip",
        "vocab_size",
        "tokenizer",
    ):
        assert getattr(tc, key) == getattr(t4, key), key


def test_paper_ladder_tops_out_at_the_paper_preset():
    lad = LADDERS["paper"]
    top = lad.model_config(lad.rungs[-1], "cmha").to_dict()
    paper = GPTConfig(**{k: v for k, v in preset_fields("paper").items() if v is not None})
    for key in (
        "n_layer",
        "d_model",
        "n_head",
        "d_ff",
        "max_seq_len",
        "dropout",
        "omega_schedule",
        "vocab_size",
    ):
        assert top[key] == getattr(paper, key), key
    ns = [lad.non_embedding_params(r) for r in lad.rungs]
    assert max(ns) / min(ns) >= 16


def test_plan_order_dirs_and_identical_training_settings(tmp_path):
    cfg = LadderConfig(out=tmp_path, scale="tiny", seeds=(0, 1, 2))
    runs = plan_ladder(cfg)
    assert len(runs) == len(TINY.rungs) * 2 * 3 * 3
    # rung-major: every run of a smaller rung comes before the next rung's
    order = [r.rung.name for r in runs]
    assert order == sorted(order, key=[x.name for x in TINY.rungs].index)
    assert len({r.run.run_dir for r in runs}) == len(runs)
    for rung in TINY.rungs:
        for corpus in TINY.corpora:
            for seed in (0, 1, 2):
                group = [
                    r for r in runs if r.rung == rung and r.corpus == corpus and r.run.seed == seed
                ]
                assert [r.run.variant for r in group] == list(LADDER_VARIANTS)
                tcs = [dataclasses.replace(r.run.train_config, out_dir="x") for r in group]
                assert all(t == tcs[0] for t in tcs)


def test_only_selects_rungs_variants_and_seeds(tmp_path):
    cfg = LadderConfig(out=tmp_path, seeds=(0, 1), only=("d64/cmha", "d32/rope/seed1"))
    chosen = {(r.rung.name, r.run.variant, r.run.seed) for r in plan_ladder(cfg) if r.run.selected}
    assert chosen == {("d64", "cmha", 0), ("d64", "cmha", 1), ("d32", "rope", 1)}
    with pytest.raises(ValueError, match="RUNG/VARIANT"):
        LadderConfig(out=tmp_path, only=("d999",))
    with pytest.raises(ValueError, match="seeds"):
        LadderConfig(out=tmp_path, seeds=3)
    with pytest.raises(ValueError, match="takes no argument"):
        LadderConfig(out=tmp_path, data="shakespeare:hamlet")


def test_dry_run_prints_the_plan(capsys, tmp_path):
    assert (
        main(
            [
                "reproduce",
                "--table",
                "ladder",
                "--scale",
                "tiny",
                "--dry-run",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    for rung in TINY.rungs:
        assert f"\n{rung.name} " in out
    assert "span in N: 62x" in out and "estimated time" in out and "runs: 72" in out
    assert (
        main(
            [
                "reproduce",
                "--table",
                "ladder",
                "--scale",
                "paper",
                "--dry-run",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "A100-h" in out and "wikitext-103" in out and "\npaper " in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--table", "ladder", "1"], "runs alone"),
        (["--table", "ladder", "--set", "lr=1"], "--set"),
        (["--table", "ladder", "--max-steps", "3"], "--max-steps"),
    ],
)
def test_ladder_refuses_what_it_does_not_use(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["reproduce", *argv, "--out", str(tmp_path), "--dry-run"])
    assert message in str(e.value)


def test_small_scale_has_no_ladder(tmp_path):
    with pytest.raises(ValueError, match="tiny, paper"):
        LadderConfig(out=tmp_path, scale="small")


# ---------------------------------------------------------------------- fit
def test_t_quantile_matches_tables():
    # Student's t, 97.5 % quantiles (standard tables)
    for df, t in ((1, 12.7062), (4, 2.7764), (10, 2.2281), (30, 2.0423)):
        assert t_quantile(0.975, df) == pytest.approx(t, abs=1e-4)


def test_power_law_recovers_a_known_exponent_exactly_without_noise():
    a, alpha = 40.0, 0.076
    cs = [1e10, 1e11, 1e12, 1e13] * 3
    fit = fit_power_law(cs, [a * c**-alpha for c in cs])
    assert fit.alpha == pytest.approx(alpha, rel=1e-10)
    assert fit.a == pytest.approx(a, rel=1e-9)
    p = fit.predict(1e16)
    assert p["loss"] == pytest.approx(a * 1e16**-alpha, rel=1e-9)
    assert p["extrapolated"] == 1.0 and fit.predict(1e11)["extrapolated"] == 0.0


def test_power_law_band_covers_the_truth_at_its_level():
    """Noise of 2 % on the loss: the 95 % band at an extrapolated compute covers the true law in
    about 95 % of 400 synthetic ladders, and α lands within 2 se about 95 % of the time."""
    rng = random.Random(0)
    a, alpha, target = 12.0, 0.05, 1e15
    cs = [1e10, 1e11, 1e12, 1e13] * 3
    truth = a * target**-alpha
    cover = within = 0
    for _ in range(400):
        loss = [a * c**-alpha * math.exp(rng.gauss(0, 0.02)) for c in cs]
        fit = fit_power_law(cs, loss)
        p = fit.predict(target)
        cover += p["lo"] <= truth <= p["hi"]
        within += abs(fit.alpha - alpha) <= t_quantile(0.975, fit.line.dof) * fit.alpha_se
    assert 0.91 <= cover / 400 <= 0.99
    assert 0.91 <= within / 400 <= 0.99


def test_gap_and_trend():
    cs = [1e10, 1e11, 1e12] * 3
    rng = random.Random(1)
    la = [5 * c**-0.05 * math.exp(rng.gauss(0, 0.01)) for c in cs]
    fa = fit_power_law(cs, la)
    same = gap_at(fa, fa, 1e14)
    assert same["gap"] == 0.0 and same["p"] == pytest.approx(1.0)
    # a law 3 % lower everywhere: the gap at C is L(C) * (0.97 - 1)
    fb = fit_power_law(cs, [x * 0.97 for x in la])
    g = gap_at(fb, fa, 1e14)
    assert g["gap"] == pytest.approx(-0.03 * fa.predict(1e14)["loss"], rel=1e-9)
    assert g["lo"] < g["gap"] < g["hi"]
    # the trend of a gap that shrinks by 0.02 per tenfold compute
    gaps = [-0.1 + 0.02 * math.log10(c / 1e10) for c in cs]
    tr = gap_trend(cs, gaps)
    assert tr["slope"] == pytest.approx(0.02, rel=1e-9) and tr["p"] < 1e-6
    line = linear_fit([0, 1, 2, 3], [1, 3, 5, 7.5])
    assert line.slope == pytest.approx(2.15) and line.intercept == pytest.approx(0.9)


def _synthetic_results():
    out = []
    for i, (rung, c) in enumerate((("r1", 1e10), ("r2", 1e11), ("r3", 1e12))):
        for seed in (0, 1, 2):
            for v, shift in (("rope", 0.0), ("cmha_nopcl", -0.02), ("cmha", 0.04)):
                loss = 6.0 * c**-0.05 + shift + 0.003 * seed + 0.001 * i * (v == "cmha")
                out.append(
                    {
                        "corpus": "c",
                        "rung": rung,
                        "variant": v,
                        "seed": seed,
                        "compute": c,
                        "non_embedding_params": 10 ** (i + 4),
                        "tokens": 10 ** (i + 5),
                        "val_loss": loss,
                        "val_ppl": math.exp(loss),
                        "test_loss": loss + 0.01,
                        "test_ppl": math.exp(loss + 0.01),
                        "extrapolation": {"1": 10.0, "2": 11.0 + seed, "4": 20.0},
                    }
                )
    return out


def test_report_numbers_equal_naive_arithmetic():
    res = _synthetic_results()
    target = {
        "compute": 1e15,
        "preset": "paper",
        "non_embedding_params": 1,
        "params": 1,
        "tokens": 1,
    }
    pay = ladder_payload(res, ["r1", "r2", "r3"], ["c"], LADDER_VARIANTS, target)
    body = pay["corpora"]["c"]
    r2 = next(r for r in body["rungs"] if r["rung"] == "r2")
    rope = [x for x in res if x["rung"] == "r2" and x["variant"] == "rope"]
    cm = [x for x in res if x["rung"] == "r2" and x["variant"] == "cmha"]
    diffs = [a["val_ppl"] - b["val_ppl"] for a, b in zip(cm, rope, strict=True)]
    assert r2["paired"]["cmha"]["val"]["mean"] == pytest.approx(sum(diffs) / 3)
    mean = sum(x["val_ppl"] for x in rope) / 3
    assert r2["variants"]["rope"]["val_ppl"]["mean"] == pytest.approx(mean)
    assert r2["variants"]["rope"]["x2"]["mean"] == pytest.approx((1.1 + 1.2 + 1.3) / 3)
    fits = body["fits"]
    direct = fit_power_law(
        [x["compute"] for x in res if x["variant"] == "rope"],
        [x["val_loss"] for x in res if x["variant"] == "rope"],
    )
    assert fits["rope"]["alpha"] == pytest.approx(direct.alpha)
    assert fits["cmha_nopcl"]["gap_at_target"]["gap"] < 0 < fits["cmha"]["gap_at_target"]["gap"]
    # cmha's gap grows by 0.001 per rung (per tenfold compute)
    assert fits["cmha"]["gap_trend"]["slope"] == pytest.approx(0.001, rel=1e-6)


# ---------------------------------------------------------------------- end to end
def test_ladder_trains_evaluates_reports_and_resumes(micro_ladder, tmp_path):
    cfg = LadderConfig(out=tmp_path / "lad", scale=micro_ladder, seeds=(0, 1), threads=1)
    first = run_ladder(cfg, log=None)
    assert first["trained"] == 12 and first["skipped"] == 0
    report = json.loads((tmp_path / "lad" / "ladder.json").read_text())
    assert len(report["results"]) == 12
    assert (tmp_path / "lad" / "ladder.png").stat().st_size > 0
    md = (tmp_path / "lad" / "ladder.md").read_text()
    assert "ComplexFormer" in md and "α" in md
    for r in report["results"]:
        assert r["steps"] == micro_ladder.steps(micro_ladder.rung(r["rung"]))
        assert math.isfinite(r["val_ppl"]) and set(r["extrapolation"]) == {"1", "2"}
    again = run_ladder(cfg, log=None)
    assert again["trained"] == 0 and again["skipped"] == 12
    key = lambda r: (r["rung"], r["variant"], r["seed"])  # noqa: E731
    assert sorted(map(key, again["results"])) == sorted(map(key, report["results"]))
    assert {key(r): r["val_ppl"] for r in again["results"]} == {
        key(r): r["val_ppl"] for r in report["results"]
    }


def test_a_corpus_given_with_data_is_reported_and_links_are_not_followed(
    micro_ladder, repro_corpus_spec, tmp_path
):
    """``--data`` outside the ladder's corpora lands in the report; a link planted where the
    ladder appends its invocation log is refused and its target left as it was."""
    ladder = dataclasses.replace(micro_ladder, corpora=("shakespeare",))
    out = tmp_path / "lad"
    cfg = LadderConfig(
        out=out, scale=ladder, seeds=(0,), data=repro_corpus_spec, only=("a/rope",), threads=1
    )
    victim = tmp_path / "victim.txt"
    victim.write_text("user data")
    out.mkdir()
    (out / "invocations.jsonl").symlink_to(victim)
    with pytest.raises(SymlinkRefusedError):
        run_ladder(cfg, log=None)
    assert victim.read_text() == "user data"
    (out / "invocations.jsonl").unlink()
    again = run_ladder(cfg, log=None)
    assert again["trained"] == 0 and len(again["results"]) == 1
    report = json.loads((out / "ladder.json").read_text())
    assert list(report["corpora"]) == [repro_corpus_spec]
    assert "## " + repro_corpus_spec in (out / "ladder.md").read_text()


def test_the_ladders_equal_those_the_code_held_before_key_order_included():
    """``complexformer_lab/configs/ladders.toml`` read into LADDERS gives the ladders the code
    held before they became a data file (``data/scales_before.json``)."""
    before = json.loads((Path(__file__).parent / "data" / "scales_before.json").read_text())
    now = {name: ladder.to_dict() for name, ladder in LADDERS.items()}
    assert json.dumps(now, indent=1) == json.dumps(before["ladders"], indent=1)


def test_each_ladder_starts_from_its_scale():
    tiny, paper = SCALES["tiny"], SCALES["paper"]
    assert TINY.reference_steps == tiny.train["max_steps"]
    assert TINY.train == {
        k: v for k, v in tiny.train.items() if k not in ("max_steps", "eval_every", "save_every")
    }
    assert LADDERS["paper"].corpora == (paper.data,)
    assert LADDERS["paper"].reference_steps == math.ceil(
        WIKITEXT103_GPT2_TRAIN_TOKENS / (paper.train["batch_size"] * paper.model["max_seq_len"])
    )
