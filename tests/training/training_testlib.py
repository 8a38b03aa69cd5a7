"""Helpers of the training tests (a uniquely named module, importable from test files)."""

from __future__ import annotations

from tests.common_testlib import WORDS, write_corpus  # noqa: F401  (re-exported)

REFERENCE_MODEL = dict(vocab_size=300, n_layer=1, n_head=2, d_model=32, d_ff=64, max_seq_len=32)
REFERENCE_TRAIN = dict(
    vocab_size=300,
    max_steps=12,
    batch_size=4,
    lr=3e-3,
    warmup_frac=0.25,
    eval_every=6,
    eval_blocks=8,
    log_every=1,
    save_every=4,
    keep_last=3,
    seed=0,
    device="cpu",
    num_threads=1,
)
