"""complextorch 2.1.1's ``models.ViT``: complexformer.models.ViT with complextorch's blocks.

Patch embedding, class token, positional encoding, final LayerNorm, class-token pooling and the
head are :class:`complexformer.models.ViT`'s (a complex ``Linear`` on the patch pixels is the
map of complextorch's ``Conv2d`` with kernel = stride = patch_size). The blocks are
complextorch's :class:`ViTLayer`:

    x = MultiheadAttention(x, x, x)          # residual + LayerNorm (eps 1e-6) inside: post-norm
    x = x + Dropout(fc2(CGELU(fc1(LayerNorm(x)))))   # pre-norm feed-forward

complextorch's ``ViTLayer`` docstring describes a pre-norm before the attention too; its forward
has none, and this follows the forward. The head's output is complex (B, num_classes), as there.

Invalid arguments raise complextorch's exceptions and messages, checked in complextorch's order
(image and patch size, ``pos_encoding``, ``dim`` and ``heads``, ``dropout``, ``softmax_on``);
sizes complextorch does not check (a depth or width that is not positive) raise
complexformer.models.ViT's ``ValueError``.
"""

from __future__ import annotations

from torch import Tensor, nn

from complexformer import nn as cnn
from complexformer.models import ViT as _ViT

from ..nn.attention import MultiheadAttention, translate_score
from ..nn.norm import LayerNorm
from ..nn.positional import RotaryEmbedding, SinusoidalPositionalEncoding
from ..nn.validation import check_dropout

__all__ = ["ViT", "ViTLayer", "vit_b", "vit_h", "vit_l", "vit_s", "vit_t"]

#: Values of ``pos_encoding`` (complextorch ``ViT``).
POS_ENCODINGS = ("learned", "sinusoidal", "rotary")


class _ViTFFN(nn.Module):
    """Pre-norm MLP block with residual: x + Dropout(fc2(CGELU(fc1(LayerNorm(x)))))."""

    def __init__(self, dim: int, mlp_dim: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.norm = LayerNorm(dim, eps=eps)
        self.fc1 = cnn.Linear(dim, mlp_dim)
        self.act = cnn.CGELU()
        self.fc2 = cnn.Linear(mlp_dim, dim)
        self.drop = cnn.Dropout(dropout, masks="independent")

    def forward(self, x: Tensor) -> Tensor:
        return x + self.drop(self.fc2(self.act(self.fc1(self.norm(x)))))


class ViTLayer(nn.Module):
    """complextorch's ViT block: attention block (post-norm inside), then a pre-norm FFN.

    Args:
        dim: complex width; nhead: heads; mlp_dim: FFN width.
        dropout: dropout probability.
        layer_norm_eps: eps of the FFN's LayerNorm.
        softmax_on: ``"complex"`` (split softmax) or ``"real"``.
        rotary: optional :class:`RotaryEmbedding` (dim = dim // nhead).
    """

    def __init__(
        self,
        dim: int,
        nhead: int,
        mlp_dim: int,
        dropout: float = 0.0,
        layer_norm_eps: float = 1e-5,
        softmax_on: str = "complex",
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        if dim % nhead != 0:
            raise ValueError(f"dim ({dim}) must be divisible by nhead ({nhead})")
        d_head = dim // nhead
        self.attn = MultiheadAttention(
            nhead, dim, d_head, d_head, dropout=dropout, softmax_on=softmax_on, rotary=rotary
        )
        self.ffn = _ViTFFN(dim, mlp_dim, dropout, layer_norm_eps)

    def forward(self, x: Tensor) -> Tensor:
        """x complex (B, N, dim) -> (B, N, dim)."""
        return self.ffn(self.attn(x, x, x))


class ViT(_ViT):
    """Complex Vision Transformer with complextorch 2.1.1's arguments and blocks.

    Args:
        image_size, patch_size, in_channels, num_classes, dim, depth, heads, mlp_dim, dropout,
        layer_norm_eps: as complextorch (``mlp_dim`` defaults to 3072, not 4 * dim).
        softmax_on: ``"complex"`` (split softmax) or ``"real"``.
        pos_encoding: ``"learned"`` (a complex table added), ``"sinusoidal"`` (complex phasors
            added) or ``"rotary"`` (RoPE on the per-head queries and keys, shared by the blocks).

    Raises:
        ValueError: ``image_size`` not a multiple of ``patch_size``, an unknown
            ``pos_encoding``, ``dim`` not a multiple of ``heads``, ``dropout`` outside [0, 1]
            or an unknown ``softmax_on``, with complextorch's messages (a ``ZeroDivisionError``
            for a zero ``patch_size`` or ``heads``, as there).

    Shapes:
        input complex (B, in_channels, image_size, image_size) -> complex (B, num_classes)
        (complex (B, dim) class-token features when ``num_classes=0``).
    """

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        in_channels: int = 1,
        num_classes: int = 1000,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        mlp_dim: int = 3072,
        dropout: float = 0.0,
        layer_norm_eps: float = 1e-5,
        softmax_on: str = "complex",
        pos_encoding: str = "learned",
    ) -> None:
        # complextorch's checks, in its order and words, before complexformer.models.ViT's
        if image_size % patch_size != 0:
            raise ValueError(
                f"image_size ({image_size}) must be divisible by patch_size ({patch_size})"
            )
        if pos_encoding not in POS_ENCODINGS:
            raise ValueError(
                f"pos_encoding must be 'learned', 'sinusoidal' or 'rotary'; got {pos_encoding!r}"
            )
        if dim % heads != 0:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        check_dropout(dropout)
        # complextorch checks softmax_on in its blocks: with depth 0 it is never looked at
        score = translate_score(softmax_on) if depth > 0 else "real"
        super().__init__(
            image_size,
            patch_size,
            in_channels=in_channels,
            num_classes=num_classes,
            dim=dim,
            depth=depth,
            heads=heads,
            mlp_dim=mlp_dim,
            dropout=dropout,
            layer_norm_eps=layer_norm_eps,
            score=score,
            pos_encoding=pos_encoding,
            logits="complex",
        )
        self.softmax_on = softmax_on
        self.drop = cnn.Dropout(dropout, masks="independent")
        self.norm = LayerNorm(dim, eps=layer_norm_eps)

    def _positional(self, pos_encoding: str, dim: int, heads: int):
        if pos_encoding == "sinusoidal":
            return SinusoidalPositionalEncoding(dim), None
        if pos_encoding == "rotary":
            return None, RotaryEmbedding(dim // heads)
        return super()._positional(pos_encoding, dim, heads)

    def _block(
        self, dim, heads, mlp_dim, dropout, activation, layer_norm_eps, score, rotary, whiten
    ):
        softmax_on = "real" if score == "real" else "complex"
        return ViTLayer(dim, heads, mlp_dim, dropout, layer_norm_eps, softmax_on, rotary)


def vit_t(image_size: int = 224, patch_size: int = 16, **kwargs) -> ViT:
    """ViT-Tiny: 12 layers, 3 heads, 192 dim."""
    return ViT(image_size, patch_size, dim=192, depth=12, heads=3, mlp_dim=768, **kwargs)


def vit_s(image_size: int = 224, patch_size: int = 16, **kwargs) -> ViT:
    """ViT-Small: 12 layers, 6 heads, 384 dim."""
    return ViT(image_size, patch_size, dim=384, depth=12, heads=6, mlp_dim=1536, **kwargs)


def vit_b(image_size: int = 224, patch_size: int = 16, **kwargs) -> ViT:
    """ViT-Base: 12 layers, 12 heads, 768 dim."""
    return ViT(image_size, patch_size, dim=768, depth=12, heads=12, mlp_dim=3072, **kwargs)


def vit_l(image_size: int = 224, patch_size: int = 16, **kwargs) -> ViT:
    """ViT-Large: 24 layers, 16 heads, 1024 dim."""
    return ViT(image_size, patch_size, dim=1024, depth=24, heads=16, mlp_dim=4096, **kwargs)


def vit_h(image_size: int = 224, patch_size: int = 14, **kwargs) -> ViT:
    """ViT-Huge: 32 layers, 16 heads, 1280 dim."""
    return ViT(image_size, patch_size, dim=1280, depth=32, heads=16, mlp_dim=5120, **kwargs)
