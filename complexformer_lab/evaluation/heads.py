"""Per-head analysis of CMHA: adaptation parameters, semantic vs positional scores, attention.

ComplexFormer (Shao et al. 2025) gives every head i its own adaptation of the semantic phase
difference, Adapt_i(AS) = δ_i ⊙ AS + b_i (eq. 7, with AS_mn = θq_m − θk_n, eq. 5), added to
the relative-position phase ΔP_mn = (m − n)·ω (eq. 6) inside the score

    S_mn = (1/√D) Σ_j λq_mj λk_nj cos(δ_j AS_mn,j + b_j + ΔP_mn,j)          (eq. 8)

This suite reports, for a trained run:

1. **Adaptation statistics** per layer and head: mean, std (population), mean |·|, min, max
   of δ_i and b_i over the J pairs, and the fraction of pairs with |δ| (|b|) above a
   threshold (``cmha``, ``cmha_shared`` — one vector per layer shown for every head — and
   ``cmha_fixed``; not applicable to the other schemes).
2. **Semantic share** of every head on real token blocks. Two ablated scores are computed
   next to the model's S: S_pos = S with the semantic phase removed (δ = 0: the phase is
   b + ΔP, the moduli λ are kept) and S_sem = S with the positional phase removed (ω = 0:
   the phase is δ ⊙ AS + b). Scores are compared after centring every query row over its
   causal keys (softmax ignores a per-row shift). With N(X) = Σ_blocks Σ_m Σ_{n ≤ m}
   (X_mn − mean_{n' ≤ m} X_mn')²:

       semantic_share = N(S − S_pos) / (N(S − S_pos) + N(S − S_sem))

   the share of the change to the head's scores that comes from deleting the semantic term,
   out of the changes from deleting either term: 0 when the semantic term does nothing
   (δ = 0 gives S = S_pos), 1 when the positional term does nothing (ω = 0 gives S = S_sem).
   Also reported: the normalised distances rel_l2_x = sqrt(N(S − S_x) / N(S)) and the mean
   row KL divergences KL(softmax S || softmax S_x) over rows with at least two keys. RoPE is
   the case δ = 1, b = 0; ALiBi's score is q·k/√D + bias, whose terms are removed
   directly; NoPE has no positional term (share 1); for ``learned`` and ``sinusoidal``
   positions are mixed into the hidden states and the measure is not defined (None). The
   positional scheme object computes S, S_pos and S_sem
   (:meth:`~complexformer.attention.schemes.PositionalScheme.score_variants`), so a newly
   registered scheme is analysed too.
3. **Attention maps**: the causal attention probabilities softmax(S) of every head for a
   prompt, as a grid of images, plus per-head mean attention distance and entropy on the
   data blocks.

Definitions and a measured example: ``docs/evaluation_positions.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from complexformer.attention.functional import causal_mask
from complexformer.attention.module import CausalSelfAttention
from complexformer.cli.options import int_list
from complexformer.config import ConfigBase
from complexformer.data import load_corpus, load_token_splits
from complexformer.evaluation.suite import (
    BATCH_SIZE,
    DATA,
    SEED,
    SPLIT,
    Suite,
    data_spec,
    option,
    shared,
)
from complexformer.runtime import eval_mode
from complexformer.storage import atomic_write

from .heads_report import (
    MEASURE_LABELS,
    MEASURES,
    STAT_NAMES,
    heads_markdown,
    plot_attention,
    plot_grids,
)

__all__ = [
    "STAT_NAMES",
    "HeadsConfig",
    "adaptation_stats",
    "attention_inputs",
    "attention_probabilities",
    "head_score_measures",
    "run_heads_suite",
    "score_variants",
]


_SPLITS = ("train", "val", "test")


@dataclass
class HeadsConfig(ConfigBase):
    """Settings of the heads suite.

    Attributes:
        data: corpus spec for the real token blocks; None: the run's training data spec.
        split: ``"val"`` (default), ``"test"`` or ``"train"``.
        num_blocks: number of token blocks for the score measures (drawn without replacement
            from the non-overlapping blocks of the split, with ``seed``).
        block_len: tokens per block; None: the run's ``max_seq_len``.
        batch_size: blocks per forward pass.
        prompt: text whose attention maps are drawn; None: the start of the first block.
        max_prompt_tokens: the prompt is cut to this many tokens (and to ``max_seq_len``).
        layers: layers drawn in ``attention_maps.png``; None: all.
        delta_threshold: τ_δ of the statistic "fraction of pairs with |δ| > τ_δ".
        bias_threshold: τ_b of the statistic "fraction of pairs with |b| > τ_b".
        device: where to run the model when the run is loaded from a path.
        seed: chooses the blocks.
        show_progress: tqdm progress bars.
    """

    data: str | None = None
    split: str = "val"
    num_blocks: int = 8
    block_len: int | None = None
    batch_size: int = 2
    prompt: str | None = None
    max_prompt_tokens: int = 48
    layers: tuple[int, ...] | None = None
    delta_threshold: float = 0.1
    bias_threshold: float = 0.1
    device: str = "cpu"
    seed: int = 0
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.split not in _SPLITS:
            raise ValueError(f"split must be one of {', '.join(_SPLITS)}, got {self.split!r}")
        for name in ("num_blocks", "batch_size", "max_prompt_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.block_len is not None and (
            not isinstance(self.block_len, int) or self.block_len < 2
        ):
            raise ValueError(f"block_len must be an integer >= 2 or None, got {self.block_len!r}")
        if self.layers is not None:
            self.layers = tuple(int(x) for x in self.layers)
        for name in ("delta_threshold", "bias_threshold"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


# ----------------------------------------------------------------------------- parameters
def _stats(x: Tensor, threshold: float) -> dict[str, Tensor]:
    """Statistics over the last dimension (J) of x (..., J), float64."""
    x = x.detach().double()
    return {
        "mean": x.mean(-1),
        "std": x.std(-1, correction=0),
        "mean_abs": x.abs().mean(-1),
        "min": x.amin(-1),
        "max": x.amax(-1),
        "frac_abs_gt": (x.abs() > threshold).double().mean(-1),
    }


def adaptation_stats(
    model: nn.Module, delta_threshold: float = 0.1, bias_threshold: float = 0.1
) -> dict[str, Any] | None:
    """Per-layer, per-head statistics of the CMHA adaptation parameters δ_i and b_i (eq. 7).

    For every layer ℓ and head i the J values of δ_i (and of b_i) give: ``mean``, ``std``
    (population, ddof 0), ``mean_abs``, ``min``, ``max`` and ``frac_abs_gt`` (fraction of
    the J pairs with |δ| > ``delta_threshold``, resp. |b| > ``bias_threshold``).
    ``cmha_shared`` has one (J,) vector per layer: every head shows the same values.

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM`.
        delta_threshold: τ_δ.
        bias_threshold: τ_b.

    Returns:
        None for schemes without δ, b (rope, learned, ...), else ``{"scheme", "shared",
        "fixed", "delta": {stat: (n_layer, n_head) nested list}, "bias": {...}}``.
    """
    blocks = list(model.blocks)
    scheme = blocks[0].attn.scheme
    if scheme.adaptation(blocks[0].attn) is None:
        return None
    out: dict[str, Any] = {
        "scheme": scheme.name,
        "shared": scheme.adapt == "shared",
        "fixed": scheme.adapt == "fixed",
        "delta_threshold": delta_threshold,
        "bias_threshold": bias_threshold,
    }
    for which, key, thr in ((0, "delta", delta_threshold), (1, "bias", bias_threshold)):
        per_layer = []
        for b in blocks:
            p = scheme.adaptation(b.attn)[which]
            per_layer.append(p.expand(b.attn.n_head, p.shape[-1]))  # (H, J)
        stats = _stats(torch.stack(per_layer), thr)  # each (L, H)
        out[key] = {k: v.tolist() for k, v in stats.items()}
    return out


# ---------------------------------------------------------------------------- the scores
def score_variants(attn: CausalSelfAttention, q: Tensor, k: Tensor) -> dict[str, Tensor | None]:
    """The head scores of eq. 8 and their two ablations, unmasked, for positions 0 .. T − 1.

    Args:
        attn: the attention module; its positional scheme computes the scores
            (:meth:`~complexformer.attention.schemes.PositionalScheme.score_variants`).
        q: (B, H, T, D) queries from :meth:`CausalSelfAttention.project_qkv`.
        k: (B, H, T, D) keys.

    Returns:
        ``{"full": S, "no_semantic": S_pos, "no_position": S_sem}``, each (B, H, T, T) in
        the dtype of q (the ablations are None for ``learned`` and ``sinusoidal``). For CMHA
        S uses δ ⊙ AS + b + ΔP, S_pos uses δ = 0 (phase b + ΔP) and S_sem uses ω = 0 (phase
        δ ⊙ AS + b); RoPE is δ = 1, b = 0; for ALiBi S_pos is the distance bias alone and
        S_sem = q·k/√D; for NoPE S_pos = 0 and S_sem = S.
    """
    return attn.scheme.score_variants(attn, q, k)


def _masked_softmax(s: Tensor, mask: Tensor) -> Tensor:
    return torch.log_softmax(s.masked_fill(~mask, float("-inf")), dim=-1)


@torch.no_grad()
def attention_inputs(model: nn.Module, ids: Tensor) -> list[Tensor]:
    """The input of every layer's attention module for ``model(ids)`` (forward pre-hooks).

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM`.
        ids: (B, T) token ids.

    Returns:
        One (B, T, d_model) tensor per layer (after ``ln1`` for pre-norm blocks).
    """
    captured: list[Tensor | None] = [None] * len(model.blocks)
    hooks = []
    for i, block in enumerate(model.blocks):

        def hook(_module, args, i=i):
            captured[i] = args[0].detach()

        hooks.append(block.attn.register_forward_pre_hook(hook))
    try:
        with eval_mode(model):
            model(ids)
    finally:
        for h in hooks:
            h.remove()
    return captured  # type: ignore[return-value]


@torch.no_grad()
def attention_probabilities(
    model: nn.Module, ids: Tensor, layers: Sequence[int] | None = None
) -> dict[int, Tensor]:
    """Causal attention probabilities softmax(S) (eq. 8-9) of every head for ``ids``.

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM`.
        ids: (B, T) token ids (T <= max_seq_len for ``learned``).
        layers: the layers to return (default all).

    Returns:
        ``{layer: (B, H, T, T)}``; rows sum to 1, entries above the diagonal are 0.
    """
    n = len(model.blocks)
    layers = list(range(n)) if layers is None else [int(x) for x in layers]
    for x in layers:
        if not 0 <= x < n:
            raise ValueError(f"layer {x} out of range: the model has {n} layers (0 .. {n - 1})")
    xs = attention_inputs(model, ids)
    t = ids.shape[1]
    mask = causal_mask(t, t, device=ids.device)
    out = {}
    for layer in layers:
        attn = model.blocks[layer].attn
        q, k, _ = attn.project_qkv(xs[layer])
        out[layer] = _masked_softmax(score_variants(attn, q, k)["full"], mask).exp()
    return out


@torch.no_grad()
def head_score_measures(
    model: nn.Module, blocks: Tensor, batch_size: int = 2, show_progress: bool = False
) -> dict[str, list[list[float | None]]]:
    """Semantic share, ablation distances and attention statistics per layer and head.

    With S, S_pos (δ = 0) and S_sem (ω = 0) from :func:`score_variants`, the causal mask
    n ≤ m, row centring X̃_mn = X_mn − mean_{n' ≤ m} X_mn' and N(X) = Σ_blocks Σ_{n ≤ m} X̃²
    (sums over all blocks):

    * ``semantic_share`` = N(S − S_pos) / (N(S − S_pos) + N(S − S_sem)) (None if 0/0);
    * ``rel_l2_no_semantic`` = sqrt(N(S − S_pos) / N(S)), ``rel_l2_no_position`` likewise;
    * ``kl_no_semantic`` = mean over rows m ≥ 1 of KL(softmax S_m || softmax S_pos,m),
      ``kl_no_position`` likewise (nats);
    * ``attention_distance`` = mean over rows m ≥ 1 of Σ_n P_mn (m − n), P = softmax S;
    * ``attention_entropy`` = mean over rows m ≥ 1 of −Σ_n P_mn log P_mn (nats).

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM`.
        blocks: (N, T) token ids.
        batch_size: blocks per forward pass.
        show_progress: a tqdm bar over the blocks.

    Returns:
        ``{measure: (n_layer, n_head) nested list}``; the ablation measures are None for
        ``learned`` and ``sinusoidal``.
    """

    n_layer = len(model.blocks)
    n_head = model.blocks[0].attn.n_head
    t = blocks.shape[1]
    dev = blocks.device
    mask = causal_mask(t, t, device=dev)
    counts = mask.sum(-1, keepdim=True)  # (T, 1) keys per query
    dist = torch.arange(t, device=dev)[:, None] - torch.arange(t, device=dev)[None, :]
    sums = {
        k: torch.zeros(n_layer, n_head, dtype=torch.float64)
        for k in ("n_full", "n_pos", "n_sem", "kl_pos", "kl_sem", "dist", "ent")
    }
    rows = 0
    decomposable = True

    def centred_sq(x: Tensor) -> Tensor:  # (B, H, T, T) -> (H,), accumulated in float64
        x = x.masked_fill(~mask, 0.0)
        x = (x - x.sum(-1, keepdim=True) / counts).masked_fill_(~mask, 0.0)
        return x.square_().sum((0, 2, 3), dtype=torch.float64).cpu()

    def row_sum(x: Tensor) -> Tensor:  # (B, H, T, T) -> (H,), rows m >= 1
        x = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
        return x.sum(-1)[..., 1:].sum((0, 2), dtype=torch.float64).cpu()

    bar = tqdm(
        total=len(blocks),
        desc="heads: score measures",
        unit="block",
        disable=not show_progress,
        leave=False,
    )
    try:
        for i in range(0, len(blocks), batch_size):
            ids = blocks[i : i + batch_size]
            xs = attention_inputs(model, ids)
            rows += ids.shape[0] * (t - 1)
            for layer, x in enumerate(xs):
                attn = model.blocks[layer].attn
                q, k, _ = attn.project_qkv(x)
                sv = score_variants(attn, q, k)
                s = sv["full"]
                lp = _masked_softmax(s, mask)
                p = lp.exp()
                sums["dist"][layer] += row_sum(p * dist)
                sums["ent"][layer] += row_sum(-p * lp)
                if sv["no_semantic"] is None:
                    decomposable = False
                    continue
                sums["n_full"][layer] += centred_sq(s)
                for key, other in (("pos", sv["no_semantic"]), ("sem", sv["no_position"])):
                    sums[f"n_{key}"][layer] += centred_sq(s - other)
                    sums[f"kl_{key}"][layer] += row_sum(p * (lp - _masked_softmax(other, mask)))
            bar.update(ids.shape[0])
    finally:
        bar.close()

    def grid(x: Tensor | None) -> list[list[float | None]]:
        if x is None:
            return [[None] * n_head for _ in range(n_layer)]
        return [[None if not math.isfinite(v) else v for v in r] for r in x.tolist()]

    def ratio(a: Tensor, b: Tensor) -> Tensor:
        return torch.where(b > 0, a / b.clamp_min(1e-300), torch.full_like(a, float("nan")))

    rows = max(rows, 1)
    out = {
        "attention_distance": grid(sums["dist"] / rows),
        "attention_entropy": grid(sums["ent"] / rows),
    }
    if decomposable:
        out["semantic_share"] = grid(ratio(sums["n_pos"], sums["n_pos"] + sums["n_sem"]))
        out["rel_l2_no_semantic"] = grid(ratio(sums["n_pos"], sums["n_full"]).sqrt())
        out["rel_l2_no_position"] = grid(ratio(sums["n_sem"], sums["n_full"]).sqrt())
        out["kl_no_semantic"] = grid(sums["kl_pos"] / rows)
        out["kl_no_position"] = grid(sums["kl_sem"] / rows)
    else:
        for key in MEASURES[:5]:
            out[key] = grid(None)
    return {k: out[k] for k in MEASURES}


# ------------------------------------------------------------------------------- plots
def _pick_blocks(tokens: np.ndarray, block_len: int, num_blocks: int, seed: int) -> np.ndarray:
    n_avail = len(tokens) // block_len
    if n_avail == 0:
        raise ValueError(
            f"the split has {len(tokens)} tokens, fewer than one block of {block_len}; "
            "choose a smaller block_len or another split"
        )
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n_avail, size=min(num_blocks, n_avail), replace=False))
    return idx.astype(np.int64) * block_len


def run_heads_suite(
    run: Any, config: HeadsConfig | None = None, out_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Per-head analysis of a run: δ/b statistics, semantic share, attention maps.

    For each layer and head: statistics of δ_i and b_i of Adapt_i(AS) = δ_i ⊙ AS + b_i
    (eq. 7); on real token blocks, how much the score of eq. 8 depends on the semantic phase
    difference AS (eq. 5) versus the relative position ΔP (eq. 6) — see
    :func:`head_score_measures`; and the attention probabilities softmax(S) for a prompt.

    Args:
        run: a run / checkpoint / model directory or a
            :class:`~complexformer.lm.LoadedRun`.
        config: a :class:`HeadsConfig` (defaults when None).
        out_dir: where to write ``heads.json``, ``heads.md``, ``heads_delta.png`` and
            ``heads_bias.png`` (CMHA schemes only), ``heads_semantic_share.png``,
            ``attention_maps.png`` and ``attention_maps.npz``; None: write nothing.

    Returns:
        The payload of ``heads.json``: ``suite``, ``run``, ``config``, ``data``,
        ``adaptation`` (None for non-CMHA schemes), ``scores`` (per measure an
        (n_layer, n_head) nested list), ``attention_maps`` (prompt ids, tokens, layers) and
        ``files``.

    Raises:
        ValueError: no data spec (bare model directory and ``config.data`` None), a split
            shorter than one block, an empty prompt or a layer out of range.
    """

    return HeadsSuite(config).run(run, out_dir)


class HeadsSuite(Suite):
    """The per-head analysis (see :func:`run_heads_suite`)."""

    name = "heads"
    position = 50
    description = "CMHA's delta and b per head, semantic vs positional share, attention maps"
    config_class = HeadsConfig
    options = (
        DATA,
        SPLIT,
        option("--num-blocks", metavar="N"),
        shared("prompt"),
        option("--layers", type=int_list, metavar="L"),
        SEED,
        BATCH_SIZE,
    )
    lists_files = True

    def load_data(self, run) -> tuple[str, np.ndarray, np.ndarray, int]:
        """(data spec, the split's tokens, block starts, block length)."""
        config, model = self.config, run.model
        mcfg = model.config
        spec = data_spec(config.data, run, "HeadsConfig.data")
        if run.tokenizer is None:
            raise ValueError("the run has no tokenizer")
        torch.manual_seed(config.seed)
        tokens = load_token_splits(
            load_corpus(spec),
            run.tokenizer,
            splits=(config.split,),
            show_progress=config.show_progress,
        )[config.split]
        block_len = config.block_len or int(mcfg.max_seq_len)
        limit = model.scheme.max_length(mcfg)  # e.g. learned positions: max_seq_len
        if limit is not None:
            block_len = min(block_len, limit)
        starts = _pick_blocks(tokens, block_len, config.num_blocks, config.seed)
        return spec, tokens, starts, block_len

    def compute(self, run, data) -> dict[str, Any]:
        config, model = self.config, run.model
        spec, tokens, starts, block_len = data
        path = str(run.run_dir) if getattr(run, "run_dir", None) is not None else None
        mcfg = model.config
        device = next(model.parameters()).device
        n_layer, n_head = len(model.blocks), model.blocks[0].attn.n_head
        layers = list(range(n_layer)) if config.layers is None else list(config.layers)
        for x in layers:
            if not 0 <= x < n_layer:
                raise ValueError(f"layer {x} out of range: the model has {n_layer} layers")
        idx = starts[:, None] + np.arange(block_len)[None, :]
        blocks = torch.as_tensor(np.asarray(tokens[idx], dtype=np.int64), device=device)
        with eval_mode(model):
            scores = head_score_measures(model, blocks, config.batch_size, config.show_progress)
            max_prompt = min(config.max_prompt_tokens, int(mcfg.max_seq_len))
            if config.prompt is not None:
                ids = run.tokenizer.encode(config.prompt)[:max_prompt]
                if not ids:
                    raise ValueError("the prompt encodes to no tokens")
                source = "prompt"
            else:
                ids = blocks[0, :max_prompt].tolist()
                source = f"data block at token {int(starts[0])}"
            ids_t = torch.tensor([ids], dtype=torch.long, device=device)
            self._probs = attention_probabilities(model, ids_t, layers)
        labels = [run.tokenizer.decode([i]) for i in ids]
        attn0 = model.blocks[0].attn
        return {
            "run": {
                "path": path,
                "pos_scheme": mcfg.pos_scheme,
                "step": getattr(run, "step", None),
                "n_layer": n_layer,
                "n_head": n_head,
                "head_dim": attn0.head_dim,
                "max_seq_len": int(mcfg.max_seq_len),
            },
            "data": {
                "spec": spec,
                "split": config.split,
                "split_tokens": int(len(tokens)),
                "blocks": int(len(starts)),
                "block_len": block_len,
                "starts": starts.tolist(),
            },
            "adaptation": adaptation_stats(model, config.delta_threshold, config.bias_threshold),
            "scores": scores,
            "attention_maps": {"source": source, "ids": ids, "tokens": labels, "layers": layers},
        }

    def write_files(self, payload: dict[str, Any], out: Path) -> dict[str, str]:
        probs, path = self._probs, payload["run"]["path"]
        adaptation, scores = payload["adaptation"], payload["scores"]
        maps = payload["attention_maps"]
        ids, labels, layers = maps["ids"], maps["tokens"], maps["layers"]
        name = f"{payload['run']['pos_scheme']}" + (f" — {Path(path).name}" if path else "")
        files: dict[str, str] = {}
        if adaptation is not None:
            for key, sym in (("delta", "δ"), ("bias", "b")):
                thr = adaptation[f"{key}_threshold"]
                labels_ = {
                    "mean": f"mean {sym}",
                    "std": f"std {sym}",
                    "mean_abs": f"mean |{sym}|",
                    "min": f"min {sym}",
                    "max": f"max {sym}",
                    "frac_abs_gt": f"fraction |{sym}| > {thr:g}",
                }
                panels = [(labels_[s], adaptation[key][s]) for s in STAT_NAMES]
                f = plot_grids(
                    panels,
                    out / f"heads_{key}.png",
                    f"{name}: adaptation {sym} per layer and head (eq. 7)",
                )
                if f is not None:
                    files[f"{key}_png"] = str(f)
        panels = [(MEASURE_LABELS[k], scores[k]) for k in MEASURES[:6]]
        f = plot_grids(
            panels,
            out / "heads_semantic_share.png",
            f"{name}: semantic (δ·AS + b) vs positional (ΔP) term of the score",
        )
        if f is not None:
            files["semantic_share_png"] = str(f)
        f = plot_attention(probs, labels, out / "attention_maps.png", f"{name}: attention")
        if f is not None:
            files["attention_png"] = str(f)
        with atomic_write(out / "attention_maps.npz", "wb") as fh:
            np.savez(
                fh,
                ids=np.asarray(ids, dtype=np.int64),
                layers=np.asarray(layers),
                probs=np.stack([probs[x][0].float().cpu().numpy() for x in layers]),
            )
        files["attention_npz"] = str(out / "attention_maps.npz")
        return files

    def markdown(self, payload: dict[str, Any]) -> str:
        return heads_markdown(payload)
