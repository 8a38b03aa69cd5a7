"""Fused AdamW (``TrainConfig.fused_adamw``): the same training as the default update up to
float rounding, and ``"auto"`` leaves CPU runs on the default update (bit-identical)."""

from __future__ import annotations

import pytest
import torch

from complexformer.lm import train
from complexformer.models import GPTConfig
from complexformer.training import TrainConfig
from complexformer.training.optim import build_optimizer, use_fused_adamw
from tests.training.resilience_testlib import training_rows
from tests.training.training_testlib import REFERENCE_MODEL

STEPS = 6


def test_fused_adamw_trains_like_the_default_update(make_train_config, tmp_path):
    runs = {}
    for fused in (False, True):
        tc = make_train_config(
            tmp_path / str(fused),
            fused_adamw=fused,
            max_steps=STEPS,
            eval_every=STEPS,
            save_every=STEPS,
            log_every=1,
        )
        summary = train(GPTConfig(**REFERENCE_MODEL), tc, log=None)
        runs[fused] = (training_rows(tmp_path / str(fused)), summary)
    for key in ("train_loss", "grad_norm"):
        got = torch.tensor([runs[True][0][s][key] for s in range(1, STEPS + 1)])
        want = torch.tensor([runs[False][0][s][key] for s in range(1, STEPS + 1)])
        print(f"{key}: largest difference {(got - want).abs().max().item():.3g}")
        # measured on this model: train_loss equal, grad_norm differing by up to 1.2e-7
        # (float32 rounding of the fused kernel's different order of operations)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=key)
    assert runs[True][1]["val_loss"] == pytest.approx(runs[False][1]["val_loss"], rel=1e-5)


def test_auto_is_fused_on_cuda_only_and_the_default_stays_unfused_on_cpu(tmp_path):
    assert use_fused_adamw("auto", torch.device("cuda")) is True
    assert use_fused_adamw("auto", torch.device("cpu")) is False
    assert use_fused_adamw(True, torch.device("cpu")) is True
    assert use_fused_adamw(False, torch.device("cuda")) is False
    model = torch.nn.Linear(4, 4)
    default = build_optimizer(model, TrainConfig(out_dir=str(tmp_path)))
    assert not default.defaults["fused"]
    fused = build_optimizer(model, TrainConfig(out_dir=str(tmp_path), fused_adamw=True))
    assert fused.defaults["fused"] is True


def test_fused_adamw_must_be_auto_true_or_false(tmp_path):
    with pytest.raises(ValueError, match="fused_adamw must be one of 'auto', true, false"):
        TrainConfig(out_dir=str(tmp_path), fused_adamw="yes")
