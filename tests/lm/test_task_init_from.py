"""Continued training (``init_from``): the new run starts from the old weights and
tokenizer with a fresh optimizer; mismatched shapes are refused."""

from __future__ import annotations

import json

import pytest
import torch

from complexformer.lm import LMTask, load_run, train
from complexformer.models import GPTConfig


def test_init_from_starts_from_the_trained_weights(
    reference, model_config, make_train_config, tmp_path
):
    ref_dir, _ = reference
    src = load_run(ref_dir)
    task = LMTask(model_config)
    tc = make_train_config(tmp_path / "cont", init_from=str(ref_dir), max_steps=2)

    class _Dist:
        is_main, rank, world_size, distributed = True, 0, 1, False

    task.prepare(tc, tmp_path / "cont", False, _Dist(), None)
    assert task.tokenizer.fingerprint == src.tokenizer.fingerprint  # the init run's tokenizer
    model = task.build_model()
    for (name, a), b in zip(
        model.state_dict().items(), src.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    summary = train(model_config, tc, log=None)
    rows = [json.loads(x) for x in (tmp_path / "cont" / "metrics.jsonl").read_text().splitlines()]
    ref_rows = [json.loads(x) for x in (ref_dir / "metrics.jsonl").read_text().splitlines()]
    # the continued run's first loss is far below the from-scratch run's first loss
    assert rows[0]["train_loss"] < ref_rows[0]["train_loss"] - 0.5
    assert summary["steps"] == 2


def test_init_from_refuses_other_shapes(reference, make_train_config, tmp_path):
    ref_dir, _ = reference
    other = GPTConfig(vocab_size=300, n_layer=2, n_head=2, d_model=32, d_ff=64, max_seq_len=32)
    tc = make_train_config(tmp_path / "bad", init_from=str(ref_dir), max_steps=1)
    with pytest.raises(ValueError, match="shape-defining fields"):
        train(other, tc, log=None)
