"""transformers' generate and pipeline on an exported model: the tokens of ComplexFormerLM."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, pipeline  # noqa: E402

from tests.hf.test_export import ALL_SCHEMES  # noqa: E402

PROMPT = "the cat sat on"
#: Untied embeddings: a random model with tied ones tends to repeat a single token greedily.
UNTIED = dict(tie_embeddings=False)


@pytest.mark.parametrize("scheme", ALL_SCHEMES)
def test_greedy_generate_gives_our_tokens(exported, tokenizer, scheme):
    lm, out = exported(scheme, **UNTIED)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([tokenizer.encode(PROMPT)])
    n = 30
    ours = lm.generate(ids, n, temperature=0.0)
    for use_cache in (True, False):
        theirs = hf.generate(
            ids, max_new_tokens=n, do_sample=False, use_cache=use_cache, eos_token_id=None
        )
        assert theirs.tolist() == ours.tolist(), use_cache
    assert len(set(ours[0, ids.shape[1] :].tolist())) > 3  # a real continuation, not one token


def test_sampling_runs_and_is_seeded(exported, tokenizer):
    _, out = exported("cmha")
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([tokenizer.encode(PROMPT)])
    kw = dict(max_new_tokens=12, do_sample=True, top_k=20, top_p=0.9, temperature=0.8)
    torch.manual_seed(3)
    a = hf.generate(ids, **kw)
    torch.manual_seed(3)
    b = hf.generate(ids, **kw)
    assert a.tolist() == b.tolist()
    assert a.shape[1] <= ids.shape[1] + 12


@pytest.mark.parametrize("scheme", ["cmha", "learned", "alibi"])
def test_left_padded_batch_generates_each_row_as_alone(exported, tokenizer, scheme):
    _, out = exported(scheme, **UNTIED)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    prompts = [PROMPT, "def value(self): return"]
    rows = [tokenizer.encode(p) for p in prompts]
    width, pad = max(map(len, rows)), tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    batch = hf.generate(
        ids, attention_mask=mask, max_new_tokens=10, do_sample=False, eos_token_id=None
    )
    for i, r in enumerate(rows):
        alone = hf.generate(
            torch.tensor([r]), max_new_tokens=10, do_sample=False, eos_token_id=None
        )
        assert batch[i, width:].tolist() == alone[0, len(r) :].tolist()


def test_pipeline_text_generation_returns_text(exported):
    _, out = exported("cmha")
    gen = pipeline("text-generation", model=str(out))
    res = gen(PROMPT, max_new_tokens=8, do_sample=False)
    text = res[0]["generated_text"]
    assert isinstance(text, str) and text.startswith(PROMPT) and len(text) > len(PROMPT)
