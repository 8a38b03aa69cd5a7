"""complexformer: complex-valued attention for transformers.

- :mod:`complexformer.attention`: CMHA (ComplexFormer, Shao et al. 2025) as fused attention,
  and the baselines (RoPE, learned, sinusoidal, ALiBi, NoPE).
- :mod:`complexformer.models`: the ComplexFormer language model.
- :mod:`complexformer.losses`: the phase contrastive loss.
"""

from . import attention, losses, models

__version__ = "0.1.0"

__all__ = ["__version__", "attention", "losses", "models"]
