"""The ``checkpoint`` section: bytes each rank writes at a sharded save, and how long a
synchronous and an asynchronous save block training (``benchmarks.checkpoint``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

HEADERS = (
    "ranks",
    "checkpoint",
    "written by the largest rank (MiB)",
    "vs one process",
    "synchronous save (s)",
    "asynchronous save blocks (s)",
    "async / sync",
)
MIB = 2**20


def rows(records: list[dict]) -> list[list[str]]:
    """One row per number of ranks."""
    one = next((r["bytes"] for r in records if r["world"] == 1), None)
    out = []
    for r in records:
        sync, blocked = r.get("sync_s"), r.get("async_s")
        out.append(
            [
                str(r["world"]),
                "single file" if r["world"] == 1 else "parts (--shard)",
                fmt_num(r["bytes"] / MIB, 1),
                fmt_ratio(r["bytes"] / one) if one else "-",
                fmt_num(sync, 2),
                fmt_num(blocked, 2) if blocked is not None else "-",
                fmt_ratio(blocked / sync) if blocked is not None and sync else "-",
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
    cmd = "python -m benchmarks.checkpoint" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## Sharded checkpoints (`--shard`): bytes per rank and blocking time",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}`, torch {env['torch']}, gloo on CPU. "
        f"Command: `{cmd}`. The LM of the sharding benchmark (n_layer {m['n_layer']}, "
        f"d_model {m['d_model']}, vocabulary {m['vocab_size']}), float32, after one AdamW "
        "update. One process writes the single-file checkpoint; 2 and 4 ranks write their "
        "parts. Bytes: model and optimizer files written by the largest rank. A synchronous "
        "save is timed whole (parts, hashes, manifest, rename); an asynchronous one until it "
        "returns to training (state copied, writes handed to a background thread). Medians "
        f"of {cfg['repeats']} saves, slowest rank. Raw data: `{raw}`.",
        "",
        table(payload),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    return "\n".join(lines)
