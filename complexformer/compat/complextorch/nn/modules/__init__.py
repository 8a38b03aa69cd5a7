"""complextorch 2.1.1's module paths (``complextorch.nn.modules.<name>``) for the compat classes.

Code that imports from complextorch's submodules, e.g. ``from complextorch.nn.modules.position
import RotaryEmbedding``, works with ``complexformer.compat.complextorch`` in place of
``complextorch``. Each submodule re-exports the compat classes complextorch has there, under
the same ``__all__``: ``position``, ``attention`` (and ``attention.holographic``),
``transformer``, ``layernorm`` and ``softmax``.
"""

from . import attention, layernorm, position, softmax, transformer

__all__ = ["attention", "layernorm", "position", "softmax", "transformer"]
