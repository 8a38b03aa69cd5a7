"""The real LoRA linear of the baselines and retrofits: y = W·x + b + s·B·A·x, equal to its
base at the start (B = 0), with only the two factors trainable."""

from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close

from complexformer.pretrained import RealLoRALinear


def test_real_lora_starts_at_base_and_adds_the_low_rank_update():
    torch.manual_seed(0)
    lin = nn.Linear(7, 5)
    x = torch.randn(3, 7)
    ref = lin(x)
    lora = RealLoRALinear(lin, r=3)
    assert_close(lora(x), ref)  # B = 0: equal to the base at the start
    assert [n for n, p in lora.named_parameters() if p.requires_grad] == ["lora_A", "lora_B"]
    with torch.no_grad():
        lora.lora_B.normal_()
    assert_close(lora(x), ref + x @ lora.lora_A.T @ lora.lora_B.T)


def test_alpha_scales_the_update_by_alpha_over_r():
    torch.manual_seed(1)
    lin = nn.Linear(4, 6)
    x = torch.randn(2, 4)
    lora = RealLoRALinear(lin, r=2, alpha=6.0)
    with torch.no_grad():
        lora.lora_B.normal_()
    assert_close(lora(x), lin(x) + 3.0 * (x @ lora.lora_A.T @ lora.lora_B.T))
