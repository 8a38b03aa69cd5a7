"""Pre-trained real models that the package builds on or measures with.

- :mod:`~complexformer.pretrained.causal_lm`: load a Hugging Face causal language model from a
  hub name, a directory or a GGUF file (:func:`load_causal_lm`): the gen-PPL evaluator of
  ``evaluation`` and the bases of ``retrofit``;
- :mod:`~complexformer.pretrained.lora`: the real LoRA layer (:class:`RealLoRALinear`) that
  adapts a pre-trained linear layer: CmplxBERT's real baselines and the retrofit's ``lora``
  control.

It sits low (above ``storage`` and ``runtime`` only) so that every part that needs a
pre-trained real model takes it from one place.
"""

from .causal_lm import (
    SHORTHANDS,
    SMOLLM2_PACKAGE,
    CausalLMSource,
    load_causal_lm,
    resolve_causal_lm,
)
from .lora import RealLoRALinear

__all__ = [
    "SHORTHANDS",
    "SMOLLM2_PACKAGE",
    "CausalLMSource",
    "RealLoRALinear",
    "load_causal_lm",
    "resolve_causal_lm",
]
