"""A ComplexFormer run as a transformers model directory (``complexformer export``).

The directory holds what ``AutoModelForCausalLM.from_pretrained`` and ``pipeline`` read:
``config.json`` (``model_type="complexformer"`` and an ``auto_map`` to the modeling code),
``model.safetensors`` (the state dict of ``ComplexFormerLM`` under the same names; a tied
``lm_head.weight`` is stored once, as ``wte.weight``), ``generation_config.json``, the two
self-contained code files ``configuration_complexformer.py`` and
``modeling_complexformer.py`` (for ``trust_remote_code=True`` without complexformer), the
tokenizer as a ``PreTrainedTokenizerFast`` (EOS, BOS and padding all ``<|endoftext|>``,
padding on the left) and ``manifest.json`` with the sha256 of every file. It also loads back
with ``ComplexFormerLM.from_pretrained`` and ``complexformer generate/evaluate --model DIR``,
which check every file they read against the manifest (a missing manifest, a changed file or
a file it does not list is an error that names it; ``--no-verify`` reads it unchecked).

The directory is written into a temporary sibling and renamed into place, so an interrupted
export leaves no partial directory under the final name.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from tokenizers import Tokenizer as TkTokenizer
from transformers import PreTrainedTokenizerFast

from ..data.tokenizer import META_FILE as TOKENIZER_META
from ..data.tokenizer import Tokenizer
from ..lm import load_run
from ..models.config import HF_NAMES, GPTConfig
from ..models.lm import ComplexFormerLM
from ..storage import MANIFEST, atomic_dir, atomic_write_text, refuse_link, write_manifest
from .configuration_complexformer import POS_SCHEMES, ComplexFormerConfig
from .markers import EXPORT_KIND, is_export_dir
from .modeling_complexformer import ComplexFormerForCausalLM

__all__ = [
    "EXPORT_KIND",
    "export_run",
    "hf_config",
    "hf_tokenizer",
    "is_export_dir",
    "save_hf",
    "to_hf_model",
]


def hf_config(config: GPTConfig, tokenizer: Tokenizer | None = None) -> ComplexFormerConfig:
    """The transformers configuration of a model config (token ids from the tokenizer).

    Raises:
        ValueError: a scheme the transformers port does not implement (the known are named).
    """
    if config.pos_scheme not in POS_SCHEMES:
        raise ValueError(
            f"pos_scheme {config.pos_scheme!r} has no transformers port; exportable schemes: "
            f"{', '.join(POS_SCHEMES)}"
        )
    fields = {HF_NAMES.get(k, k): v for k, v in config.to_dict().items()}
    ids = {}
    if tokenizer is not None:
        eos = tokenizer.eos_token_id
        ids = {"bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos}
    return ComplexFormerConfig(**fields, **ids, architectures=["ComplexFormerForCausalLM"])


def to_hf_model(
    model: ComplexFormerLM, tokenizer: Tokenizer | None = None
) -> ComplexFormerForCausalLM:
    """A :class:`ComplexFormerForCausalLM` holding the weights of ``model`` (names 1:1)."""
    hf = ComplexFormerForCausalLM(hf_config(model.config, tokenizer))
    hf.load_state_dict(model.state_dict(), strict=True)
    return hf.to(next(model.parameters()).device).eval()


def hf_tokenizer(
    tokenizer: Tokenizer, model_max_length: int | None = None
) -> PreTrainedTokenizerFast:
    """The tokenizer as a transformers fast tokenizer: EOS, BOS and padding = its EOS token.

    Args:
        tokenizer: the run's tokenizer (byte-level BPE or a transformers tokenizer).
        model_max_length: recorded in ``tokenizer_config.json`` (the training context).
    """
    eos = tokenizer.eos_token
    extra = {} if model_max_length is None else {"model_max_length": model_max_length}
    if tokenizer.kind == "bpe":
        backend = TkTokenizer.from_str(tokenizer.backend.to_str())  # a copy
        return PreTrainedTokenizerFast(
            tokenizer_object=backend,
            eos_token=eos,
            bos_token=eos,
            pad_token=eos,
            padding_side="left",
            **extra,
        )
    tok = copy.deepcopy(tokenizer.backend)
    for name in ("bos_token", "pad_token"):
        if getattr(tok, name, None) is None:
            setattr(tok, name, eos)
    tok.padding_side = "left"
    return tok


def _check_target(out: Path) -> None:
    refuse_link(out)  # atomic_dir would replace the link; its target is never written
    refuse_link(out / MANIFEST)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a directory for the exported model")
    if out.is_dir() and any(out.iterdir()) and not is_export_dir(out):
        raise ValueError(
            f"--out {out} exists and is not an exported model (no {MANIFEST} of kind "
            f"{EXPORT_KIND!r}); choose another directory or remove it"
        )


def save_hf(
    model: ComplexFormerLM,
    tokenizer: Tokenizer | None,
    out: str | os.PathLike,
    *,
    source: str | None = None,
) -> Path:
    """Write ``model`` (and its tokenizer) as a transformers model directory ``out``.

    Args:
        model: the language model.
        tokenizer: its tokenizer; without one the directory has no tokenizer files and
            ``pipeline`` cannot load it.
        out: the directory; an earlier export there is replaced, any other non-empty
            directory is refused.
        source: recorded in the manifest (the run the model came from).

    Returns:
        The directory.

    Raises:
        ValueError: a scheme without a transformers port, or an ``out`` that is not ours.
    """
    out = Path(out)
    _check_target(out)
    hf = to_hf_model(model, tokenizer)
    with atomic_dir(out) as tmp:
        hf.save_pretrained(tmp)  # config.json with auto_map, weights, generation config, code
        if tokenizer is not None:
            hf_tokenizer(tokenizer, model.config.max_seq_len).save_pretrained(tmp)
            meta = {"format": 1, "kind": tokenizer.kind, "eos_token": tokenizer.eos_token}
            atomic_write_text(tmp / TOKENIZER_META, json.dumps(meta, indent=2) + "\n")
        files = sorted(p.name for p in tmp.iterdir() if p.is_file())
        write_manifest(tmp, files, kind=EXPORT_KIND, source=source)
    return out


def export_run(
    ckpt: str | os.PathLike, out: str | os.PathLike, device: str = "cpu", *, verify: bool = True
) -> Path:
    """Export a run, checkpoint or saved model directory (with its tokenizer) to ``out``.

    Args:
        ckpt: anything :func:`~complexformer.lm.load_run` accepts.
        out: the target directory (see :func:`save_hf`).
        device: where to load the model.
        verify: check the source against its manifests first (False: read it unchecked,
            ``--no-verify``); the export always gets a manifest of its own.

    Returns:
        The directory.
    """
    run = load_run(ckpt, device=device, verify=verify)
    return save_hf(run.model, run.tokenizer, out, source=str(Path(ckpt).resolve()))
