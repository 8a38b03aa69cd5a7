"""The ``train`` section: LM training throughput and KV-cache generation
(``benchmarks.train``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

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
        if r["kind"] not in ("train", "generate"):
            continue
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


def _of(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


def reference_lines(records: list[dict]) -> list[str]:
    """The training step of ours against the minimal model, and decoding against its loop."""
    steps, dec = _of(records, "vs_reference"), _of(records, "generate_vs_reference")
    out: list[str] = []
    if steps:
        base = next(r["median_ms"] for r in steps if r["model"] == "minimal")
        rows = [
            [
                r["model"] if r["model"] == "minimal" else f"ours, {r['model']}",
                f"B={r['B']}, T={r['T']}",
                f"{r['parameters']:,}",
                fmt_num(r["median_ms"], 1),
                f"{fmt_num(r.get('p25_ms'), 1)}-{fmt_num(r.get('p75_ms'), 1)}",
                str(r["n"]),
                fmt_ratio(r["median_ms"] / base),
            ]
            for r in steps
        ]
        heads = ("model", "shape", "parameters", "step (ms)", "p25-p75", "n", "vs minimal")
        out += [
            "Training step (forward, backward, AdamW) against the minimal model "
            "(`benchmarks/minimal_gpt.py`: fused qkv, rotate-half RoPE, SDPA, tied head, the "
            "same shapes), timed round-robin in one process:",
            "",
            markdown_table(heads, rows, align="llrrrrr"),
            "",
        ]
    if dec:
        base = next(r["tokens_per_s"] for r in dec if r["model"] == "minimal")
        rows = [
            [
                "ours, `generate`" if r["model"] == "ours" else "minimal decoding loop",
                r["scheme"],
                f"{r['new_tokens']} new tokens",
                fmt_num(r["median_ms"], 0),
                fmt_num(r["tokens_per_s"], 1),
                fmt_ratio(r["tokens_per_s"] / base),
            ]
            for r in dec
        ]
        heads = ("decoding", "scheme", "length", "time (ms)", "tokens/s", "vs minimal")
        out += [
            "Greedy KV-cache decoding with the same weights, round-robin (median); the two "
            f"produce the same tokens: {dec[0]['same_tokens']}.",
            "",
            markdown_table(heads, rows, align="lllrrr"),
            "",
        ]
    return out


def memory_lines(records: list[dict]) -> list[str]:
    """Peak memory of one forward + backward per loss variant."""
    mem = _of(records, "loss_memory")
    if not mem:
        return []
    base = next(r["peak_bytes"] for r in mem if r["loss"] == "sliced_logits")
    names = {
        "sliced_logits": "logits sliced (earlier versions)",
        "plain": "labels shifted (`chunked_loss=never`)",
        "chunked": "chunked linear + CE (`chunked_loss=always`)",
    }
    rows = [
        [
            names.get(r["loss"], r["loss"]),
            fmt_num(r["peak_mib"], 0),
            fmt_ratio(r["peak_bytes"] / base),
            f"{r['value']:.6f}",
            f"{r['head_grad_rel_diff']:.1e}",
            fmt_num(r["seconds"], 0),
        ]
        for r in mem
    ]
    r0 = mem[0]
    heads = ("loss", "peak (MiB)", "vs sliced", "loss value", "head grad rel. diff", "s")
    return [
        f"Peak memory of one forward + backward of the `{r0['preset']}` preset at B={r0['B']}, "
        f"T={r0['T']}, V={r0['V']:,}, float32 (bytes allocated during the step, from the "
        "profiler; the head-gradient column is max |difference| / max |gradient| against "
        "the sliced-logits loss):",
        "",
        markdown_table(heads, rows, align="lrrrrr"),
        "",
    ]


def profile_lines(records: list[dict]) -> list[str]:
    """The operators with the most self CPU time in one step, ours and the minimal model."""
    prof = {r["model"]: r for r in _of(records, "profile")}
    if len(prof) < 2:
        return []
    ours, ref = prof["rope"], prof["minimal"]
    ref_ops = {o["name"]: o for o in ref["ops"]}
    rows = []
    for o in ours["ops"]:
        m = ref_ops.get(o["name"])
        rows.append(
            [
                f"`{o['name']}`",
                f"{o['self_ms']:.1f} ({o['percent']:.1f} %, {o['calls']})",
                "-" if m is None else f"{m['self_ms']:.1f} ({m['percent']:.1f} %, {m['calls']})",
            ]
        )
    heads = ("operator", "ours, rope: ms (share, calls)", "minimal: ms (share, calls)")
    return [
        "Profile of one training step (`torch.profiler`, self CPU time; ours "
        f"{ours['total_self_ms']:,.0f} ms, minimal {ref['total_self_ms']:,.0f} ms in all), "
        "the operators with the most time in ours:",
        "",
        markdown_table(heads, rows, align="lrr"),
        "",
    ]


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
        *reference_lines(recs),
        *memory_lines(recs),
        *profile_lines(recs),
        "Targets:",
        "",
        *target_lines(payload),
    ]
    if same:
        lines += ["", f"The cached and uncached generations produce the same tokens: {same[-1]}."]
    return "\n".join(lines)
