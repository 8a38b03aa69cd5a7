"""Shared fixtures of the reproduce tests: a tiny corpus, a micro scale and a tiny evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

from complexformer_lab.reproduce.ladder import Ladder, Rung
from complexformer_lab.reproduce.variants import Scale
from tests.common_testlib import write_corpus
from tests.evaluation.evaluation_testlib import build_tiny_gpt2  # the evaluation tests' tiny GPT-2


@pytest.fixture(scope="session")
def repro_corpus_spec(tmp_path_factory) -> str:
    """``text:`` spec of a tiny JSONL corpus (train/val/test splits come from hashing)."""
    return write_corpus(tmp_path_factory.mktemp("repro_corpus"))


@pytest.fixture(scope="session")
def micro_scale(repro_corpus_spec) -> Scale:
    """A scale for tests only: 1 layer, d_model 32, 10 steps of 4 x 32 tokens, 4 prompts."""
    return Scale(
        name="micro",
        description="tests: 1 layer, d_model 32, 10 steps",
        data=repro_corpus_spec,
        tokenizer=None,
        vocab_size=300,
        model=dict(
            n_layer=1,
            n_head=2,
            d_model=32,
            d_ff=64,
            max_seq_len=32,
            dropout=0.0,
            tie_embeddings=False,
        ),
        gpt2_model=dict(
            n_layer=1,
            n_head=2,
            d_model=32,
            d_ff=128,
            max_seq_len=32,
            dropout=0.0,
            tie_embeddings=True,
        ),
        train=dict(
            max_steps=10,
            batch_size=4,
            lr=3e-3,
            warmup_frac=0.2,
            eval_every=10,
            eval_blocks=4,
            log_every=5,
            save_every=10,
            keep_last=1,
        ),
        text=dict(
            num_prompts=4, prompt_tokens=8, max_new_tokens=8, batch_size=4, evaluator_batch_size=4
        ),
        evaluator="none",
        ppl_batch_size=4,
        ppl_max_blocks=8,
        extrapolation=dict(multipliers=(1, 2), max_tokens=256, batch_size=2),
        flush_denormal=True,
    )


@pytest.fixture(scope="session")
def tiny_evaluator_dir(tmp_path_factory) -> Path:
    """A tiny random GPT-2 with its tokenizer, saved (a gen-PPL evaluator spec)."""
    return build_tiny_gpt2(tmp_path_factory.mktemp("repro_tiny_gpt2"))


@pytest.fixture(scope="session")
def tiny_evaluator(tiny_evaluator_dir):
    """The tiny GPT-2 loaded once as a gen-PPL evaluator."""
    from complexformer.evaluation.genppl import load_evaluator

    return load_evaluator(str(tiny_evaluator_dir))


@pytest.fixture()
def micro_ladder(repro_corpus_spec) -> Ladder:
    """A ladder for tests only: two rungs of one layer, 4 steps at the reference rung."""
    return Ladder(
        name="tiny",
        description="tests",
        corpora=(repro_corpus_spec,),
        tokenizer=None,
        vocab_size=300,
        model=dict(max_seq_len=32, dropout=0.0, tie_embeddings=False),
        rungs=(Rung("a", 1, 16, 1, 32), Rung("b", 1, 32, 2, 64)),
        reference="b",
        reference_steps=4,
        train=dict(batch_size=4, lr=3e-3, warmup_frac=0.2, eval_blocks=2, log_every=2, keep_last=1),
        evals_per_run=2,
        ppl_batch_size=4,
        ppl_max_blocks=4,
        extrapolation={"multipliers": [1, 2], "max_tokens": 128, "batch_size": 2},
    )
