"""Helpers of the transformers tests: a real BPE tokenizer and tiny random models."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import torch

from complexformer.data.bpe import train_bpe
from complexformer.data.tokenizer import Tokenizer
from complexformer.models import ComplexFormerLM, GPTConfig
from tests.common_testlib import WORDS

#: Every model here: 2 layers, 2 heads of 16 dimensions, 64 positions.
TINY = dict(n_layer=2, n_head=2, d_model=32, d_ff=64, max_seq_len=64)


def documents(n: int = 300, seed: int = 0) -> list[str]:
    """Short pseudo-sentences of :data:`tests.common_testlib.WORDS`."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))) + "." for _ in range(n)]


def tiny_tokenizer() -> Tokenizer:
    """The package's byte-level BPE trained on :func:`documents` (about 300 tokens)."""
    return train_bpe(documents(), vocab_size=300)


def tiny_lm(tokenizer: Tokenizer, pos_scheme: str = "cmha", seed: int = 0, **overrides):
    """A random :class:`ComplexFormerLM` in eval mode.

    The weights are drawn ten times wider than at initialisation (and CMHA's δ, b spread
    out), so that logits differ between tokens and greedy decoding does not repeat one token.
    """
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=tokenizer.vocab_size, pos_scheme=pos_scheme, init_std=0.2, **TINY, **overrides
    )
    model = ComplexFormerLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("adapt_delta", "adapt_bias")):
                p.normal_(0.8 if name.endswith("delta") else 0.0, 0.5)
            elif name.endswith("bias") or ".ln" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def purelib() -> str:
    """This interpreter's site-packages (torch, transformers), without the repository."""
    return sysconfig.get_paths()["purelib"]


def isolated_code(body: str) -> str:
    """Python source for ``python -I -S``: site-packages on sys.path (``.pth`` files, and so
    the editable install of complexformer, are not processed), complexformer unimportable."""
    return (
        "import sys\n"
        f"sys.path.append({purelib()!r})\n"
        "try:\n"
        "    import complexformer\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('complexformer is importable: the isolation failed')\n" + body
    )


def model_dir_with_tokenizer(model: ComplexFormerLM, tokenizer: Tokenizer, root: Path) -> Path:
    """A saved model directory that ``load_run`` reads (tokenizer in ``<dir>/tokenizer``)."""
    d = model.save_pretrained(root / "model")
    tokenizer.save(d / "tokenizer")
    return d
