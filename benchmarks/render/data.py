"""The ``data`` section: ``complexformer prepare`` throughput and memory, and the start of a
run on a prepared folder (``benchmarks.data``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num
from .targets import target_lines

HEADERS = (
    "measurement",
    "corpus",
    "workers",
    "text (MB)",
    "seconds",
    "CPU seconds",
    "MB/s",
    "peak PSS (MiB)",
)
MIB = 2**20


def _row(r: dict[str, Any], sizes: dict[str, float]) -> list[str]:
    what = {
        "prepare": "complexformer prepare",
        "encode_batch": "tokenizers encode_batch, in memory, 1 thread",
        "encode_batch_x2": "two of the encode_batch above at once (bytes / slower's time)",
        "first_step": "launch to first step (train --preset tiny)",
        "datasets_map": "datasets load_dataset + map(num_proc)",
        "idle": "a process that only imports complexformer",
    }[r["what"]]
    pss = r.get("peak_pss", 0)
    return [
        what,
        f"{r['corpus']} ({fmt_num(sizes[r['corpus']], 0)} MB)" if r["corpus"] in sizes else "-",
        str(r.get("workers", "-")),
        fmt_num(r["n_bytes"] / 1e6, 1) if "n_bytes" in r else "-",
        fmt_num(r["seconds"], 1) if r["what"] != "idle" else "-",
        fmt_num(r["cpu_seconds"], 1) if "cpu_seconds" in r else "-",
        fmt_num(r["mb_per_s"], 2) if "mb_per_s" in r else "-",
        fmt_num(pss / MIB, 0) if pss else "-",
    ]


def table(payload: dict[str, Any]) -> str:
    """The markdown table alone."""
    cfg = payload["config"]
    sizes = {"small": cfg["small_mb"], "medium": cfg["medium_mb"], "large": cfg["large_mb"]}
    return markdown_table(HEADERS, [_row(r, sizes) for r in payload["records"]], align="lllrrrrr")


def _share(payload: dict[str, Any]) -> list[str]:
    """Sentences on the CPU share the 1-worker prepare got and on what two processes get on
    this machine (empty without CPU seconds)."""
    one = [
        r
        for r in payload["records"]
        if r["what"] == "prepare" and r.get("workers") == 1 and "cpu_seconds" in r
    ]
    if not one:
        return []
    ratios = payload["ratios"]
    share = one[0]["cpu_seconds"] / one[0]["seconds"]
    lines = [
        f"The 1-worker `prepare` got {share:.0%} of a core (CPU seconds / seconds). Per CPU "
        "second it encoded "
        f"{1 / ratios['cpu_per_mb_prepare_1_vs_encode_batch']:.2f}x the bytes of "
        "`encode_batch` (it calls `encode_batch_fast`, which skips the offsets)."
    ]
    machine = ratios.get("machine_2_vs_1")
    if machine is not None:
        lines[0] += (
            f" Two `encode_batch` processes at once had {machine:.2f}x the throughput of one: "
            "that is what this machine gives two processes of the engine (2.00 would be two "
            "cores of their own), the ceiling of a 2-worker `prepare` here, whose speed-up "
            f"({ratios['prepare_2_vs_1']:.2f}x) is {ratios['prepare_2_vs_1_of_machine']:.0%} "
            "of it."
        )
    return [*lines, ""]


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg = payload["environment"], payload["config"]
    cmd = "python -m benchmarks.data" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## Data preparation (`complexformer prepare`) and the start on a prepared corpus",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['cpu_count']} cores, shared; "
        f"load average {fmt_num(env.get('load_avg_1m_end'), 1)} at the end), torch "
        f"{env['torch']}. Command: `{cmd}`. Synthetic JSONL corpora of the standard library's "
        "files as documents; one byte-level BPE (vocabulary 8192) trained on the small corpus "
        "is given to every `prepare`, so the throughput is reading, encoding and writing. Peak "
        "PSS is the largest sum, sampled every 50 ms, of the proportional set sizes of the "
        "process tree (a page a forked worker shares with its parent counts once); the "
        "package's own import (torch included) is the idle row. Sizes are "
        f"{fmt_num(cfg['small_mb'], 0)}, {fmt_num(cfg['medium_mb'], 0)} and "
        f"{fmt_num(cfg['large_mb'], 0)} MB. Raw data: `{raw}`.",
        "",
        table(payload),
        "",
        *_share(payload),
        "Targets:",
        "",
        *target_lines(payload),
    ]
    return "\n".join(lines)
