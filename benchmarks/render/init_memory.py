"""The ``init_memory`` section: per-rank peak memory at the start of a sharded run, with and
without meta-device initialisation (``benchmarks.init_memory``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

HEADERS = (
    "ranks",
    "model built",
    "model at start (MiB)",
    "vs one process",
    "process peak (MiB)",
    "vs one process",
    "set-up (s)",
)
MIB = 2**20


def rows(records: list[dict]) -> list[list[str]]:
    """One row per (number of ranks, way of building)."""
    one = records[0]
    out = []
    for r in records:
        how = "whole on each CPU" if not r["meta_init"] else "on meta, shard replayed"
        out.append(
            [
                str(r["world"]),
                how if r["world"] > 1 else "whole on the CPU (unsharded)",
                fmt_num(r["model_at_start"] / MIB, 0),
                fmt_ratio(r["model_at_start"] / one["model_at_start"]),
                fmt_num(r["peak_rss"] / MIB, 0),
                fmt_ratio(r["peak_rss"] / one["peak_rss"]),
                fmt_num(r["seconds"], 1),
            ]
        )
    return out


def table(payload: dict[str, Any]) -> str:
    """The markdown table alone (also shown in docs/training.md)."""
    return markdown_table(HEADERS, rows(payload["records"]), align="llrrrrr")


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg = payload["environment"], payload["config"]
    m = cfg["model"]
    cmd = "python -m benchmarks.init_memory" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## Memory at the start of a sharded run (`--shard`, `meta_init`)",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}`, torch {env['torch']}, gloo on CPU. "
        f"Command: `{cmd}`. The LM (n_layer {m['n_layer']}, d_model {m['d_model']}, d_ff "
        f"{m['d_ff']}, vocabulary {m['vocab_size']}), float32, set up as the training loop "
        "does. Model at start: the peak resident set size during the set-up less the size "
        "before it (Python, torch and the process group); process peak: the whole peak. "
        "Largest rank. With `meta_init` (the default under `--shard`) a rank holds its shard "
        "and, while the construction is replayed, one whole tensor at a time (the largest: "
        f"the embedding or an MLP matrix). Raw data: `{raw}`.",
        "",
        table(payload),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    return "\n".join(lines)
