"""The ``shard`` section: per-rank memory of ``--shard`` (FSDP2) against DDP
(``benchmarks.shard``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

HEADERS = (
    "ranks",
    "wrapper",
    "parameters (MiB)",
    "gradients (MiB)",
    "AdamW state (MiB)",
    "total (MiB)",
    "vs DDP",
    "peak RSS (MiB)",
)
MIB = 2**20


def rows(records: list[dict]) -> list[list[str]]:
    """One row per (ranks, wrapper); ``vs DDP`` against the DDP row of the same ranks."""
    ddp = {r["world"]: r["total"] for r in records if r["mode"] == "ddp"}
    return [
        [
            str(r["world"]),
            "FSDP2 (--shard)" if r["mode"] == "shard" else "DDP",
            fmt_num(r["params"] / MIB, 1),
            fmt_num(r["grads"] / MIB, 1),
            fmt_num(r["optimizer"] / MIB, 1),
            fmt_num(r["total"] / MIB, 1),
            fmt_ratio(r["total"] / ddp[r["world"]]) if r["world"] in ddp else "-",
            fmt_num(r["peak_rss"] / MIB, 0),
        ]
        for r in records
    ]


def table(payload: dict[str, Any]) -> str:
    """The markdown table alone (also shown in docs/training.md)."""
    return markdown_table(HEADERS, rows(payload["records"]), align="llrrrrrr")


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg = payload["environment"], payload["config"]
    m = cfg["model"]
    cmd = "python -m benchmarks.shard" + (f" {cfg['argv']}" if cfg["argv"] else "")
    n = payload["records"][0]["n_params"]
    lines = [
        "## Sharded training memory (`--shard`, FSDP2, against DDP)",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}`, torch {env['torch']}, gloo on CPU. "
        f"Command: `{cmd}`. A ComplexFormer LM of {n / 1e6:.1f}M parameters (n_layer "
        f"{m['n_layer']}, d_model {m['d_model']}, vocabulary {m['vocab_size']}), float32, one "
        "AdamW update; bytes this rank stores for parameters, gradients and AdamW "
        "`exp_avg`/`exp_avg_sq` (the local shard of every DTensor), for the largest rank; "
        f"peak RSS is that process's `ru_maxrss`. Raw data: `{raw}`.",
        "",
        table(payload),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    return "\n".join(lines)
