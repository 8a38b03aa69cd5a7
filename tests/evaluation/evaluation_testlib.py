"""Helpers of the evaluation tests (a uniquely named module, importable from test files)."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.common_testlib import WORDS, write_corpus  # noqa: F401  (re-exported)

# A tiny CMHA model: 1 layer, 2 heads, 32 dims, trained on 64-token blocks.
TINY_MODEL = dict(vocab_size=300, n_layer=1, n_head=2, d_model=32, d_ff=64, max_seq_len=64)
TINY_TRAIN = dict(
    vocab_size=300,
    max_steps=20,
    batch_size=4,
    lr=3e-3,
    warmup_frac=0.25,
    eval_every=20,
    eval_blocks=4,
    log_every=5,
    save_every=20,
    keep_last=1,
    seed=0,
    device="cpu",
    num_threads=1,
)

TRAIN_TEXT = [
    "the cat sat on the mat and the dog ran to its home",
    "birds sang in the trees while a cat slept",
    "def value(self): return len(self.items)",
] * 30


def build_tiny_gpt2(directory: Path, n_positions: int = 64) -> Path:
    """Save a tiny random GPT-2 and a trained byte-level BPE tokenizer (~280 tokens) to
    ``directory`` (loadable with ``AutoModelForCausalLM``/``AutoTokenizer``, offline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(TRAIN_TEXT, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    tok.save_pretrained(directory)
    eos = tok.eos_token_id
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=n_positions,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    GPT2LMHeadModel(cfg).save_pretrained(directory)
    return directory
