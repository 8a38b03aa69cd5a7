"""Complex Linear and Embedding layers with real parameter storage.

Parameters are real tensors with a trailing dimension of 2 holding (Re, Im): NCCL cannot
all-reduce complex tensors, AMP's GradScaler rejects them, and optimizers / safetensors are
simpler on reals. ``complex_weight`` gives the complex view (no copy).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import functional as CF
from .init import complex_normal_, trabelsi_
from .utils import check_choice, check_positive_int, lift_complex

__all__ = ["Embedding", "Linear"]


class Linear(nn.Module):
    """y = W x + b with complex W, b (complextorch ``Linear`` API).

    Weight init: Trabelsi et al. 2018 (Rayleigh modulus, uniform phase) with the Glorot
    (default) or He variance; the bias starts at 0.

    Args:
        in_features: size of the complex input features.
        out_features: size of the complex output features.
        bias: add a learnable complex bias.
        init: ``"glorot"`` or ``"he"``.
        device, dtype: factory kwargs of the REAL parameters (float32 by default; a complex
            dtype is mapped to its real counterpart).

    Shapes:
        input (..., in_features) complex (a real floating input is lifted, Im = 0);
        output (..., out_features) complex.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        init: str = "glorot",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_positive_int(in_features, "in_features", "Linear")
        check_positive_int(out_features, "out_features", "Linear")
        self.init = check_choice(init, "init", ("glorot", "he"), "Linear")
        dtype = _real_param_dtype(dtype)
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, 2, device=device, dtype=dtype)
        )  # (out, in, 2)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, 2, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        trabelsi_(self.weight, self.init)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @property
    def complex_weight(self) -> Tensor:
        """The (out, in) complex view of ``weight``."""
        return torch.view_as_complex(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        x = lift_complex(x, "input", "Linear")
        if x.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear: last dimension of the input is {x.shape[-1]}, expected "
                f"in_features={self.in_features}"
            )
        return CF.complex_linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, init={self.init!r}"
        )


class Embedding(nn.Module):
    """Lookup table of complex vectors: integer ids (...) -> complex (..., embedding_dim).

    Init: circular complex normal with E|e|^2 = 1 (Re, Im ~ N(0, 1/2)), the complex analogue of
    torch.nn.Embedding's N(0, 1); the ``padding_idx`` row is zero and gets no gradient.

    Args:
        num_embeddings: vocabulary size.
        embedding_dim: complex features per entry.
        padding_idx: optional row kept at zero.
        device, dtype: factory kwargs of the real (num, dim, 2) parameter.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_positive_int(num_embeddings, "num_embeddings", "Embedding")
        check_positive_int(embedding_dim, "embedding_dim", "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx={padding_idx} is out of range for "
                    f"num_embeddings={num_embeddings}"
                )
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = nn.Parameter(
            torch.empty(
                num_embeddings, embedding_dim, 2, device=device, dtype=_real_param_dtype(dtype)
            )
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        complex_normal_(self.weight)
        if self.padding_idx is not None:
            with torch.no_grad():
                self.weight[self.padding_idx].zero_()

    @property
    def complex_weight(self) -> Tensor:
        return torch.view_as_complex(self.weight)

    def forward(self, idx: Tensor) -> Tensor:
        if idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"Embedding: indices must be int64 or int32, got dtype {idx.dtype}")
        return CF.complex_embedding(idx, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


def _real_param_dtype(dtype) -> torch.dtype | None:
    if dtype is None:
        return None
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)
