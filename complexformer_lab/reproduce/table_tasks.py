"""Tables 2 and 3 of Shao et al. (2025, ComplexFormer) and Table 4's task columns.

* :func:`build_table2` -- Table 2 (code generation after fine-tuning): Model, Params (M),
  pass@1, pass@10, pass@100 (%) per code benchmark (HumanEval, MBPP);
* :func:`build_table3` -- Table 3 (mathematical reasoning after fine-tuning): Model,
  Params (M), final-answer accuracy (%) per math benchmark (GSM8K, MATH);
* :func:`task_metrics_table4` -- Table 4's Pass@1 and Acc. columns (the first code and math
  benchmark).

A result of a fine-tuning run (:mod:`.tasks`) has ``variant``, ``seed``, ``params`` and
``code`` (``{benchmark: {"pass@1": p, ...}}``) or ``math`` (``{benchmark: {"accuracy": a,
...}}``); values are fractions, printed as percentages, mean ± std over seeds, with the
paired comparison against RoPE of :func:`~.table.build_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .table import PARAMS, Metric, build_table
from .variants import TABLES

__all__ = [
    "BENCHMARK_LABELS",
    "build_table2",
    "build_table3",
    "code_metric",
    "math_metric",
    "task_metrics_table4",
]

BENCHMARK_LABELS = {"humaneval": "HumanEval", "mbpp": "MBPP", "gsm8k": "GSM8K", "math": "MATH"}


def _label(bench: str) -> str:
    return BENCHMARK_LABELS.get(bench, bench)


def _metric(task: str, bench: str, key: str, header: str) -> Metric:
    def get(r: dict[str, Any]) -> float | None:
        return ((r.get(task) or {}).get(bench) or {}).get(key)

    return Metric(f"{task}:{bench}:{key}", header, 1, factor=100.0, lower_is_better=False, get=get)


def code_metric(bench: str, k: int, header: str | None = None) -> Metric:
    """pass@k (%) of a code benchmark."""
    return _metric("code", bench, f"pass@{k}", header or f"{_label(bench)} @{k} (%) ↑")


def math_metric(bench: str, header: str | None = None) -> Metric:
    """Final-answer accuracy (%) of a math benchmark."""
    return _metric("math", bench, "accuracy", header or f"{_label(bench)} Acc. (%) ↑")


_NOTE = (
    "Fine-tuned from each variant's pre-training run (same seed). At the tiny and small "
    "scales these numbers are near zero: models of 1-3M parameters trained on a few million "
    "tokens rarely solve a problem; the table then shows that the pipeline runs, not a "
    "ranking."
)


def build_table2(
    results: Sequence[dict[str, Any]],
    benchmarks: Sequence[str] = ("humaneval", "mbpp"),
    ks: Sequence[int] = (1, 10, 100),
    variants: Sequence[str] | None = None,
    *,
    baseline: str = "rope",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 2: pass@k of the code fine-tuned runs (pass@k with k above the number of samples
    is n/a). Returns the payload of :func:`~.table.build_table`."""
    metrics = tuple(code_metric(b, k) for b in benchmarks for k in ks)
    variants = list(variants or TABLES["2"])
    return build_table(
        "2",
        results,
        variants,
        (PARAMS, *metrics),
        baseline=baseline,
        paired_metrics=metrics,
        meta={"note": _NOTE, **(meta or {})},
    )


def build_table3(
    results: Sequence[dict[str, Any]],
    benchmarks: Sequence[str] = ("gsm8k", "math"),
    variants: Sequence[str] | None = None,
    *,
    baseline: str = "rope",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 3: final-answer accuracy of the math fine-tuned runs. Returns the payload of
    :func:`~.table.build_table`."""
    metrics = tuple(math_metric(b) for b in benchmarks)
    variants = list(variants or TABLES["3"])
    return build_table(
        "3",
        results,
        variants,
        (PARAMS, *metrics),
        baseline=baseline,
        paired_metrics=metrics,
        meta={"note": _NOTE, **(meta or {})},
    )


def task_metrics_table4(code_bench: str | None, math_bench: str | None) -> tuple[Metric, ...]:
    """Table 4's "Code Gen (Pass@1)" and "Math Reason (Acc.)" columns."""
    out: list[Metric] = []
    if code_bench is not None:
        out.append(code_metric(code_bench, 1, f"Pass@1 (%) ↑ [{_label(code_bench)}]"))
    if math_bench is not None:
        out.append(math_metric(math_bench, f"Acc. (%) ↑ [{_label(math_bench)}]"))
    return tuple(out)
