"""Activation checkpointing per block: the same losses and gradient norms as without it
(dropout on, so the recomputation must draw the same masks), and less memory kept for the
backward pass."""

from __future__ import annotations

import torch

from complexformer.lm import train
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.training.activation import checkpoint_blocks
from complexformer.training.shard import transformer_blocks
from tests.training.resilience_testlib import training_rows
from tests.training.training_testlib import REFERENCE_MODEL

MODEL = {**REFERENCE_MODEL, "n_layer": 2, "dropout": 0.1}


def test_activation_checkpointing_gives_the_same_losses(make_train_config, tmp_path):
    short = dict(max_steps=4, eval_every=4, save_every=4)
    runs = {}
    for ac in (False, True):
        tc = make_train_config(tmp_path / str(ac), activation_checkpointing=ac, **short)
        msgs: list[str] = []
        train(GPTConfig(**MODEL), tc, log=msgs.append)
        runs[ac] = training_rows(tmp_path / str(ac))
        assert any("activation checkpointing: 2 block(s)" in m for m in msgs) == ac
    for key in ("train_loss", "grad_norm"):
        got = torch.tensor([runs[True][s][key] for s in range(1, 5)])
        want = torch.tensor([runs[False][s][key] for s in range(1, 5)])
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=key)


def test_checkpointed_blocks_keep_less_for_the_backward_pass():
    cfg = GPTConfig(**{**MODEL, "n_layer": 4, "d_model": 64, "d_ff": 256, "dropout": 0.0})
    ids = torch.randint(0, cfg.vocab_size, (4, cfg.max_seq_len))

    def saved_bytes(model) -> tuple[int, dict]:
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(ids, labels=ids).loss
        loss.backward()
        return total[0], {n: p.grad.clone() for n, p in model.named_parameters()}

    torch.manual_seed(0)
    plain = ComplexFormerLM(cfg)
    torch.manual_seed(0)
    ckpt = ComplexFormerLM(cfg)
    assert checkpoint_blocks(transformer_blocks(ckpt)) == 4
    assert checkpoint_blocks(transformer_blocks(ckpt)) == 0  # once only
    a, grads_a = saved_bytes(plain)
    b, grads_b = saved_bytes(ckpt)
    print(f"saved for backward: plain {a} bytes, checkpointed {b} bytes")
    assert b < 0.5 * a, (a, b)
    assert sorted(grads_a) == sorted(grads_b) == sorted(dict(ckpt.named_parameters()))
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=0, atol=0, msg=name)
