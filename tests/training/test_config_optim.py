"""TrainConfig serialisation and validation; AdamW decay groups; the lr schedule."""

from __future__ import annotations

import math

import pytest
import torch

from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.training import (
    TrainConfig,
    build_optimizer,
    build_scheduler,
    decay_split,
    lr_at,
    lr_factor,
)


def test_train_config_json_round_trip(tmp_path):
    cfg = TrainConfig(out_dir=str(tmp_path), max_steps=7, betas=(0.8, 0.9), eval_blocks=None)
    again = TrainConfig.from_json(cfg.to_json())
    assert again == cfg
    assert isinstance(again.betas, tuple)
    cfg.save(tmp_path / "t.json")
    assert TrainConfig.load(tmp_path / "t.json") == cfg
    assert cfg.replace(lr=5e-4).lr == 5e-4


def test_train_config_defaults_follow_the_paper(tmp_path):
    cfg = TrainConfig(out_dir=str(tmp_path))
    assert (cfg.betas, cfg.eps, cfg.weight_decay) == ((0.9, 0.98), 1e-9, 0.01)
    assert (cfg.warmup_frac, cfg.min_lr_ratio, cfg.grad_clip) == (0.05, 0.1, 1.0)
    assert cfg.device == "auto" and cfg.tokenizer is None and cfg.data == "stdlib"


def test_train_config_rejects_unknown_keys_with_suggestion(tmp_path):
    with pytest.raises(ValueError, match="did you mean 'max_steps'"):
        TrainConfig.from_dict({"out_dir": str(tmp_path), "max_step": 3})
    with pytest.raises(ValueError, match="did you mean 'warmup_frac'"):
        TrainConfig(out_dir=str(tmp_path)).replace(warmup_fraction=0.1)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_steps": 0},
        {"batch_size": 3, "grad_accum": 2},
        {"lr": 0.0},
        {"warmup_frac": 1.5},
        {"min_lr_ratio": -0.1},
        {"device": "tpu"},
        {"betas": (0.9,)},
        {"keep_last": 0},
        {"eval_blocks": 0},
        {"grad_clip": -1.0},
    ],
)
def test_train_config_validation(tmp_path, bad):
    with pytest.raises(ValueError):
        TrainConfig(out_dir=str(tmp_path), **bad)


@pytest.mark.parametrize("tie", [True, False])
def test_decay_only_linear_weight_matrices(tie):
    cfg = GPTConfig(
        vocab_size=50,
        n_layer=2,
        n_head=2,
        d_model=16,
        d_ff=32,
        max_seq_len=8,
        pcl=True,
        tie_embeddings=tie,
    )
    model = ComplexFormerLM(cfg)
    decay, no_decay = decay_split(model)
    expected_decay = {
        f"blocks.{i}.{n}.weight"
        for i in range(2)
        for n in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")
    }
    if not tie:
        expected_decay.add("lm_head.weight")
    assert set(decay) == expected_decay
    assert "wte.weight" in no_decay
    for name in no_decay:
        leaf = name.rsplit(".", 1)[-1]
        assert (
            leaf in ("bias", "adapt_delta", "adapt_bias", "pcl_weight")
            or "ln" in name
            or name == "wte.weight"
        ), name
    assert any(n.endswith("adapt_delta") for n in no_decay)
    assert any(n.endswith("pcl_weight") for n in no_decay)
    # every parameter exactly once (the tied head is not a second entry)
    names = decay + no_decay
    assert len(names) == len(set(names)) == len(list(model.parameters()))
    opt = build_optimizer(model, TrainConfig(out_dir="x"))
    groups = {g["name"]: g for g in opt.param_groups}
    assert groups["decay"]["weight_decay"] == 0.01 and groups["no_decay"]["weight_decay"] == 0.0
    assert groups["decay"]["betas"] == (0.9, 0.98) and groups["decay"]["eps"] == 1e-9
    n_opt = sum(len(g["params"]) for g in opt.param_groups)
    assert n_opt == len(list(model.parameters()))


def test_schedule_warmup_then_cosine_to_min_lr():
    cfg = TrainConfig(out_dir="x", max_steps=100, lr=1e-3, warmup_frac=0.1, min_lr_ratio=0.1)
    assert cfg.warmup_steps() == 10
    for s in range(10):  # linear warm-up, the first update already moves
        assert lr_at(s, cfg) == pytest.approx(1e-3 * (s + 1) / 10)
    assert lr_at(10, cfg) == pytest.approx(1e-3)
    assert lr_at(99, cfg) == pytest.approx(1e-4)  # cosine end = lr * min_lr_ratio
    assert lr_at(150, cfg) == pytest.approx(1e-4)  # held beyond the end
    mid = 10 + (99 - 10) / 2
    assert lr_factor(int(mid), 100, 10, 0.1) == pytest.approx(
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (int(mid) - 10) / 89))
    )
    values = [lr_at(s, cfg) for s in range(10, 100)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    assert lr_factor(0, 5, 0, 0.0) == 1.0 and lr_factor(4, 5, 0, 0.0) == pytest.approx(0.0)


def test_schedule_linear_warmup_then_linear_decay():
    cfg = TrainConfig(
        out_dir="x", max_steps=101, lr=1e-4, warmup_frac=0.1, min_lr_ratio=0.0, schedule="linear"
    )
    w = cfg.warmup_steps()
    for s in range(w):
        assert lr_at(s, cfg) == pytest.approx(1e-4 * (s + 1) / w)
    span = 100 - w
    for s in (w, w + 7, w + span // 2, 100):  # a straight line from lr at w to 0 at the end
        assert lr_at(s, cfg) == pytest.approx(1e-4 * (1 - (s - w) / span))
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainConfig(out_dir="x", schedule="step")


def test_scheduler_applies_lr_at_and_is_json_safe():
    import json

    cfg = TrainConfig(out_dir="x", max_steps=20, lr=2e-3, warmup_frac=0.2)
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([p], lr=cfg.lr)
    sched = build_scheduler(opt, cfg)
    for s in range(20):
        assert opt.param_groups[0]["lr"] == pytest.approx(lr_at(s, cfg))
        p.grad = torch.ones(2)
        opt.step()
        sched.step()
    json.dumps(sched.state_dict())


def test_lr_scale_puts_parameters_in_groups_of_their_own_rate():
    cfg = GPTConfig(vocab_size=50, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=8)
    model = ComplexFormerLM(cfg)
    tc = TrainConfig(out_dir="x", lr=1e-3, max_steps=10, warmup_frac=0.0)

    def scale(name):
        return 1.0 if name.startswith("blocks.0.mlp") else 0.25

    opt = build_optimizer(model, tc, scale)
    groups = {g["name"]: g for g in opt.param_groups}
    assert set(groups) == {"decay", "no_decay", "decay@0.25", "no_decay@0.25"}
    assert groups["decay@0.25"]["lr"] == pytest.approx(2.5e-4)
    assert groups["decay"]["lr"] == pytest.approx(1e-3)
    assert groups["decay@0.25"]["weight_decay"] == 0.01
    assert groups["no_decay@0.25"]["weight_decay"] == 0.0
    ids = {id(p): n for n, p in model.named_parameters()}
    for g in opt.param_groups:  # every parameter in the group of its own rate
        for p in g["params"]:
            assert scale(ids[id(p)]) == g["lr_scale"]
    warm = TrainConfig(out_dir="x", lr=1e-3, max_steps=10, warmup_frac=0.5)
    opt = build_optimizer(model, warm, scale)
    build_scheduler(opt, warm)  # the schedule multiplies each group's own rate
    lrs = {g["name"]: g["lr"] for g in opt.param_groups}
    assert lrs["decay"] == pytest.approx(1e-3 / 5)  # first warm-up step of five
    assert lrs["decay@0.25"] == pytest.approx(0.25 * lrs["decay"])
    # no scale: the two groups of before, in the same order (old checkpoints resume)
    assert [g["name"] for g in build_optimizer(model, tc).param_groups] == ["decay", "no_decay"]
