"""Tiny random Llama / Mistral / Qwen2 models with a real trained BPE tokenizer, saved offline."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.common_testlib import WORDS

FAMILIES = ("llama", "mistral", "qwen2")
TEXT = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 4


def tiny_config(family: str, kv_heads: int = 2, **overrides):
    """A 2-layer config of ``family`` with 4 query heads of dimension 16 (GQA for kv_heads=2)."""
    import transformers

    kw = dict(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    )
    kw.update(overrides)
    cls = {
        "llama": transformers.LlamaConfig,
        "mistral": transformers.MistralConfig,
        "qwen2": transformers.Qwen2Config,
    }[family]
    return cls(**kw)


def tiny_model(family: str, kv_heads: int = 2, seed: int = 0, attn: str = "sdpa", **overrides):
    """A random causal LM of ``family`` in eval mode (weights from ``seed``)."""
    import transformers

    torch.manual_seed(seed)
    cfg = tiny_config(family, kv_heads, **overrides)
    cfg._attn_implementation = attn
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():  # non-trivial norm gains, so that tuning them is a real control
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.8, 1.2)
    return model


def build_tiny_base(directory: Path, family: str = "llama", kv_heads: int = 2) -> Path:
    """Save a tiny model of ``family`` and a trained byte-level BPE tokenizer (offline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(TEXT, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    tok.save_pretrained(directory)
    eos = tok.eos_token_id
    model = tiny_model(family, kv_heads, vocab_size=len(tok), bos_token_id=eos, eos_token_id=eos)
    model.save_pretrained(directory)
    return directory
