"""complexformer: complex-valued attention for transformers.

- :mod:`complexformer.attention`: CMHA (ComplexFormer, Shao et al. 2025) as fused attention,
  and the baselines (RoPE, learned, sinusoidal, ALiBi, NoPE).
- :mod:`complexformer.models`: the ComplexFormer language model.
- :mod:`complexformer.losses`: the phase contrastive loss.
- :mod:`complexformer.nn`: complex-valued layers (positional encodings, multi-head attention,
  Transformer), so that ``import complexformer as ctorch; ctorch.nn.RotaryEmbedding(...)``
  runs code written for the complextorch API.
- :mod:`complexformer.cmplxbert`: CmplxBERT-LoRA, complex LoRA adapters on a pre-trained BERT
  (Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024); imported on demand
  (``from complexformer.cmplxbert import complexify``).
- :mod:`complexformer.hf`: ``ComplexFormerConfig`` / ``ComplexFormerForCausalLM`` for
  transformers (``AutoModelForCausalLM``, ``pipeline``, ``generate``), the export of a run, and
  ``complexformer.hf.register_auto_classes()``, which registers them with the auto classes
  (an explicit call: ``import complexformer`` does not import transformers).
- :mod:`complexformer.retrofit`: CMHA for pre-trained Hugging Face RoPE models (``to_cmha``,
  exact at conversion; adaptation files; ``complexformer retrofit``); imported on demand.
- :mod:`complexformer.compat.complextorch`: a drop-in with complextorch 2.1.1's arguments and
  outputs; imported on demand.
"""

from . import attention, losses, models, nn

__version__ = "0.1.0"

__all__ = ["__version__", "attention", "losses", "models", "nn"]
