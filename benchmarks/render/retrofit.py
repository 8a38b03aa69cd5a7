"""The ``retrofit`` section: a pre-trained model converted to CMHA against the original
(``benchmarks.retrofit``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

LABELS = {
    "original": "original (RoPE)",
    "converted": "converted (to_cmha, δ = 1, b = 0)",
    "original_norms": "original, training RMSNorm gains (norms control)",
    "converted_adaptation": "converted, training δ and b",
}
HEADERS = ("what", "model", "shape", "trainable", "time (ms)", "tokens/s", "vs original")


def rows(records: list[dict]) -> list[list[str]]:
    """Forward rows, then training-step rows, each relative to the first of its kind."""
    out, first = [], {}
    for r in records:
        base = first.setdefault(r["kind"], r["median_ms"])
        out.append(
            [
                "forward (eval)" if r["kind"] == "forward" else "training step",
                LABELS.get(r["model"], r["model"]),
                f"B={r['B']}, T={r['T']}",
                f"{r['trainable']:,}" if "trainable" in r else "-",
                fmt_num(r["median_ms"], 0),
                fmt_num(r.get("tokens_per_s"), 0),
                fmt_ratio(r["median_ms"] / base),
            ]
        )
    return out


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    cmd = "python -m benchmarks.retrofit" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## CMHA retrofit of a pre-trained model (`complexformer.retrofit`)",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch "
        f"threads), torch {env['torch']}. Command: `{cmd}`. Base `{cfg['base']}`, fp32, random "
        "ids; forward without gradients, training step = forward + backward + AdamW on the "
        f"trainable parameters; timed round-robin (median). Raw data: `{raw}`.",
        "",
        markdown_table(HEADERS, rows(recs), align="lllrrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    return "\n".join(lines)
