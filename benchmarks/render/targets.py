"""The performance targets of every benchmark, in one table, and their verdicts.

A target names a ratio in a benchmark's JSON record (a path of keys into its ``ratios``), a
comparison and a threshold. The benchmarks only measure; the verdicts are made here when the
records are rendered, so a target can change without measuring again.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TARGETS", "Target", "Verdict", "evaluate", "target_lines"]

_OPS = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Target:
    """One performance target.

    Attributes:
        benchmark: the record it applies to (``attention``, ``train``, ...).
        label: what is compared, as shown in the docs.
        path: keys into the record's ``ratios``, e.g. ``("1024/eager", "cmha_rope_time")``.
        comparison: ``"<="`` or ``">="``.
        threshold: the bound.
        digits: decimals of the value shown.
        unit: shown after the value and the threshold (``"x"`` for speed-ups).
    """

    benchmark: str
    label: str
    path: tuple[str, ...]
    comparison: str
    threshold: float
    digits: int = 2
    unit: str = ""

    def __post_init__(self) -> None:
        if self.comparison not in _OPS:
            raise ValueError(f"comparison {self.comparison!r}: allowed are {sorted(_OPS)}")


TARGETS: tuple[Target, ...] = (
    Target("attention", "cmha/rope time, eager, T=1024", ("1024/eager", "cmha_rope_time"),
           "<=", 1.08),
    Target("attention", "cmha/rope time, compiled, T=1024", ("1024/compiled", "cmha_rope_time"),
           "<=", 1.05),
    Target("attention", "cmha/rope peak memory, eager, T=4096", ("4096/eager", "cmha_rope_mem"),
           "<=", 1.2),
    Target("attention", "cmha/rope peak memory, compiled, T=4096",
           ("4096/compiled", "cmha_rope_mem"), "<=", 1.2),
    Target("attention", "reference/cmha time (cmha speed-up), eager, T=1024",
           ("1024/eager", "ref_cmha_time"), ">=", 20.0),
    Target("attention", "reference/cmha time (cmha speed-up), compiled, T=1024",
           ("1024/compiled", "ref_cmha_time"), ">=", 20.0),
    Target("complex_attention", "complextorch/real / ours/real time at T=1024",
           ("1024", "ct_real/ours_real"), ">=", 2.0, unit="x"),
    Target("train", "training tokens/s cmha/rope, eager", ("train_cmha_rope/eager",),
           ">=", 0.9),
    Target("train", "generation with / without KV cache", ("generate_cache_speedup",),
           ">=", 5.0, digits=1, unit="x"),
    Target("train", "training step ours / minimal model, rope", ("step_vs_minimal/rope",),
           "<=", 1.03, unit="x"),
    Target("train", "training step ours / minimal model, cmha", ("step_vs_minimal/cmha",),
           "<=", 1.08, unit="x"),
    Target("train", "KV-cache decoding tokens/s ours / minimal loop, rope",
           ("generate_vs_minimal",), ">=", 0.95),
    Target("train", "peak memory of the paper preset's step (B 8, T 1024), chunked loss / "
           "sliced logits", ("loss_memory/chunked_vs_sliced",), "<=", 0.6),
    Target("cbert", "forward time CmplxBERT (modulus score) / BERT",
           ("forward_time_vs_bert", "cmplx_modulus"), "<=", 2.5, unit="x"),
    Target("cbert", "forward time CmplxBERT (real score) / BERT",
           ("forward_time_vs_bert", "cmplx_real"), "<=", 2.5, unit="x"),
    Target("cbert", "training step time, adapter-only CmplxBERT / full fine-tuning of BERT, "
           "head on every token", ("train_time_vs_bert", "cmplx_modulus/all"), "<=", 2.5, unit="x"),
    Target("cbert", "training step peak memory, adapter-only CmplxBERT / full fine-tuning of "
           "BERT, head on every token", ("train_peak_memory_vs_bert", "cmplx_modulus/all"),
           "<=", 2.0, unit="x"),
    Target("cbert", "training step time, as above, head on the labelled tokens",
           ("train_time_vs_bert", "cmplx_modulus/labelled"), "<=", 2.5, unit="x"),
    Target("cbert", "training step peak memory, as above, head on the labelled tokens",
           ("train_peak_memory_vs_bert", "cmplx_modulus/labelled"), "<=", 2.0, unit="x"),
    Target("retrofit", "forward time converted / original, T=512",
           ("forward_converted_original",), "<=", 1.15, unit="x"),
    Target("data", "prepare throughput, 2 workers / 1 worker", ("prepare_2_vs_1",), ">=", 1.7,
           unit="x"),
    Target("data", "prepare throughput, 1 worker / tokenizers encode_batch in memory (1 thread)",
           ("prepare_1_vs_encode_batch",), ">=", 0.85),
    Target("data", "peak memory (PSS of the process tree) of prepare, large corpus, GB",
           ("peak_pss_gb", "large"), "<=", 0.5),
    Target("data", "peak memory of prepare, large / medium corpus (memory that grew with the "
           "corpus would grow as the text: see the sizes above)", ("peak_pss_large_vs_medium",),
           "<=", 1.25),
    Target("data", "launch to first step, large / small prepared corpus",
           ("first_step_large_vs_small",), "<=", 1.2),
    Target("shard", "per-rank parameters + gradients + AdamW state, --shard / DDP, 2 ranks",
           ("2", "shard_vs_ddp"), "<=", 0.6),
    Target("shard", "per-rank parameters + gradients + AdamW state, --shard / DDP, 4 ranks",
           ("4", "shard_vs_ddp"), "<=", 0.35),
    Target("checkpoint", "bytes written per rank by a sharded save / one process's, 2 ranks",
           ("2", "bytes_vs_one"), "<=", 0.6),
    Target("checkpoint", "bytes written per rank by a sharded save / one process's, 4 ranks",
           ("4", "bytes_vs_one"), "<=", 0.35),
    Target("checkpoint", "time an asynchronous save blocks training / a synchronous save, "
           "2 ranks", ("2", "async_vs_sync_blocked"), "<=", 0.3),
    Target("checkpoint", "time an asynchronous save blocks training / a synchronous save, "
           "4 ranks", ("4", "async_vs_sync_blocked"), "<=", 0.3),
    Target("init_memory", "per-rank model memory at the start of a sharded run, meta init, "
           "4 ranks / one process", ("4/meta", "model_at_start_vs_one"), "<=", 0.4),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """A target judged on one record: ``passed`` is None when the value was not measured."""

    target: Target
    value: float | None
    passed: bool | None
    note: str = ""


def _lookup(ratios: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = ratios
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def evaluate(payload: Mapping[str, Any]) -> list[Verdict]:
    """The verdicts of the targets of ``payload["benchmark"]`` on its ``ratios``."""
    out = []
    for tg in TARGETS:
        if tg.benchmark != payload["benchmark"]:
            continue
        found, value = _lookup(payload.get("ratios", {}), tg.path)
        if not found:
            out.append(Verdict(tg, None, None, "not measured in this run"))
        elif value is None:
            out.append(Verdict(tg, None, None, "not measured (a method was skipped)"))
        else:
            out.append(Verdict(tg, value, bool(_OPS[tg.comparison](value, tg.threshold))))
    return out


def target_lines(payload: Mapping[str, Any]) -> list[str]:
    """Markdown list items ``- **PASS** label: value (target <= bound)``, one per target."""
    lines = []
    for v in evaluate(payload):
        tg = v.target
        want = f"{tg.comparison} {tg.threshold:g}{tg.unit}"
        if v.passed is None:
            lines.append(f"- **N/A** {tg.label}: target {want}; {v.note}")
        else:
            tag = "PASS" if v.passed else "FAIL"
            shown = f"{v.value:.{tg.digits}f}{tg.unit}"
            lines.append(f"- **{tag}** {tg.label}: {shown} (target {want})")
    return lines
