"""The ``complex_attention`` section: ``complexformer.nn`` vs complextorch
(``benchmarks.complex_attention``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

FWD_HEADERS = (
    "T",
    "method",
    "time (ms)",
    "p25-p75 (ms)",
    "n",
    "peak (MiB)",
    "complextorch/real / this",
    "complextorch/split / this",
)
MASK_HEADERS = ("T", "mask (ours/real)", "time (ms)", "n", "vs no mask")
KV_HEADERS = ("decoding", "prompt", "new tokens", "total (ms)", "ms / token", "speed-up")


def _find(records: list[dict], **kw: Any) -> dict | None:
    for r in records:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def fwd_rows(records: list[dict]) -> list[list[str]]:
    """Forward + backward rows, with the speed-ups of each method over complextorch's two."""
    rows = []
    for r in records:
        if r["part"] != "fwd_bwd":
            continue
        ct_r = _find(records, part="fwd_bwd", T=r["T"], method="complextorch/real")
        ct_s = _find(records, part="fwd_bwd", T=r["T"], method="complextorch/split")
        tm = r["time"]
        rows.append(
            [
                str(r["T"]),
                r["method"],
                fmt_num(r["time_ms"], 1),
                f"{fmt_num(tm['p25_ms'], 1)}-{fmt_num(tm['p75_ms'], 1)}" if tm["n"] >= 2 else "-",
                str(tm["n"]),
                fmt_num(r["peak_mib"], 1),
                fmt_ratio(_div(ct_r and ct_r["time_ms"], r["time_ms"])),
                fmt_ratio(_div(ct_s and ct_s["time_ms"], r["time_ms"])),
            ]
        )
    return rows


def mask_rows(records: list[dict]) -> list[list[str]]:
    """Mask rows of ``ours/real``, relative to no mask at the same T."""
    rows = []
    for r in records:
        if r["part"] != "masks":
            continue
        base = _find(records, part="masks", T=r["T"], mask="none")
        rows.append(
            [
                str(r["T"]),
                r["mask"],
                fmt_num(r["time_ms"], 1),
                str(r["time"]["n"]),
                fmt_ratio(_div(r["time_ms"], base and base["time_ms"])),
            ]
        )
    return rows


def kv_rows(records: list[dict]) -> list[list[str]]:
    """KV-cache decoding against recomputing the prefix at every step."""
    rec = _find(records, part="kv_cache", method="recompute")
    rows = []
    for r in records:
        if r["part"] != "kv_cache":
            continue
        label = (
            "KV cache (LayerKVCache)"
            if r["method"] == "cached"
            else "recompute the prefix each step"
        )
        rows.append(
            [
                label,
                str(r["prompt"]),
                str(r["steps"]),
                fmt_num(r["time_ms"], 1),
                fmt_num(r["ms_per_token"], 2),
                fmt_ratio(_div(rec and rec["time_ms"], r["time_ms"])),
            ]
        )
    return rows


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    kv = _find(recs, part="kv_cache", method="cached")
    cmd = "python -m benchmarks.complex_attention" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## Complex multi-head attention (`complexformer.nn`) vs complextorch",
        "",
        f"`{cmd}`",
        "",
        f"B={cfg['B']}, H={cfg['H']}, d_k=d_v={cfg['d_k']}, d_model={cfg['H'] * cfg['d_k']}, "
        f"complex64, dropout 0; {env['device']} ({env['cpu_model']}), torch {env['torch']}, "
        f"{env['torch_threads']} thread(s), load average {env.get('load_avg_1m')}, "
        f"{env['date']}. Median of n timed forward + backward steps (gradients w.r.t. the input "
        "and all parameters). complextorch's `MultiheadAttention` includes a residual "
        "connection and a LayerNorm, so ours is timed as attention + residual + complex "
        "LayerNorm (`ours/*`): the same work. Peak = bytes allocated during one step on top "
        f"of what was live before it. Raw data: `{raw}`.",
        "",
        markdown_table(FWD_HEADERS, fwd_rows(recs), "rlrrrrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload),
        "",
        "Cost of masks (complextorch has none): `ours/real`, forward + backward.",
        "",
        markdown_table(MASK_HEADERS, mask_rows(recs), "rlrrr"),
        "",
        "KV cache, forward only (causal, rotary; complextorch has no cache, so without one "
        "every step recomputes attention over the whole prefix):",
        "",
        markdown_table(KV_HEADERS, kv_rows(recs), "lrrrrr"),
        "",
    ]
    if kv is not None:
        lines.append(
            f"Cached and recomputed outputs agree to {kv['max_abs_diff']:.1e} (max abs difference)."
        )
    if payload["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in payload["notes"]]
    return "\n".join(lines)
