"""The ``train`` section: LM training throughput and KV-cache generation
(``benchmarks.train``)."""

from __future__ import annotations

from typing import Any

from complexformer._report import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

HEADERS = ("what", "scheme", "shape", "time (ms)", "tokens/s", "vs rope")


def rows(records: list[dict]) -> list[list[str]]:
    """Training rows (tokens/s, relative to rope in the same mode), then generation rows."""
    out = []
    rope = {
        r["mode"]: r.get("tokens_per_s")
        for r in records
        if r["kind"] == "train" and r["scheme"] == "rope"
    }
    for r in records:
        if r["kind"] == "train":
            tps = r.get("tokens_per_s")
            ratio = tps / rope[r["mode"]] if tps and rope.get(r["mode"]) else None
            out.append(
                [
                    f"train ({r['mode']})",
                    r["scheme"],
                    f"B={r['B']}, T={r['T']}",
                    fmt_num(r.get("median_ms"), 1),
                    fmt_num(tps, 0),
                    fmt_ratio(ratio),
                ]
            )
        else:
            label = "with KV cache" if r["use_cache"] else "no cache (recompute)"
            out.append(
                [
                    f"generate, {label}",
                    r["scheme"],
                    f"{r['new_tokens']} new tokens",
                    fmt_num(r["seconds"] * 1e3, 0),
                    fmt_num(r["tokens_per_s"], 1),
                    "-",
                ]
            )
    return out


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    cmd = "python -m benchmarks.train" + (f" {cfg['argv']}" if cfg["argv"] else "")
    same = [r["same_tokens"] for r in recs if r["kind"] == "generate"]
    lines = [
        "## Language model: training throughput and KV-cache generation",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch "
        f"threads), torch {env['torch']}. Command: `{cmd}`. Preset `{cfg['preset']}`, "
        f"vocabulary {cfg['vocab']}; training steps are forward + backward + AdamW on random "
        "ids, timed round-robin (median); generation is greedy from a 16-token prompt. "
        f"Raw data: `{raw}`.",
        "",
        markdown_table(HEADERS, rows(recs), align="lllrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    if same:
        lines += ["", f"The cached and uncached generations produce the same tokens: {same[-1]}."]
    return "\n".join(lines)
