"""complextorch's ``nn.modules.softmax``: the compat score softmaxes."""

from ..softmax import CVSoftMax, MagSoftMax, PhaseSoftMax

__all__ = ["CVSoftMax", "MagSoftMax", "PhaseSoftMax"]
