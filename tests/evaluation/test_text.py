"""The text suite end to end on the tiny trained model, with a tiny local GPT-2 evaluator."""

from __future__ import annotations

import json
import math

import pytest
from torch.testing import assert_close

from complexformer.evaluation.text import TextSuiteConfig, run_text_suite, select_prompts
from complexformer.evaluation.text_metrics import distinct_n, repetition_n

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    from tests.evaluation.evaluation_testlib import build_tiny_gpt2

    return build_tiny_gpt2(tmp_path_factory.mktemp("text_suite_gpt2"))


@pytest.fixture(scope="module")
def run(tiny_run):
    from complexformer.lm import load_run

    return load_run(tiny_run)


def _config(spec: str, evaluator: str, seed: int = 0) -> TextSuiteConfig:
    return TextSuiteConfig(
        data=spec,
        split="test",
        num_prompts=3,
        prompt_tokens=8,
        max_new_tokens=16,
        evaluator=evaluator,
        evaluator_batch_size=2,
        batch_size=2,
        seed=seed,
        progress=False,
    )


def test_text_suite_writes_reports_and_is_reproducible(run, eval_corpus_spec, gpt2_dir, tmp_path):
    cfg = _config(eval_corpus_spec, str(gpt2_dir))
    a = run_text_suite(run.model, run.tokenizer, cfg, tmp_path / "a")
    b = run_text_suite(run.model, run.tokenizer, cfg, tmp_path / "b")

    on_disk = json.loads((tmp_path / "a" / "text.json").read_text())
    md = (tmp_path / "a" / "text.md").read_text()
    assert "gen-PPL" in md and "Dist-1" in md and "Rep-4" in md
    assert on_disk["suite"] == "text" and on_disk["config"]["num_prompts"] == 3
    assert on_disk["evaluator"]["class"] == "GPT2LMHeadModel"

    m = a["metrics"]
    gens = a["generations"]
    assert m["num_prompts"] == len(gens) == 3
    assert all(g["prompt_tokens"] == 8 and 0 <= g["new_tokens"] <= 16 for g in gens)
    assert 0 < m["dist_1"] <= 1 and 0 < m["dist_2"] <= 1
    assert 0 <= m["rep_4"] < 1 or math.isnan(m["rep_4"])
    assert 1 < m["gen_ppl"] < float("inf") and m["evaluator_tokens"] > 0
    # the metrics are those of the stored generations
    conts = [g["continuation"] for g in gens]
    assert_close(m["dist_1"], distinct_n(conts, 1))
    assert_close(m["dist_2"], distinct_n(conts, 2))
    scored = [g for g in gens if g["evaluator_tokens"]]
    pooled = math.exp(sum(g["nll"] for g in scored) / sum(g["evaluator_tokens"] for g in scored))
    assert_close(m["gen_ppl"], pooled)
    assert_close(m["gen_ppl_mean_per_sample"], sum(g["ppl"] for g in scored) / len(scored))
    assert on_disk["metrics"]["dist_1"] == m["dist_1"]

    # same seed: identical generations and numbers
    assert [g["continuation"] for g in b["generations"]] == conts
    assert b["metrics"] == m


def test_text_suite_seed_and_no_evaluator(run, eval_corpus_spec, tmp_path):
    a = run_text_suite(run.model, run.tokenizer, _config(eval_corpus_spec, "none", seed=1))
    assert a["evaluator"] is None and math.isnan(a["metrics"]["gen_ppl"])
    c = [g["continuation"] for g in a["generations"]]
    b = run_text_suite(run.model, run.tokenizer, _config(eval_corpus_spec, "none", seed=2))
    assert [g["continuation"] for g in b["generations"]] != c
    assert_close(a["metrics"]["rep_4"], repetition_n(c, 4), equal_nan=True)
    assert not (tmp_path / "text.json").exists()


def test_select_prompts_skips_short_documents(run):
    docs = ["a", "the cat sat on the mat and the dog ran to its home", "b c"]
    chosen = select_prompts(docs, run.tokenizer, num_prompts=5, prompt_tokens=6, seed=0)
    assert [i for i, _ in chosen] == [1]
    assert chosen[0][1] == run.tokenizer.encode(docs[1])[:6]


def test_bad_config_is_rejected(run, eval_corpus_spec):
    with pytest.raises(ValueError, match="top_p"):
        run_text_suite(run.model, run.tokenizer, TextSuiteConfig(top_p=0.0))
    cfg = TextSuiteConfig(
        data=eval_corpus_spec, prompt_tokens=10_000, evaluator=None, progress=False
    )
    with pytest.raises(ValueError, match="has 10000 tokens"):
        run_text_suite(run.model, run.tokenizer, cfg)
