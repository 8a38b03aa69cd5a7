"""A drop-in for the complextorch library, version 2.1.1: ``import ... as ctorch``.

``import complexformer.compat.complextorch as ctorch`` gives ``ctorch.nn.MultiheadAttention``,
``ctorch.nn.Transformer`` (and its encoder/decoder layers and stacks), the positional encodings
``ctorch.nn.RotaryEmbedding`` / ``SinusoidalPositionalEncoding`` / ``CoPE``, the score softmaxes
``ctorch.nn.CVSoftMax`` / ``PhaseSoftMax`` / ``MagSoftMax``, ``ctorch.nn.HolographicAttention``
and ``ctorch.models.ViT`` with complextorch's argument names and defaults. With complextorch's
weights copied in (:func:`load_complextorch_state_dict`) they return complextorch's outputs
(to float32 round-off). They are thin layers over :mod:`complexformer.nn`: complextorch's
residual and LayerNorm placement, its arguments translated to ours, its weight layout converted.
Extras that complextorch does not have (masks, real parameters) work as in complexformer.nn.
See docs/complex_layers.md, "Porting from complextorch".
"""

from . import models, nn
from .weights import complextorch_state_dict, load_complextorch_state_dict

__all__ = [
    "COMPLEXTORCH_VERSION",
    "complextorch_state_dict",
    "load_complextorch_state_dict",
    "models",
    "nn",
]

#: The complextorch release whose API and outputs this package reproduces.
COMPLEXTORCH_VERSION = "2.1.1"
