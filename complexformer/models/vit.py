"""Complex-valued Vision Transformer (complextorch 2.1.1 ``models.ViT`` API).

Dosovitskiy et al., "An Image is Worth 16x16 Words" (ICLR 2021), built from the complex layers
of :mod:`complexformer.nn`: non-overlapping patches -> complex linear patch embedding (the
same map as complextorch's Conv2d with kernel = stride = patch_size) -> class token +
positional encoding -> pre-norm complex Transformer encoder -> complex LayerNorm -> head ->
REAL logits (modulus or real part of the complex head output, so real cross-entropy applies).

Real images are lifted to complex (Im = 0); complex images (e.g. SAR / MRI / Fourier data) are
used as they are.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from complexformer.nn import (
    Dropout,
    LayerNorm,
    LearnedPositionalEmbedding,
    Linear,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    TransformerEncoderLayer,
)
from complexformer.nn.init import complex_normal_
from complexformer.nn.utils import check_choice, check_positive_int, lift_complex

__all__ = ["ViT"]

POS_ENCODINGS = ("learned", "sinusoidal", "rotary")
LOGITS = ("modulus", "real", "complex")
POOLS = ("cls", "mean")


class ViT(nn.Module):
    """Complex Vision Transformer.

    Args:
        image_size: side of the (square) input images.
        patch_size: side of the square patches; must divide ``image_size``.
        in_channels: image channels C.
        num_classes: output classes (0: return the pooled features, complex (B, dim)).
        dim: complex embedding width.
        depth: encoder layers.
        heads: attention heads (dim must be divisible by heads).
        mlp_dim: FFN width (default 4 * dim).
        dropout: dropout in the encoder and on the embeddings.
        layer_norm_eps: LayerNorm eps.
        score: attention score softmax: ``"real"``, ``"modulus"``, ``"split"``, ``"phase"``.
        pos_encoding: ``"learned"`` (complex table added to the tokens), ``"sinusoidal"``
            (complex phasors added) or ``"rotary"`` (RoPE on per-head queries/keys; nothing
            added).
        pool: ``"cls"`` (class token) or ``"mean"`` (mean of the patch tokens).
        logits: ``"modulus"`` (|head(z)|), ``"real"`` (Re head(z)) or ``"complex"``.
        whiten: LayerNorm whitening, ``"full"`` or ``"scalar"``.
        activation: FFN activation (``"gelu"`` = split GELU, ...).

    Shapes:
        input (B, C, H, W) complex or real floating; output (B, num_classes) real logits
        (complex for ``logits="complex"``).
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
        mlp_dim: int | None = None,
        dropout: float = 0.0,
        layer_norm_eps: float = 1e-5,
        score: str = "real",
        pos_encoding: str = "learned",
        pool: str = "cls",
        logits: str = "modulus",
        whiten: str = "full",
        activation: str | nn.Module = "gelu",
    ) -> None:
        super().__init__()
        for name, v in (
            ("image_size", image_size),
            ("patch_size", patch_size),
            ("in_channels", in_channels),
            ("dim", dim),
            ("depth", depth),
            ("heads", heads),
        ):
            check_positive_int(v, name, "ViT")
        if image_size % patch_size:
            raise ValueError(
                f"ViT: image_size={image_size} is not divisible by patch_size={patch_size}"
            )
        if dim % heads:
            raise ValueError(f"ViT: dim={dim} is not divisible by heads={heads}")
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 0:
            raise ValueError(f"ViT: num_classes must be a non-negative int, got {num_classes!r}")
        self.pos_encoding = check_choice(pos_encoding, "pos_encoding", POS_ENCODINGS, "ViT")
        self.pool = check_choice(pool, "pool", POOLS, "ViT")
        self.logits = check_choice(logits, "logits", LOGITS, "ViT")
        self.image_size, self.patch_size, self.in_channels = image_size, patch_size, in_channels
        self.num_patches = (image_size // patch_size) ** 2
        self.patch_embed = Linear(in_channels * patch_size * patch_size, dim)
        self.cls_token = nn.Parameter(complex_normal_(torch.empty(1, 1, dim, 2), 0.02))
        self.pos_embed, rotary = self._positional(pos_encoding, dim, heads)
        self.drop = Dropout(dropout)
        self.blocks = nn.ModuleList(
            self._block(
                dim,
                heads,
                mlp_dim or 4 * dim,
                dropout,
                activation,
                layer_norm_eps,
                score,
                rotary,
                whiten,
            )
            for _ in range(depth)
        )
        self.norm = LayerNorm(dim, eps=layer_norm_eps, whiten=whiten)
        self.head = Linear(dim, num_classes) if num_classes > 0 else None

    def _positional(
        self, pos_encoding: str, dim: int, heads: int
    ) -> tuple[nn.Module | None, RotaryEmbedding | None]:
        """(the encoding applied to the tokens, the rotary embedding of the blocks)."""
        if pos_encoding == "learned":
            return LearnedPositionalEmbedding(self.num_patches + 1, dim), None
        if pos_encoding == "sinusoidal":
            return SinusoidalPositionalEncoding(dim), None
        return None, RotaryEmbedding(dim // heads)

    def _block(
        self,
        dim: int,
        heads: int,
        mlp_dim: int,
        dropout: float,
        activation: str | nn.Module,
        layer_norm_eps: float,
        score: str,
        rotary: RotaryEmbedding | None,
        whiten: str,
    ) -> nn.Module:
        """One encoder block: a pre-norm :class:`TransformerEncoderLayer`."""
        return TransformerEncoderLayer(
            dim,
            heads,
            mlp_dim,
            dropout,
            activation,
            layer_norm_eps,
            norm_first=True,
            score=score,
            rotary=rotary,
            whiten=whiten,
        )

    def patchify(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, N, C * P * P), patches in row-major order."""
        b, c, h, w = x.shape
        p = self.patch_size
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)  # (B, h, w, C, P, P)
        return x.reshape(b, (h // p) * (w // p), c * p * p)

    def forward_features(self, x: Tensor) -> Tensor:
        """Pooled complex features (B, dim)."""
        x = lift_complex(x, "images", "ViT")
        expected = (self.in_channels, self.image_size, self.image_size)
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"ViT: images must have shape (B, {expected[0]}, {expected[1]}, "
                f"{expected[2]}), got {tuple(x.shape)}"
            )
        tokens = self.patch_embed(self.patchify(x))  # (B, N, dim)
        cls = torch.view_as_complex(self.cls_token).to(tokens.dtype)
        z = torch.cat([cls.expand(x.shape[0], -1, -1), tokens], dim=1)  # (B, N + 1, dim)
        if self.pos_embed is not None:
            z = self.pos_embed(z)
        z = self.drop(z)
        for block in self.blocks:
            z = block(z)
        z = self.norm(z)
        return z[:, 0] if self.pool == "cls" else z[:, 1:].mean(dim=1)

    def forward(self, x: Tensor) -> Tensor:
        feats = self.forward_features(x)
        if self.head is None:
            return feats
        out = self.head(feats)  # (B, num_classes) complex
        if self.logits == "modulus":
            return out.abs()
        if self.logits == "real":
            return out.real
        return out
