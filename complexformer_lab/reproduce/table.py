"""Tables of a reproduction: pure functions from per-run result dicts to table payloads.

A *result* is the dict :func:`complexformer_lab.reproduce.runner.evaluate_run` returns for one
(variant, seed): ``variant``, ``seed``, ``params``, ``val_ppl``, ``test_ppl``, ``gen_ppl``,
``dist_1``, ``dist_2``, ``rep_4`` and, for the extrapolation table, ``extrapolation``
(``{"1": ppl, "2": ppl, ...}``, ``None`` where a length cannot be scored). Missing or
``None`` values are left out of the means (and counted in ``n``).

The builders follow the columns of Shao et al., "ComplexFormer: Disruptively Advancing
Transformer Inference Ability via Head-Specific Complex Vector Attention" (2025):

* :func:`build_table1` -- Table 1: Model, Params (M), val ppl, test ppl, gen-PPL ↓, Dist-1 ↑,
  Dist-2 ↑, Rep-4 (×10⁻²) ↓, each as mean ± sample standard deviation over seeds;
* :func:`build_table4` -- Table 4 (ablation): gen-PPL and val ppl with the difference of the
  means from the full model;
* :func:`build_extrapolation_table` -- perplexity at 1, 2, 4, 8 × the training length;

each with :func:`paired_comparison` against RoPE: per seed the difference variant − rope
(same seed, so the same data order and initialisation seed), its mean, and a two-sided
paired t-test (:func:`complexformer.results.paired_t_test`, re-exported here).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from complexformer.results import (
    MIN_PAIRS,
    format_p,
    markdown_table,
    mean_std,
    paired_t_test,
    regularized_incomplete_beta,
    student_t_two_sided_p,
    write_report,
)

from .variants import TABLE4_LABELS, TABLE_TITLES, TABLES, VARIANTS

__all__ = [
    "EXTRAPOLATION_METRIC_PREFIX",
    "Metric",
    "TABLE1_METRICS",
    "build_extrapolation_table",
    "build_table",
    "build_table1",
    "build_table4",
    "format_mean_std",
    "format_p",
    "mean_std",
    "paired_comparison",
    "paired_t_test",
    "regularized_incomplete_beta",
    "student_t_two_sided_p",
    "write_table",
]

EXTRAPOLATION_METRIC_PREFIX = "ppl_x"


# ---------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Metric:
    """A column: how to read it from a result and how to print it.

    Attributes:
        key: the result key (or a name, when ``get`` is given).
        header: the column header.
        digits: decimals printed.
        factor: the value is multiplied by this before printing (Rep-4 × 100).
        lower_is_better: True for perplexities and Rep-4, False for Dist-n, None (no
            direction) for parameter counts.
        get: reads the value from a result (default ``result.get(key)``).
        spread: print ``mean ± std`` (False: the mean alone, for parameter counts).
    """

    key: str
    header: str
    digits: int = 2
    factor: float = 1.0
    lower_is_better: bool | None = True
    get: Callable[[dict[str, Any]], float | None] | None = None
    spread: bool = True

    def cell(self, stats: dict[str, Any]) -> str:
        """The printed cell of ``stats`` (:func:`mean_std` of this metric's values)."""
        if not self.spread:
            stats = {**stats, "std": None}
        return format_mean_std(stats, self.digits, self.factor)

    def value(self, result: dict[str, Any]) -> float | None:
        v = self.get(result) if self.get is not None else result.get(self.key)
        if v is None:
            return None
        v = float(v)
        return v if math.isfinite(v) else None


def _params_m(r: dict[str, Any]) -> float | None:
    return None if r.get("params") is None else r["params"] / 1e6


PARAMS = Metric("params_m", "Params (M)", 2, lower_is_better=None, get=_params_m, spread=False)
VAL_PPL = Metric("val_ppl", "val ppl ↓")
TEST_PPL = Metric("test_ppl", "test ppl ↓")
GEN_PPL = Metric("gen_ppl", "gen-PPL ↓")
DIST_1 = Metric("dist_1", "Dist-1 ↑", 3, lower_is_better=False)
DIST_2 = Metric("dist_2", "Dist-2 ↑", 3, lower_is_better=False)
REP_4 = Metric("rep_4", "Rep-4 (×10⁻²) ↓", 2, factor=100.0)

#: The columns of the paper's Table 1 (after "Model").
TABLE1_METRICS = (PARAMS, VAL_PPL, TEST_PPL, GEN_PPL, DIST_1, DIST_2, REP_4)
#: The metrics compared pairwise against the baseline.
PAIRED_METRICS = (VAL_PPL, TEST_PPL, GEN_PPL, DIST_1, DIST_2, REP_4)


def _extrapolation_metric(m: int) -> Metric:
    def get(r: dict[str, Any]) -> float | None:
        return (r.get("extrapolation") or {}).get(str(m))

    return Metric(f"{EXTRAPOLATION_METRIC_PREFIX}{m}", f"{m}×T ↓", get=get)


def format_mean_std(stats: dict[str, Any], digits: int = 2, factor: float = 1.0) -> str:
    """``"m ± s"`` (n ≥ 2), ``"m"`` (n = 1) or ``"n/a"`` (n = 0)."""
    if not stats["n"]:
        return "n/a"
    m = f"{stats['mean'] * factor:.{digits}f}"
    return m if stats["std"] is None else f"{m} ± {stats['std'] * factor:.{digits}f}"


def _signed(x: float | None, digits: int, factor: float = 1.0) -> str:
    return "n/a" if x is None else f"{x * factor:+.{digits}f}"


# ---------------------------------------------------------------------- grouping
def _by_variant(results: Iterable[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in results:
        out.setdefault(str(r["variant"]), {})[int(r["seed"])] = r
    return out


def _stats(runs: dict[int, dict[str, Any]], metric: Metric) -> dict[str, Any]:
    return mean_std(metric.value(runs[s]) for s in sorted(runs))


def paired_comparison(
    results: Iterable[dict[str, Any]],
    variants: Sequence[str],
    baseline: str = "rope",
    metrics: Sequence[Metric] = PAIRED_METRICS,
) -> dict[str, Any]:
    """Per-seed differences ``variant − baseline`` (same seed) and paired t-tests.

    Args:
        results: per-run result dicts.
        variants: the variants to compare (the baseline itself is skipped).
        baseline: the variant subtracted.
        metrics: the metrics compared.

    Returns:
        ``{"baseline", "rows"}``; a row per (variant, metric): ``variant``, ``metric``,
        ``seeds`` (those with both values), ``diffs`` (in the metric's units, before
        ``factor``), ``mean``, ``std``, ``t``, ``df``, ``p``, ``note`` and ``favours``
        (``"variant"``, ``"baseline"`` or None: which side the mean difference favours).
    """
    grouped = _by_variant(results)
    base = grouped.get(baseline, {})
    rows = []
    for v in variants:
        if v == baseline:
            continue
        runs = grouped.get(v, {})
        for metric in metrics:
            seeds, diffs = [], []
            for s in sorted(set(runs) & set(base)):
                a, b = metric.value(runs[s]), metric.value(base[s])
                if a is not None and b is not None:
                    seeds.append(s)
                    diffs.append(a - b)
            test = paired_t_test(diffs)
            favours = None
            if test["mean"] not in (None, 0.0) and metric.lower_is_better is not None:
                lower = test["mean"] < 0
                favours = "variant" if lower == metric.lower_is_better else "baseline"
            rows.append(
                {
                    "variant": v,
                    "metric": metric.key,
                    "seeds": seeds,
                    "diffs": diffs,
                    **test,
                    "favours": favours,
                }
            )
    return {"baseline": baseline, "rows": rows}


def _paired_markdown(
    paired: dict[str, Any], metrics: Sequence[Metric], labels: dict[str, str]
) -> str:
    by_key = {m.key: m for m in metrics}
    base = paired["baseline"]
    rows = []
    for r in paired["rows"]:
        if not r["n"]:
            continue  # no run of this variant (or of the baseline) with this seed yet
        m = by_key[r["metric"]]
        d = ", ".join(f"{x * m.factor:+.{m.digits}f}" for x in r["diffs"]) or "–"
        verdict = "–"
        if r["favours"] is not None:
            side = (
                labels.get(r["variant"], r["variant"])
                if r["favours"] == "variant"
                else labels.get(base, base)
            )
            verdict = side + (" (p < 0.05)" if r["p"] is not None and r["p"] < 0.05 else "")
        rows.append(
            [
                labels.get(r["variant"], r["variant"]),
                m.header,
                d,
                _signed(r["mean"], m.digits, m.factor),
                "–" if r["t"] is None else f"{r['t']:.2f}",
                "–" if r["df"] is None else str(r["df"]),
                format_p(r["p"]) if r["note"] is None else r["note"],
                verdict,
            ]
        )
    head = [
        "Variant",
        "metric",
        f"per-seed Δ (variant − {labels.get(base, base)})",
        "mean Δ",
        "t",
        "df",
        "p (two-sided)",
        "better",
    ]
    return markdown_table(head, rows, align="llrrrrrl")


# ---------------------------------------------------------------------- tables
def _meta_lines(meta: dict[str, Any] | None) -> list[str]:
    if not meta:
        return []
    keys = (
        "scale",
        "data",
        "tokens_per_run",
        "finetune",
        "seeds",
        "evaluator",
        "command",
        "note",
    )
    lines = []
    for k in keys:
        if meta.get(k) is not None:
            v = meta[k]
            v = ", ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else v
            lines.append(
                f"- {k.replace('_', ' ')}: `{v}`"
                if k == "command"
                else f"- {k.replace('_', ' ')}: {v}"
            )
    return lines + [""] if lines else []


def _runs_section(results: Sequence[dict[str, Any]]) -> list[str]:
    rows = []
    for r in sorted(results, key=lambda r: (str(r["variant"]), int(r["seed"]))):
        t = r.get("train_time_s")
        e = r.get("eval_time_s")
        rows.append(
            [
                r["variant"],
                r["seed"],
                r.get("steps", ""),
                "" if t is None else f"{t:.0f}",
                "" if e is None else f"{e:.0f}",
                "" if r.get("val_ppl") is None else f"{r['val_ppl']:.2f}",
                "" if r.get("gen_ppl") is None else f"{r['gen_ppl']:.2f}",
            ]
        )
    if not rows:
        return []
    return [
        "## Runs",
        "",
        markdown_table(
            ["variant", "seed", "steps", "train s", "eval s", "val ppl", "gen-PPL"],
            rows,
            align="lrrrrrr",
        ),
        "",
    ]


def _n_note(rows: list[dict[str, Any]]) -> list[str]:
    ns = sorted({r["n"] for r in rows})
    if not ns:
        return []
    if ns == [0]:
        return ["No finished run yet.", ""]
    n_text = str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
    lines = [f"Mean ± sample standard deviation (n − 1) over the seeds of each row (n = {n_text})."]
    if min(ns) < MIN_PAIRS:
        lines.append(
            f"With fewer than {MIN_PAIRS} seeds no significance test is possible; "
            "differences are then anecdotal."
        )
    return [" ".join(lines), ""]


def build_table1(
    results: Sequence[dict[str, Any]],
    variants: Sequence[str] | None = None,
    *,
    baseline: str = "rope",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 1 of Shao et al. (2025): the positional schemes side by side.

    Args:
        results: per-run result dicts (any variants; those not in ``variants`` are ignored).
        variants: the rows, in order (default: Table 1's).
        baseline: the variant of the paired comparison (RoPE, the paper's strongest
            baseline).
        meta: scale, data, seeds, evaluator, command -- printed above the table.

    Returns:
        ``{"table": "1", "title", "meta", "columns", "rows", "paired", "runs",
        "markdown"}``; a row: ``variant``, ``label``, ``n``, ``cells`` (the printed cells)
        and ``stats`` (per metric: ``n``, ``mean``, ``std``, ``values``).
    """

    variants = list(variants or TABLES["1"])
    return build_table("1", results, variants, TABLE1_METRICS, baseline=baseline, meta=meta)


def build_table(
    table_id: str,
    results: Sequence[dict[str, Any]],
    variants: Sequence[str],
    metrics: Sequence[Metric],
    *,
    baseline: str = "rope",
    labels: dict[str, str] | None = None,
    paired_metrics: Sequence[Metric] = PAIRED_METRICS,
    meta: dict[str, Any] | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """A mean ± std table (one row per variant, one column per metric) plus the paired
    comparison against ``baseline``; the generic builder behind :func:`build_table1`."""
    labels = labels or {v: VARIANTS[v].label if v in VARIANTS else v for v in variants}
    results = [r for r in results if r["variant"] in variants]
    grouped = _by_variant(results)
    rows = []
    for v in variants:
        runs = grouped.get(v, {})
        stats = {m.key: _stats(runs, m) for m in metrics}
        cells = [m.cell(stats[m.key]) for m in metrics]
        rows.append(
            {
                "variant": v,
                "label": labels.get(v, v),
                "n": len(runs),
                "seeds": sorted(runs),
                "cells": cells,
                "stats": stats,
            }
        )
    paired = paired_comparison(results, variants, baseline, paired_metrics)
    columns = ["Model"] + [m.header for m in metrics]
    title = title or TABLE_TITLES.get(table_id, f"Table {table_id}")
    md = [
        f"# {title}",
        "",
        *_meta_lines(meta),
        markdown_table(
            columns, [[r["label"], *r["cells"]] for r in rows], align="l" + "r" * len(metrics)
        ),
        "",
        *_n_note(rows),
        f"## Paired comparison with {labels.get(baseline, baseline)}",
        "",
        "Per seed: variant − baseline with the same seed (same data order and seed of the "
        "initialisation); mean of the differences; two-sided paired t-test (df = n − 1).",
        "",
        _paired_markdown(paired, paired_metrics, labels),
        "",
        *_runs_section(results),
    ]
    return {
        "table": table_id,
        "title": title,
        "meta": meta or {},
        "columns": columns,
        "rows": rows,
        "paired": paired,
        "runs": list(results),
        "markdown": "\n".join(md),
    }


def build_table4(
    results: Sequence[dict[str, Any]],
    variants: Sequence[str] | None = None,
    *,
    full: str = "cmha",
    baseline: str = "rope",
    meta: dict[str, Any] | None = None,
    task_metrics: Sequence[Metric] = (),
) -> dict[str, Any]:
    """Table 4 of Shao et al. (2025), the ablation: gen-PPL and val ppl of each variant with
    the difference of its mean from the full model's (Δ = variant − full), then paired
    comparisons against RoPE and against the full model.

    Args:
        task_metrics: further columns after gen-PPL and val ppl: the paper's Pass@1 (code)
            and Acc. (math) of the fine-tuned runs (:mod:`.table_tasks`).

    Returns:
        As :func:`build_table1`, plus ``paired_full`` (the comparison against ``full``).
    """

    variants = list(variants or TABLES["4"])
    labels = {v: TABLE4_LABELS.get(v, VARIANTS[v].label if v in VARIANTS else v) for v in variants}
    results = [r for r in results if r["variant"] in variants]
    grouped = _by_variant(results)
    metrics = (GEN_PPL, VAL_PPL, *task_metrics)
    full_stats = {m.key: _stats(grouped.get(full, {}), m) for m in metrics}
    rows = []
    for v in variants:
        runs = grouped.get(v, {})
        stats = {m.key: _stats(runs, m) for m in metrics}
        deltas = {}
        cells = []
        for m in metrics:
            a, b = stats[m.key]["mean"], full_stats[m.key]["mean"]
            deltas[m.key] = None if a is None or b is None else a - b
            cell = m.cell(stats[m.key])
            if v != full and deltas[m.key] is not None:
                cell += f" ({_signed(deltas[m.key], m.digits, m.factor)})"
            cells.append(cell)
        rows.append(
            {
                "variant": v,
                "label": labels[v],
                "n": len(runs),
                "seeds": sorted(runs),
                "cells": cells,
                "stats": stats,
                "delta_vs_full": deltas,
            }
        )
    paired_metrics = (*PAIRED_METRICS, *task_metrics)
    full_metrics = (GEN_PPL, VAL_PPL, TEST_PPL, *task_metrics)
    paired = paired_comparison(results, variants, baseline, paired_metrics)
    paired_full = paired_comparison(results, variants, full, full_metrics)
    columns = ["Variant"] + [f"{m.header} (Δ vs full)" for m in metrics]
    title = TABLE_TITLES["4"]
    md = [
        f"# {title}",
        "",
        *_meta_lines(meta),
        markdown_table(
            columns, [[r["label"], *r["cells"]] for r in rows], align="l" + "r" * len(metrics)
        ),
        "",
        "Δ: mean of the variant − mean of the full model (positive = worse than the full "
        "model for ↓ columns, better for ↑ columns).",
        "",
        *_n_note(rows),
        f"## Paired comparison with {labels.get(full, full)}",
        "",
        _paired_markdown(paired_full, full_metrics, labels),
        "",
        f"## Paired comparison with {labels.get(baseline, baseline)}",
        "",
        _paired_markdown(paired, paired_metrics, labels),
        "",
        *_runs_section(results),
    ]
    return {
        "table": "4",
        "title": title,
        "meta": meta or {},
        "columns": columns,
        "rows": rows,
        "paired": paired,
        "paired_full": paired_full,
        "runs": list(results),
        "markdown": "\n".join(md),
    }


def build_extrapolation_table(
    results: Sequence[dict[str, Any]],
    variants: Sequence[str] | None = None,
    multipliers: Sequence[int] = (1, 2, 4, 8),
    *,
    baseline: str = "rope",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Perplexity at m × the training length T (mean ± std over seeds) for the Table-1
    position variants, the same scored tokens at every length (the ``blocks`` protocol of
    :mod:`complexformer.evaluation.extrapolation`); learned positions give n/a beyond T.

    Returns:
        As :func:`build_table1`; the metrics are ``ppl_x1``, ``ppl_x2``, ...
    """

    variants = list(variants or TABLES["extrapolation"])
    metrics = tuple(_extrapolation_metric(int(m)) for m in multipliers)
    payload = build_table(
        "extrapolation",
        results,
        variants,
        metrics,
        baseline=baseline,
        paired_metrics=metrics,
        meta=meta,
    )
    payload["multipliers"] = [int(m) for m in multipliers]
    return payload


def write_table(out_dir: str | os.PathLike, payload: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``OUT/table<id>.json`` and ``OUT/table<id>.md`` (``table_extrapolation`` for the
    extrapolation table); returns both paths."""
    tid = payload["table"]
    name = f"table{tid}" if tid.isdigit() else f"table_{tid}"
    body = {k: v for k, v in payload.items() if k != "markdown"}
    return write_report(out_dir, name, body, payload["markdown"])
