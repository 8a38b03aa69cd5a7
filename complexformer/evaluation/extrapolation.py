"""Length extrapolation: perplexity against the evaluation context length.

A model trained on blocks of T = ``max_seq_len`` tokens is scored at lengths L = m·T for a set
of multipliers m (default 1, 2, 4, 8, 16), for one or several runs (typically one per
positional scheme: CMHA, its shared/fixed variants, RoPE, ALiBi, NoPE, learned, sinusoidal).
CMHA (Shao et al. 2025) puts the relative position only in the phase term ΔP_mn = (m − n)·ω
of the score (eq. 6 and 8), next to the adapted semantic phase δ ⊙ AS + b (eq. 5 and 7), so
like RoPE it runs at any length; how well it *extrapolates* is what this suite measures.

Protocols (see ``docs/evaluation_positions.md``):

* ``"blocks"`` (default, the standard one): the first P + 1 tokens of the split (P =
  ``max_tokens``, or fewer when the split is shorter) are cut, for each length L, into
  consecutive blocks of L tokens that overlap by one token (they start every L − 1 tokens,
  the convention of :func:`~complexformer.training.evaluate_perplexity`); each block is fed
  whole and its L − 1 next-token predictions are scored; a last, shorter block covers the
  remaining targets. Every length therefore scores exactly the same P target tokens (tokens
  1 .. P) and the mean NLL over them is comparable across lengths. At m = 1 it is exactly
  ``evaluate_perplexity(model, tokens[:P + 1], T - 1)`` when T − 1 divides P.
* ``"last_window"`` (isolates extrapolation): windows end at e_i = (i + 1)·L_max (L_max the
  longest length, i < max_tokens // L_max); for each length L the model reads
  tokens[e_i − L : e_i] and only the last T − 1 predictions (the targets e_i − T + 1 ..
  e_i − 1) are scored. The scored tokens are the same at every length; only the context in
  front of them grows.

``learned`` positions cannot run beyond T: those lengths are reported as ``None`` with a
reason, not an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ..attention.registry import scheme_max_length
from ..cli.options import int_list
from ..config import ConfigBase
from ..data import load_corpus, load_token_splits
from ..results import markdown_table
from ..runtime import eval_mode
from ..storage import atomic_output
from .suite import (
    BATCH_SIZE,
    DATA,
    SEED,
    SPLIT,
    Suite,
    data_spec,
    fmt_number,
    option,
    register_suite,
)

__all__ = [
    "PROTOCOLS",
    "ExtrapolationConfig",
    "extrapolation_curve",
    "plot_extrapolation",
    "run_extrapolation_suite",
    "score_blocks",
    "score_last_windows",
]

PROTOCOLS = ("blocks", "last_window")
_SPLITS = ("train", "val", "test")


@dataclass
class ExtrapolationConfig(ConfigBase):
    """Settings of the extrapolation suite.

    Attributes:
        data: corpus spec (``stdlib``, ``text:GLOB``, ``hf:NAME``); None: each run's own
            training data spec (``run.train_config.data``).
        split: the split to score, ``"val"`` (default), ``"test"`` or ``"train"``.
        multipliers: evaluation lengths as multiples of each run's T = ``max_seq_len``;
            positive integers, evaluated in increasing order.
        max_tokens: token budget P per length: the number of scored target tokens for
            ``"blocks"`` (the same P at every length); for ``"last_window"`` the stream of
            P tokens holds P // L_max windows.
        batch_size: blocks of length T per forward pass; at length m·T the batch holds
            ``max(1, batch_size // m)`` blocks, so the tokens per pass stay about constant.
        protocol: ``"blocks"``, the same tokens cut into blocks of each length (standard), or
            ``"last_window"``, the same final T-1 tokens scored with a growing context.
        device: where to run the models (``"cpu"``, ``"cuda"``, ...).
        seed: seeds torch and numpy before each run (the protocols themselves are
            deterministic: they read the split from its start).
        show_progress: tqdm progress bars.
    """

    data: str | None = None
    split: str = "val"
    multipliers: tuple[int, ...] = (1, 2, 4, 8, 16)
    max_tokens: int = 16384
    batch_size: int = 8
    protocol: str = "blocks"
    device: str = "cpu"
    seed: int = 0
    show_progress: bool = True

    def __post_init__(self) -> None:
        mults = tuple(self.multipliers)
        if not mults:
            raise ValueError("multipliers must not be empty")
        for m in mults:
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
                raise ValueError(f"multipliers must be positive integers, got {m!r}")
        self.multipliers = tuple(sorted({int(m) for m in mults}))
        if self.split not in _SPLITS:
            raise ValueError(f"split must be one of {', '.join(_SPLITS)}, got {self.split!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}"
            )
        for name in ("max_tokens", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")


def _nll_sum(model: nn.Module, batch: torch.Tensor, first: int) -> tuple[float, int]:
    """Summed next-token NLL of the predictions at positions >= ``first`` of ``batch``."""
    logits = model(batch).logits  # (b, L, V)
    pred = logits[:, first:-1]
    targets = batch[:, first + 1 :]
    loss = F.cross_entropy(
        pred.reshape(-1, pred.shape[-1]).float(), targets.reshape(-1), reduction="sum"
    )
    return float(loss.double()), int(targets.numel())


def _result(nll: float, count: int, blocks: int) -> dict[str, Any]:
    loss = nll / count
    return {"loss": loss, "ppl": math.exp(min(loss, 700.0)), "tokens": count, "blocks": blocks}


@torch.no_grad()
def score_blocks(
    model: nn.Module,
    tokens: np.ndarray,
    length: int,
    n_targets: int,
    batch_size: int = 8,
    device: str | torch.device | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Mean NLL of targets 1 .. ``n_targets`` with blocks of ``length`` tokens (``"blocks"``).

    Blocks start every ``length - 1`` tokens (consecutive blocks share one token) and each is
    fed whole to the model; the last block is shorter when ``length - 1`` does not divide
    ``n_targets``. Every token 1 .. n_targets is predicted exactly once, from the tokens of
    its block before it, so the scored set does not depend on ``length``.

    Args:
        model: a causal LM whose ``model(ids).logits`` is (B, L, V).
        tokens: the flat token array; needs at least ``n_targets + 1`` tokens.
        length: block length L (tokens fed per block, >= 2).
        n_targets: number of scored targets P.
        batch_size: full blocks per forward pass.
        device: where to run; default the device of the model's parameters.
        progress: called with the number of target tokens done after each forward pass.

    Returns:
        ``{"loss": mean NLL (nats), "ppl": exp(loss), "tokens": P, "blocks": blocks}``.
    """
    if length < 2:
        raise ValueError(f"length must be >= 2, got {length}")
    if n_targets < 1 or len(tokens) < n_targets + 1:
        raise ValueError(f"need n_targets >= 1 and {n_targets + 1} tokens, got {len(tokens)}")
    if device is None:
        device = next(model.parameters()).device
    step = length - 1
    n_full = n_targets // step
    starts = np.arange(n_full, dtype=np.int64) * step
    nll, count = 0.0, 0
    with eval_mode(model):
        for i in range(0, n_full, batch_size):
            idx = starts[i : i + batch_size, None] + np.arange(length)[None, :]
            batch = torch.as_tensor(np.asarray(tokens[idx], dtype=np.int64), device=device)
            s, c = _nll_sum(model, batch, 0)
            nll, count = nll + s, count + c
            if progress is not None:
                progress(c)
        rest = n_targets - n_full * step
        if rest:
            tail = np.asarray(tokens[n_full * step : n_targets + 1], dtype=np.int64)
            s, c = _nll_sum(model, torch.as_tensor(tail, device=device)[None], 0)
            nll, count = nll + s, count + c
            if progress is not None:
                progress(c)
    return _result(nll, count, n_full + (1 if rest else 0))


@torch.no_grad()
def score_last_windows(
    model: nn.Module,
    tokens: np.ndarray,
    length: int,
    window_ends: Sequence[int],
    n_scored: int,
    batch_size: int = 8,
    device: str | torch.device | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Mean NLL of the last ``n_scored`` tokens before each window end (``"last_window"``).

    For each end e the model reads tokens[e - length : e] and the predictions of targets
    e - n_scored .. e - 1 are scored; the same targets at every ``length``.

    Args:
        model: a causal LM.
        tokens: the flat token array.
        length: context length L (>= n_scored + 1).
        window_ends: the ends e (each >= length and <= len(tokens)).
        n_scored: scored targets per window (T - 1 in the suite).
        batch_size: windows per forward pass.
        device: where to run.
        progress: called with the number of target tokens done after each forward pass.

    Returns:
        ``{"loss", "ppl", "tokens", "blocks"}`` as :func:`score_blocks`.
    """
    if length < n_scored + 1:
        raise ValueError(f"length {length} must exceed n_scored {n_scored}")
    ends = np.asarray(window_ends, dtype=np.int64)
    if len(ends) == 0 or ends.min() < length or ends.max() > len(tokens):
        raise ValueError(f"window ends must lie in [{length}, {len(tokens)}]")
    if device is None:
        device = next(model.parameters()).device
    nll, count = 0.0, 0
    with eval_mode(model):
        for i in range(0, len(ends), batch_size):
            idx = ends[i : i + batch_size, None] - length + np.arange(length)[None, :]
            batch = torch.as_tensor(np.asarray(tokens[idx], dtype=np.int64), device=device)
            s, c = _nll_sum(model, batch, length - 1 - n_scored)
            nll, count = nll + s, count + c
            if progress is not None:
                progress(c)
    return _result(nll, count, len(ends))


def extrapolation_curve(
    model: nn.Module,
    tokens: np.ndarray,
    multipliers: Sequence[int] = (1, 2, 4, 8, 16),
    max_tokens: int = 16384,
    batch_size: int = 8,
    protocol: str = "blocks",
    device: str | torch.device | None = None,
    show_progress: bool = False,
    desc: str = "extrapolation",
) -> dict[str, Any]:
    """Perplexity of one model at the lengths m·T, T = ``model.config.max_seq_len``.

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM` (``config.max_seq_len`` and
            ``config.pos_scheme`` are read).
        tokens: the flat token array of the split.
        multipliers: positive integers m.
        max_tokens: the budget P (see :class:`ExtrapolationConfig`).
        batch_size: blocks of length T per pass (``max(1, batch_size // m)`` at m·T).
        protocol: ``"blocks"`` or ``"last_window"``.
        device: where to run.
        show_progress: a tqdm bar over the scored tokens of all lengths.
        desc: the bar's label.

    Returns:
        ``{"max_seq_len": T, "scored_tokens": ..., "windows": ... (last_window only),
        "results": [{"multiplier", "length", "loss", "ppl", "tokens", "blocks", "reason"}]}``
        where loss/ppl are None (with a ``reason``) for lengths a ``learned`` model cannot
        run or that the split is too short for.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    cfg = model.config
    t = int(cfg.max_seq_len)
    mults = sorted({int(m) for m in multipliers})
    n_tok = len(tokens)
    out: dict[str, Any] = {"max_seq_len": t}
    if protocol == "blocks":
        p = min(int(max_tokens), n_tok - 1)
        out["scored_tokens"] = max(p, 0)
        per_length = p
        ends: np.ndarray | None = None
    else:
        l_max = mults[-1] * t
        n_win = min(int(max_tokens), n_tok) // l_max
        ends = (np.arange(n_win, dtype=np.int64) + 1) * l_max
        out["windows"] = int(n_win)
        out["scored_tokens"] = int(n_win * (t - 1))
        per_length = out["scored_tokens"]

    plan: list[tuple[int, int, str | None]] = []
    for m in mults:
        length = m * t
        reason = None
        limit = scheme_max_length(cfg)
        if limit is not None and length > limit:
            reason = f"pos_scheme {cfg.pos_scheme!r} cannot run beyond max_seq_len={limit}"
        elif per_length <= 0 or (protocol == "blocks" and per_length + 1 < length):
            reason = f"the split has {n_tok} tokens, too few for one block of {length}"
        plan.append((m, length, reason))

    total = per_length * sum(1 for *_, r in plan if r is None)
    bar = tqdm(total=total, desc=desc, unit="tok", disable=not show_progress, leave=False)
    results = []
    try:
        for m, length, reason in plan:
            row: dict[str, Any] = {"multiplier": m, "length": length}
            if reason is not None:
                row.update(loss=None, ppl=None, tokens=0, blocks=0, reason=reason)
            else:
                bs = max(1, batch_size // m)
                if protocol == "blocks":
                    res = score_blocks(model, tokens, length, per_length, bs, device, bar.update)
                else:
                    res = score_last_windows(
                        model, tokens, length, ends, t - 1, bs, device, bar.update
                    )
                row.update(res, reason=None)
            results.append(row)
    finally:
        bar.close()
    out["results"] = results
    return out


def _unique_names(paths: list[str | None], schemes: list[str]) -> list[str]:
    names = []
    for p, s in zip(paths, schemes, strict=True):
        if p is None:
            names.append(s)
            continue
        pp = Path(p)
        names.append(pp.name if pp.name not in ("run", "model") else f"{pp.parent.name}/{pp.name}")
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if names.count(n) > 1:
            seen[n] = seen.get(n, 0) + 1
            n = f"{n}#{seen[n]}"
        out.append(n)
    return out


def plot_extrapolation(payload: dict[str, Any], out_path: str | os.PathLike) -> Path | None:
    """Perplexity against evaluation length (log2 x axis), one line per run.

    The y axis is logarithmic when the perplexities span more than a factor of 4.

    Uses matplotlib's object-oriented Agg canvas (the global backend is left alone) and
    writes the PNG atomically. Returns the path, or None when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        return None
    fig = Figure(figsize=(7.5, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    train_lengths, lengths, ppls = set(), set(), []
    for r in payload["runs"]:
        pts = [(x["length"], x["ppl"]) for x in r["results"] if x["ppl"] is not None]
        train_lengths.add(r["max_seq_len"])
        label = r["name"] if r["name"] == r["pos_scheme"] else f"{r['name']} ({r['pos_scheme']})"
        if pts:
            ax.plot(*zip(*pts, strict=True), "o-", label=label, linewidth=1.5, markersize=4)
            lengths.update(p[0] for p in pts)
            ppls += [p[1] for p in pts]
    for t in sorted(train_lengths):
        ax.axvline(t, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    if lengths:
        ax.set_xticks(sorted(lengths))
        ax.set_xticklabels([str(x) for x in sorted(lengths)])
    if ppls and max(ppls) / min(ppls) > 4:  # a scheme that blows up: log scale
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("evaluation context length (tokens; dotted: training length T)")
    ax.set_ylabel("perplexity")
    ax.set_title(f"length extrapolation ({payload['protocol']} protocol)")
    ax.grid(True, which="both", alpha=0.3)
    if payload["runs"]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out_path)
    with atomic_output(out) as tmp:
        fig.savefig(tmp, format="png")
    return out


def _markdown(payload: dict[str, Any]) -> str:
    mults = payload["multipliers"]
    cfg = payload["config"]
    heads = ["run", "scheme", "T", *[f"{m}×T" for m in mults]]
    rows, rel_rows = [], []
    for r in payload["runs"]:
        by_m = {x["multiplier"]: x for x in r["results"]}
        ppl = [by_m[m]["ppl"] for m in mults]
        rows.append(
            [r["name"], r["pos_scheme"], r["max_seq_len"], *[fmt_number(p, 2) for p in ppl]]
        )
        base = by_m.get(1, {}).get("ppl")
        rel_rows.append(
            [
                r["name"],
                r["pos_scheme"],
                r["max_seq_len"],
                *[fmt_number(None if p is None or not base else p / base, 3) for p in ppl],
            ]
        )
    align = "llr" + "r" * len(mults)
    if payload["protocol"] == "blocks":
        proto = (
            "Protocol `blocks`: for every length L the same target tokens (the first "
            f"{cfg['max_tokens']:,} of the split, or all of it) are scored, cut into "
            "consecutive blocks of L tokens; mean next-token NLL over all of them."
        )
    else:
        proto = (
            "Protocol `last_window`: the same final T − 1 tokens of each window are scored at "
            "every length; only the context before them grows to L."
        )
    lines = [
        "# Length extrapolation",
        "",
        f"Data `{cfg['data'] or 'each run’s training data'}`, split `{cfg['split']}`. " + proto,
        "`n/a`: the scheme cannot run at that length (`learned` beyond T) or the split is "
        "too short.",
        "",
        "## Perplexity",
        "",
        markdown_table(heads, rows, align),
        "",
        "## Perplexity relative to length T",
        "",
        markdown_table(heads, rel_rows, align),
        "",
        "## Runs",
        "",
        markdown_table(
            ["run", "path", "step", "data", "tokenizer", "scored tokens"],
            [
                [
                    r["name"],
                    r["path"] or "",
                    r["step"] if r["step"] is not None else "",
                    r["data"],
                    r["tokenizer"] or "",
                    f"{r['scored_tokens']:,}",
                ]
                for r in payload["runs"]
            ],
        ),
    ]
    fps = {r["tokenizer"] for r in payload["runs"]}
    if len(fps) > 1:
        lines += [
            "",
            "Note: the runs use different tokenizers, so their per-token perplexities "
            "are not directly comparable across runs (only along each row).",
        ]
    return "\n".join(lines)


def run_extrapolation_suite(
    runs: Sequence[Any],
    config: ExtrapolationConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Perplexity against context length for one or more runs; writes the report files.

    The positional term of CMHA, ΔP_mn,j = (m − n)·ω_j (eq. 6), enters the score
    Score_mn = (1/√D) Σ_j λq λk cos(δ_j AS_mn,j + b_j + ΔP_mn,j) (eq. 5, 7, 8) only through
    the distance m − n, so any length can be evaluated; this suite measures the perplexity
    at L = m·T (T = each run's ``max_seq_len``) under the protocol of ``config``.

    Args:
        runs: run / checkpoint / model directories (loaded one at a time) or
            :class:`~complexformer.lm.LoadedRun` objects.
        config: an :class:`ExtrapolationConfig` (default settings when None).
        out_dir: where to write ``extrapolation.json``, ``extrapolation.md`` and
            ``extrapolation.png``; None: write nothing.
        names: display names of the runs (default: derived from the directories, or the
            scheme name).

    Returns:
        The payload written to ``extrapolation.json``: ``suite``, ``protocol``, ``config``,
        ``multipliers``, ``runs`` (each with ``name``, ``path``, ``pos_scheme``,
        ``max_seq_len``, ``step``, ``data``, ``split``, ``tokenizer``, ``split_tokens``,
        ``scored_tokens`` and ``results`` per multiplier: ``length``, ``loss``, ``ppl``,
        ``tokens``, ``blocks``, ``reason``) and ``files``.

    Raises:
        ValueError: no runs, a name count that does not match, or a run without a data spec
            when ``config.data`` is None.
    """

    return ExtrapolationSuite(config, names=names).run(runs, out_dir)


@register_suite
class ExtrapolationSuite(Suite):
    """The length-extrapolation suite (see :func:`run_extrapolation_suite`)."""

    name = "extrapolation"
    position = 40
    description = "perplexity at multiples of the training length, one curve per --model"
    config_class = ExtrapolationConfig
    options = (
        DATA,
        SPLIT,
        option("--multipliers", type=int_list, metavar="M"),
        option("--max-tokens", metavar="N"),
        BATCH_SIZE,
        option("--protocol", choices=("blocks", "last_window")),
        SEED,
    )
    many_runs = True
    lists_files = True

    def __init__(self, config=None, log=None, *, names: Sequence[str] | None = None) -> None:
        super().__init__(config, log)
        self.names = names

    def compute(self, runs, data) -> dict[str, Any]:
        config, names = self.config, self.names
        if not runs:
            raise ValueError("run_extrapolation_suite needs at least one run")
        if names is not None and len(names) != len(runs):
            raise ValueError(f"{len(names)} names for {len(runs)} runs")
        token_cache: dict[tuple[str, str, str], np.ndarray] = {}
        corpora: dict[str, Any] = {}
        entries = []
        for i, r in enumerate(runs):
            path = None if hasattr(r, "model") else str(getattr(r, "path", r))
            run = self.load(r)
            if path is None and getattr(run, "run_dir", None) is not None:
                path = str(run.run_dir)
            spec = data_spec(config.data, run, "ExtrapolationConfig.data")
            if run.tokenizer is None:
                raise ValueError(f"run {path or i} has no tokenizer")
            fp = run.tokenizer.fingerprint
            key = (spec, config.split, fp)
            if key not in token_cache:
                if spec not in corpora:
                    corpora[spec] = load_corpus(spec)
                token_cache[key] = load_token_splits(
                    corpora[spec],
                    run.tokenizer,
                    splits=(config.split,),
                    show_progress=config.show_progress,
                )[config.split]
            tokens = token_cache[key]
            torch.manual_seed(config.seed)
            np.random.seed(config.seed)
            model = run.model  # a loaded path is on config.device; a LoadedRun stays where it is
            device = next(model.parameters()).device
            label = names[i] if names is not None else model.config.pos_scheme
            curve = extrapolation_curve(
                model,
                tokens,
                config.multipliers,
                config.max_tokens,
                config.batch_size,
                config.protocol,
                device,
                config.show_progress,
                desc=f"extrapolation {label}",
            )
            entries.append(
                {
                    "path": path,
                    "pos_scheme": model.config.pos_scheme,
                    "step": getattr(run, "step", None),
                    "data": spec,
                    "split": config.split,
                    "tokenizer": fp,
                    "split_tokens": int(len(tokens)),
                    **curve,
                }
            )
            del run, model
        run_names = (
            list(names)
            if names is not None
            else _unique_names([e["path"] for e in entries], [e["pos_scheme"] for e in entries])
        )
        return {
            "protocol": config.protocol,
            "multipliers": list(config.multipliers),
            "runs": [{"name": n, **e} for n, e in zip(run_names, entries, strict=True)],
        }

    def write_files(self, payload: dict[str, Any], out: Path) -> dict[str, str]:
        png = plot_extrapolation(payload, out / "extrapolation.png")
        return {} if png is None else {"png": str(png)}

    def markdown(self, payload: dict[str, Any]) -> str:
        return _markdown(payload)
