"""The base class of positional schemes: one object carries all of a scheme's behaviour.

A positional scheme decides how a language model knows where a token is. The schemes of the
ComplexFormer paper (Shao et al. 2025, Tables 1 and 4) act at four places, and a
:class:`PositionalScheme` has one method for each:

1. the attention layer: parameters and buffers it owns there (:meth:`init_attention`), the
   rotation of queries and keys at their absolute positions (:meth:`rotate`, with the
   offset of a KV cache) and an additive score bias (:meth:`score_bias`);
2. the model: parameters it owns there (:meth:`init_model`), the absolute embedding added
   to the token embeddings (:meth:`embed`) and the longest sequence it can run
   (:meth:`max_length`);
3. the phase contrastive loss (Shao et al. 2025, §3.2): the per-head phases it yields
   (:meth:`rotate_with_phases`, when :attr:`has_phases`);
4. the head analysis (the lab's ``complexformer_lab.evaluation.heads``): the score terms it
   can separate (:attr:`score_terms`) and the scores with each term removed
   (:meth:`score_variants`).

Parameters and buffers live on the attention layer and the model under fixed names
(``attn.omega``, ``attn.adapt_delta``, ``attn.adapt_bias``, ``attn.slopes``, ``wpe``), so
a scheme object is stateless: one registered instance serves every layer and model, and the
methods take the layer (or the model) as their first argument.

Every default does nothing, so a scheme overrides only what it uses: the base class itself
is NoPE (no positional information; the causal mask alone orders the tokens).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..rotary import join_pairs, phase_dtype, split_pairs

__all__ = ["PAIRS", "PositionalScheme", "modulus_pairs"]

# Each head pairs feature j with feature j + D/2 ("halves"). The paper pairs (2j, 2j+1); since
# the features come from the learned projection W_q / W_k, the two are the same model up to a
# fixed permutation of W's rows, and halves are faster on CPU and under torch.compile.
PAIRS = "halves"


def modulus_pairs(x: Tensor) -> Tensor:
    """Every complex pair of ``x`` (layout :data:`PAIRS`) replaced by its modulus: (λ, 0).

    This is ``x`` with its semantic phases removed (eq. 1-2 of Shao et al. 2025 with θ = 0);
    rotating it keeps only the positional phase.

    Args:
        x: (..., T, D) real tensor, D even.

    Returns:
        A tensor of the shape and dtype of ``x``.
    """
    re, im = split_pairs(x, phase_dtype(x), PAIRS)  # (..., T, J) each
    lam = torch.hypot(re, im)
    return join_pairs(lam, torch.zeros_like(lam), PAIRS).to(x.dtype)


class PositionalScheme:
    """A positional scheme: its parameters, q/k rotation, score bias, embedding, analysis.

    Subclass it and override what the scheme uses; register an instance with
    :func:`~complexformer.attention.register_scheme`. Attention layers call
    :meth:`init_attention`, :meth:`rotate` (or :meth:`rotate_with_phases`) and
    :meth:`score_bias`; the model calls :meth:`init_model`, :meth:`embed` and
    :meth:`max_length`; configs call :meth:`validate`; the head analysis calls
    :meth:`score_variants`.

    Class attributes (set them on a subclass or per instance):
        name: the registered name (``GPTConfig.pos_scheme``).
        description: one line for help texts.
        rotates: :meth:`rotate` rotates the complex pairs (layout :data:`PAIRS`) of queries
            and keys by position-dependent angles; the head dimension must then be even.
        biases: :meth:`score_bias` returns a bias (otherwise it is never called).
        embeds_tokens: :meth:`embed` adds an absolute position embedding to the tokens.
        has_phases: :meth:`rotate_with_phases` returns per-head phases for the phase
            contrastive loss (``pcl=True`` needs it).
        adapt: for schemes with the adaptation δ, b of eq. 7: ``"head"`` (per head),
            ``"shared"`` (one vector per layer) or ``"fixed"`` (frozen); None otherwise.

    Args:
        name: overrides the class attribute ``name``.
        description: overrides the class attribute ``description``.
    """

    name: str = ""
    description: str = ""
    rotates: bool = False
    biases: bool = False
    embeds_tokens: bool = False
    has_phases: bool = False
    adapt: str | None = None

    def __init__(self, name: str | None = None, description: str | None = None) -> None:
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a positional scheme needs a non-empty name, got {self.name!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -------------------------------------------------------------------- validation
    def validate(self, *, head_dim: int, pcl: bool = False) -> None:
        """Check that the scheme can run with this head dimension and PCL setting.

        Called by ``GPTConfig`` and by ``CausalSelfAttention``.

        Args:
            head_dim: D = d_model / n_head.
            pcl: whether the phase contrastive loss is on.

        Raises:
            ValueError: an odd head dimension for a rotation, or PCL without phases.
        """
        if self.rotates and head_dim % 2:
            raise ValueError(
                f"head dimension d_model / n_head = {head_dim} must be even for "
                f"pos_scheme {self.name!r}"
            )
        if pcl and not self.has_phases:
            raise ValueError(
                f"pcl=True needs a cmha scheme (one whose attention has phases), got "
                f"pos_scheme {self.name!r}"
            )

    # --------------------------------------------------------------- attention layer
    def init_attention(
        self,
        attn: nn.Module,
        *,
        n_head: int,
        head_dim: int,
        omega_schedule: str = "rope",
        rope_base: float = 10000.0,
        delta_init_std: float = 0.02,
        delta_init: str = "paper",
    ) -> None:
        """Register the parameters and buffers the scheme owns on an attention layer.

        Args:
            attn: the attention layer (``CausalSelfAttention``).
            n_head: H.
            head_dim: D.
            omega_schedule: rotation frequency schedule (rotation schemes).
            rope_base: rotation frequency base (rotation schemes).
            delta_init_std: std σ of the δ initialisation (adaptive schemes).
            delta_init: ``"paper"`` (δ ~ N(0, σ²)) or ``"rope"`` (δ = 1 + N(0, σ²)).
        """

    def rotate(self, attn: nn.Module, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """Queries and keys at absolute positions ``offset .. offset + T - 1``.

        Keys are cached after this call (``LayerKVCache``), so a scheme whose rotation is
        relative (RoPE, CMHA) gives KV-cache decoding equal to full recomputation.

        Args:
            attn: the attention layer (its parameters and buffers are used).
            q: (B, H, T, D) queries.
            k: (B, H, T, D) keys of the same positions.
            offset: position of the first of the T positions (the cache length).

        Returns:
            (q, k), each (B, H, T, D), same dtype.
        """
        return q, k

    def rotate_qk(self, attn: nn.Module, qk: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """:meth:`rotate` of queries and keys given together as one (2, B, H, T, D) tensor
        (views of the layer's qkv projection); a scheme that rotates both alike overrides it
        to do so in one pass (RoPE), the others rotate ``qk[0]`` and ``qk[1]``."""
        return self.rotate(attn, qk[0], qk[1], offset)

    def rotate_with_phases(
        self, attn: nn.Module, q: Tensor, k: Tensor, offset: int, target: str = "rotated"
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None]:
        """:meth:`rotate`, also returning the (B, H, T, J) phases of q and k for the PCL.

        The default has no phases (None); schemes with :attr:`has_phases` override it.

        Args:
            attn, q, k, offset: as for :meth:`rotate`.
            target: which phases to return: ``"theta"`` (the semantic phases θ of eq. 2,
                before the adaptation and the position term) or ``"rotated"`` (the phases
                after the rotation).
        """
        q, k = self.rotate(attn, q, k, offset)
        return q, k, None

    def score_bias(self, attn: nn.Module, t_q: int, t_k: int, offset: int) -> Tensor | None:
        """Additive score bias (H, Tq, Tk) or None.

        Args:
            attn: the attention layer.
            t_q: number of queries, at positions ``offset .. offset + t_q - 1``.
            t_k: number of keys, at positions ``0 .. t_k - 1``.
            offset: position of the first query.
        """
        return None

    def adaptation(self, attn: nn.Module) -> tuple[Tensor, Tensor] | None:
        """The layer's adaptation (δ, b) of eq. 7 ((H, J) or (J,) each), or None."""
        return None

    # ------------------------------------------------------------------------- model
    def init_model(self, model: nn.Module, config: Any) -> None:
        """Create the parameters the scheme owns on the model (e.g. a position table).

        Called right after the token embedding ``wte`` is created (parameter creation order
        and names are part of the checkpoint format and of the seeded initialisation).

        Args:
            model: the language model.
            config: its config (``GPTConfig``: ``d_model``, ``max_seq_len``, ...).
        """

    def embed(self, model: nn.Module, x: Tensor, offset: int) -> Tensor:
        """Token embeddings (B, T, C) of positions ``offset ..`` with positions mixed in."""
        return x

    def max_length(self, config: Any) -> int | None:
        """The longest sequence (prompt plus generated tokens) the scheme can run, or None."""
        return None

    # ---------------------------------------------------------------- head analysis
    @property
    def score_terms(self) -> tuple[str, ...]:
        """The terms of the attention score that :meth:`score_variants` can separate.

        ``"semantic"`` (the content term q·k or its phase difference), ``"positional"``
        (the rotation's position phase) and ``"bias"`` (an additive position bias). Empty
        when positions are mixed into the hidden states (absolute embeddings): the score
        then has no positional term of its own.
        """
        if self.embeds_tokens:
            return ()
        return ("semantic",) + ("positional",) * self.rotates + ("bias",) * self.biases

    def score_variants(self, attn: nn.Module, q: Tensor, k: Tensor) -> dict[str, Tensor | None]:
        """The head's scores and their two ablations, unmasked, for positions 0 .. T − 1.

        The default works for any scheme built from :meth:`rotate` and :meth:`score_bias`:
        S = rotate(q)·rotate(k)/√D + bias; the semantic ablation S_pos replaces every pair
        of q and k by its modulus before the rotation (:func:`modulus_pairs`; without a
        rotation it is the bias alone, or 0); the positional ablation S_sem = q·k/√D drops
        the rotation and the bias. With no :attr:`score_terms` the ablations are None.

        Args:
            attn: the attention layer.
            q: (B, H, T, D) queries before any rotation (``attn.project_qkv``).
            k: (B, H, T, D) keys.

        Returns:
            ``{"full": S, "no_semantic": S_pos, "no_position": S_sem}``, each (B, H, T, T)
            in the dtype of q, or None for an ablation the scheme cannot make.
        """
        scale = 1.0 / math.sqrt(q.shape[-1])
        t = q.shape[-2]

        def dot(a: Tensor, b: Tensor) -> Tensor:
            return (a @ b.transpose(-1, -2)) * scale

        qk = dot(q, k)  # (B, H, T, T)
        full = dot(*self.rotate(attn, q, k, 0)) if self.rotates else qk
        bias = self.score_bias(attn, t, t, 0) if self.biases else None
        if bias is not None:
            bias = bias.to(qk.dtype).expand_as(qk)  # (B, H, T, T)
            full = full + bias
        if not self.score_terms:
            return {"full": full, "no_semantic": None, "no_position": None}
        if self.rotates:
            no_semantic = dot(*self.rotate(attn, modulus_pairs(q), modulus_pairs(k), 0))
            if bias is not None:
                no_semantic = no_semantic + bias
        else:
            no_semantic = bias if bias is not None else torch.zeros_like(qk)
        return {"full": full, "no_semantic": no_semantic, "no_position": qk}

    # ------------------------------------------------------------------------ texts
    def describe_adaptation(self, n_head: int, head_dim: int) -> str | None:
        """How many learned adaptation values a layer has, in words (for ``info``), or None."""
        return None
