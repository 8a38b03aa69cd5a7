"""The ``attention`` section: CMHA vs RoPE vs the literal reference (``benchmarks.attention``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_load, fmt_num, fmt_ratio
from .targets import target_lines

HEADERS = (
    "T",
    "mode",
    "method",
    "time (ms)",
    "p25-p75 (ms)",
    "n",
    "peak (MiB)",
    "time / rope",
    "mem / rope",
    "time / cmha",
)


def _get(records: list[dict], t: int, mode: str, method: str) -> dict | None:
    for r in records:
        if r["T"] == t and r["mode"] == mode and r["method"] == method and r["status"] == "ok":
            return r
    return None


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def table_rows(records: list[dict]) -> list[list[str]]:
    """One row per (T, mode, method); ratios against the rope / cmha row of the same T, mode."""
    rows = []
    for r in records:
        base = _get(records, r["T"], r["mode"], "rope")
        cm = _get(records, r["T"], r["mode"], "cmha")
        if r["status"] != "ok":
            rows.append([str(r["T"]), r["mode"], r["method"], "skipped"] + ["-"] * 6)
            continue
        t_rope = _div(r["time_ms"], base and base["time_ms"])
        m_rope = _div(r["peak_mib"], base and base["peak_mib"])
        t_cmha = _div(r["time_ms"], cm and cm["time_ms"])
        spread = (
            f"{fmt_num(r['time']['p25_ms'], 1)}-{fmt_num(r['time']['p75_ms'], 1)}"
            if r["time"]["n"] >= 2
            else "-"
        )
        rows.append(
            [
                str(r["T"]),
                r["mode"],
                r["method"],
                fmt_num(r["time_ms"], 2),
                spread,
                str(r["time"]["n"]),
                fmt_num(r["peak_mib"], 1),
                fmt_ratio(t_rope),
                fmt_ratio(m_rope),
                fmt_ratio(t_cmha) if r["method"] != "cmha" else fmt_ratio(1.0),
            ]
        )
    return rows


def _notes(payload: dict[str, Any]) -> list[str]:
    recs = payload["records"]
    notes = list(payload["notes"])
    for r in recs:
        if r["status"] != "ok":
            notes.append(f"T={r['T']} {r['mode']} {r['method']}: skipped, {r['note']}.")
    firsts = [
        f"{r['method']} T={r['T']} {r['first_call_s']:.1f} s"
        for r in recs
        if r["status"] == "ok" and r["mode"] == "compiled"
    ]
    if firsts:
        notes.append(
            "First compiled call (compilation of fwd + bwd; shorter when Inductor's "
            "on-disk cache is warm from an earlier run): " + ", ".join(firsts) + "."
        )
    return notes


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    cmd = "python -m benchmarks.attention" + (f" {cfg['argv']}" if cfg["argv"] else "")
    out = [
        "## Attention kernels: CMHA vs RoPE vs the literal reference",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch threads, "
        f"{env['cpu_count']} CPUs, capability {env.get('cpu_capability')}), torch "
        f"{env['torch']}, device `{env['device']}`"
        + (f" ({env['cuda_device']})" if env.get("cuda_device") else "")
        + f", dtype {cfg['dtype']}. Command: `{cmd}`. Code measured: "
        + ", ".join(f"`{p}` sha256 `{h}`" for p, h in env.get("sources", {}).items())
        + f". Load average (1 min) {fmt_load(env.get('load_avg_1m'))} at the start, "
        f"{fmt_load(env.get('load_avg_1m_end'))} at the end; run time "
        f"{payload.get('total_seconds') or 0:.0f} s.",
        "",
        f"B={cfg['B']}, H={cfg['H']}, D={cfg['D']}, pair layout "
        f"`{cfg.get('layout', 'interleaved')}` for cmha and rope, causal; one step = forward + "
        "`(out * w).sum()` + backward (grads of q, k, v, and delta, bias for cmha / reference). "
        f"Time: median of n (up to {cfg['repeats']}) interleaved repeats after the first "
        f"call and up to {cfg['warmup']} warm-up call(s), the first of which is the profiled "
        "memory call; slow reference steps get fewer (see `--max-seconds`). "
        "Peak: extra memory allocated during one step "
        f"({recs[0].get('memory_method', 'n/a') if recs else 'n/a'}). Ratio columns divide "
        f"by the rope / cmha row of the same T and mode. Raw data: `{raw}`.",
        "",
        markdown_table(HEADERS, table_rows(recs), align="rllrrrrrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    notes = _notes(payload)
    if notes:
        out += ["", "Notes:", "", *[f"- {n}" for n in notes]]
    return "\n".join(out)
