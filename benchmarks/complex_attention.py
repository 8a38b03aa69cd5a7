"""Complex multi-head attention benchmark: complexformer.nn vs complextorch 2.1.1.

Three measurements, all on complex64 inputs x (B, T, H * d_k), B = 4, H = 8, d_k = d_v = 32
by default:

1. **Forward + backward, no masks** (T in {256, 1024}), one step = ``y = f(x)``,
   ``loss = Re(sum(y * w))`` with a fixed random complex ``w``, and ``torch.autograd.grad``
   w.r.t. x and every parameter:

   * ``complextorch/real``  - ``complextorch.nn.MultiheadAttention(..., softmax_on="real")``;
     its module is a whole sub-block (Q/K/V/out projections, attention, dropout, residual,
     LayerNorm), so ours is timed with the same residual + complex LayerNorm around it.
   * ``complextorch/split`` - its default (``CVSoftMax``: softmax of Re and of Im separately).
   * ``ours/real``    - :class:`complexformer.nn.MultiheadAttention` (``score="real"``: one
     fused real SDPA call over the (re, im)-interleaved views) + residual + LayerNorm.
   * ``ours/split`` - split softmax as two fused real SDPA calls (Im S = Re((-j q) K^H)).
   * ``ours/modulus``, ``ours/phase`` - softmax(|S|) (and its phase-preserving variant),
     computed explicitly (|S| is not a dot product), same wrapper.

   Dropout is 0 everywhere. The target is ``complextorch/real`` / ``ours/real`` >= 2 at
   T = 1024 (the same mathematics; complextorch forms the (B, H, T, T) complex score tensor,
   softmaxes it and multiplies complex weights with V; ours never materialises it).
2. **Cost of masks** for ``ours/real`` (forward + backward): ``is_causal`` (fused causal
   kernel), a (B, T) ``key_padding_mask`` with ~1/8 padding, a bool (T, T) ``attn_mask``,
   and causal + padding together; relative to no mask. complextorch has no masks.
3. **KV cache**, forward only: a prompt of ``--prompt`` tokens then ``--steps`` one-token
   decoding steps with a :class:`LayerKVCache` (causal, rotary embedding), against
   recomputing causal attention over the whole prefix at every step (what one must do without
   a cache, e.g. with complextorch). The two outputs are checked to agree.

Timing: :func:`_common.time_interleaved` (warm-up calls, then rounds in rotating order, the
median reported). Peak memory (part 1 only, unless ``--no-memory``): :func:`_common.peak_memory`,
the peak of the bytes allocated during one step over what was live before it (CPU: replay of
the torch profiler's allocation events).

Outputs: a table on stdout, ``benchmarks/results/complex_attention.json``, and the section
between ``<!-- complex_attention:start -->`` and ``<!-- complex_attention:end -->`` of
``docs/benchmarks.md`` (other sections are kept).

    python benchmarks/complex_attention.py --threads 1      # full run, a few minutes on CPU
    python benchmarks/complex_attention.py --quick          # smoke test; writes no markdown
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    DOCS_MD,
    RESULTS_DIR,
    add_common_args,
    ensure_repo_on_path,
    environment,
    fmt_num,
    fmt_ratio,
    markdown_table,
    optional_path,
    peak_memory,
    resolve_counts,
    resolve_device,
    text_table,
    time_interleaved,
    update_markdown_section,
    write_json,
)

ensure_repo_on_path()
import complexformer.nn as cnn  # noqa: E402

SECTION = "complex_attention"
DEFAULT_SEQ_LENS = (256, 1024)
QUICK_SEQ_LENS = (64, 128)
DEFAULT_JSON = RESULTS_DIR / "complex_attention.json"
QUICK_JSON = RESULTS_DIR / "complex_attention-quick.json"
TARGET_T, TARGET_SPEEDUP = 1024, 2.0
MASKS = ("none", "causal", "key_padding", "attn_mask_bool", "causal+key_padding")


# --------------------------------------------------------------------------- modules


class _OursBlock(torch.nn.Module):
    """Our attention + residual + LayerNorm: the work complextorch's MHA module does."""

    def __init__(self, h: int, d_model: int, d_k: int, score: str) -> None:
        super().__init__()
        self.attn = cnn.MultiheadAttention(h, d_model, d_k, d_k, dropout=0.0, score=score)
        self.norm = cnn.LayerNorm(d_model, eps=1e-6)

    def forward(self, x: torch.Tensor, **masks) -> torch.Tensor:
        return self.norm(self.attn(x, x, x, **masks) + x)


def _complextorch_mha(h: int, d_model: int, d_k: int, softmax_on: str):
    import complextorch

    return complextorch.nn.MultiheadAttention(
        h, d_model, d_k, d_k, dropout=0.0, softmax_on=softmax_on
    )


def build_methods(h: int, d_model: int, d_k: int, have_ct: bool) -> dict[str, torch.nn.Module]:
    methods: dict[str, torch.nn.Module] = {}
    if have_ct:
        methods["complextorch/real"] = _complextorch_mha(h, d_model, d_k, "real")
        methods["complextorch/split"] = _complextorch_mha(h, d_model, d_k, "complex")
    for score in ("real", "split", "modulus", "phase"):
        methods[f"ours/{score}"] = _OursBlock(h, d_model, d_k, score)
    return methods


def make_step(
    module: torch.nn.Module, x: torch.Tensor, w: torch.Tensor, masks: dict | None = None
) -> Callable[[], None]:
    wrt = [x, *module.parameters()]
    masks = masks or {}
    ours = isinstance(module, _OursBlock)

    def step() -> None:
        y = module(x, **masks) if ours else module(x, x, x)  # complextorch: (q, k, v)
        loss = (y * w).real.sum()
        torch.autograd.grad(loss, wrt)

    return step


def mask_kwargs(kind: str, b: int, t: int, device) -> dict[str, Any]:
    pad = torch.zeros(b, t, dtype=torch.bool, device=device)
    pad[:, t - t // 8 :] = True  # the last 1/8 of every sequence is padding
    pad[0] = False  # ... except in the first one
    future = torch.ones(t, t, dtype=torch.bool, device=device).triu(1)
    return {
        "none": {},
        "causal": {"is_causal": True},
        "key_padding": {"key_padding_mask": pad},
        "attn_mask_bool": {"attn_mask": future},
        "causal+key_padding": {"is_causal": True, "key_padding_mask": pad},
    }[kind]


# --------------------------------------------------------------------------- measurement


def measure_fwd_bwd(args, device) -> tuple[list[dict], list[str]]:
    b, h, d_k = args.batch, args.heads, args.head_dim
    d_model = h * d_k
    notes: list[str] = []
    try:
        import complextorch

        have_ct = True
        notes.append(
            f"Measured against complextorch {getattr(complextorch, '__version__', '?')} (pip)."
        )
    except ImportError:
        have_ct = False
        notes.append(
            "complextorch is not installed: only our methods were measured "
            "(pip install complextorch==2.1.1)."
        )
    records = []
    for t in args.seq_lens:
        torch.manual_seed(args.seed)
        x = torch.randn(b, t, d_model, dtype=torch.cfloat, device=device, requires_grad=True)
        w = torch.randn(b, t, d_model, dtype=torch.cfloat, device=device)
        methods = {k: m.to(device) for k, m in build_methods(h, d_model, d_k, have_ct).items()}
        steps = {name: make_step(m, x, w) for name, m in methods.items()}
        mems = {}
        if not args.no_memory:
            for name, step in steps.items():
                mems[name] = peak_memory(step, device)
        timing = time_interleaved(
            steps,
            device=device,
            warmup=args.warmup,
            repeats=args.repeats,
            max_seconds=args.max_seconds,
        )
        for name in steps:
            rec = {
                "part": "fwd_bwd",
                "T": t,
                "method": name,
                "B": b,
                "H": h,
                "d_k": d_k,
                "time": timing[name],
                "time_ms": timing[name]["median_ms"],
                "peak_mib": mems[name]["peak_mib"] if name in mems else None,
            }
            records.append(rec)
            print(
                f"  fwd+bwd T={t:5d} {name:20s} {rec['time_ms']:10.1f} ms "
                f"{fmt_num(rec['peak_mib'], 1):>10s} MiB (n={timing[name]['n']})",
                flush=True,
            )
        # masks: ours/real only
        block = methods["ours/real"]
        mask_steps = {k: make_step(block, x, w, mask_kwargs(k, b, t, device)) for k in MASKS}
        mtiming = time_interleaved(
            mask_steps,
            device=device,
            warmup=args.warmup,
            repeats=args.repeats,
            max_seconds=args.max_seconds,
        )
        for k in MASKS:
            rec = {
                "part": "masks",
                "T": t,
                "method": "ours/real",
                "mask": k,
                "time": mtiming[k],
                "time_ms": mtiming[k]["median_ms"],
            }
            records.append(rec)
            print(f"  masks   T={t:5d} {k:20s} {rec['time_ms']:10.1f} ms", flush=True)
        del methods, steps, mask_steps, x, w
        gc.collect()
    return records, notes


@torch.no_grad()
def measure_kv_cache(args, device) -> list[dict]:
    b, h, d_k = args.batch, args.heads, args.head_dim
    d_model, p, n = h * d_k, args.prompt, args.steps
    torch.manual_seed(args.seed)
    mha = (
        cnn.MultiheadAttention(h, d_model, d_k, d_k, dropout=0.0, rotary=cnn.RotaryEmbedding(d_k))
        .to(device)
        .eval()
    )
    x = torch.randn(b, p + n, d_model, dtype=torch.cfloat, device=device)
    outs: dict[str, torch.Tensor] = {}

    def cached() -> None:
        cache = cnn.LayerKVCache()
        mha(x[:, :p], x[:, :p], x[:, :p], is_causal=True, cache=cache)
        ys = []
        for i in range(p, p + n):
            xi = x[:, i : i + 1]
            ys.append(mha(xi, xi, xi, is_causal=True, cache=cache))
        outs["cached"] = torch.cat(ys, 1)

    def recompute() -> None:
        ys = []
        for i in range(p, p + n):
            xs = x[:, : i + 1]
            ys.append(mha(xs, xs, xs, is_causal=True)[:, -1:])
        outs["recompute"] = torch.cat(ys, 1)

    timing = time_interleaved(
        {"cached": cached, "recompute": recompute},
        device=device,
        warmup=1,
        repeats=max(args.repeats // 2, 1),
        max_seconds=args.max_seconds,
    )
    err = (outs["cached"] - outs["recompute"]).abs().max().item()
    records = []
    for name in ("cached", "recompute"):
        rec = {
            "part": "kv_cache",
            "method": name,
            "prompt": p,
            "steps": n,
            "B": b,
            "H": h,
            "d_k": d_k,
            "time": timing[name],
            "time_ms": timing[name]["median_ms"],
            "ms_per_token": timing[name]["median_ms"] / n,
            "max_abs_diff": err,
        }
        records.append(rec)
        print(
            f"  kv-cache {name:10s} {rec['time_ms']:10.1f} ms for {n} tokens "
            f"({rec['ms_per_token']:.2f} ms/token); max |cached - recompute| = {err:.2e}",
            flush=True,
        )
    return records


# --------------------------------------------------------------------------- reporting


def _find(records, **kw) -> dict | None:
    for r in records:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def _div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def speedups(records: list[dict], t: int) -> dict[str, float | None]:
    def ms(m):
        r = _find(records, part="fwd_bwd", T=t, method=m)
        return r and r["time_ms"]

    return {
        "ct_real/ours_real": _div(ms("complextorch/real"), ms("ours/real")),
        "ct_split/ours_split": _div(ms("complextorch/split"), ms("ours/split")),
        "ct_split/ours_real": _div(ms("complextorch/split"), ms("ours/real")),
    }


def target(records: list[dict], seq_lens) -> dict[str, Any]:
    res = {
        "target": f"complextorch/real / ours/real time at T={TARGET_T}",
        "threshold": TARGET_SPEEDUP,
        "value": None,
        "pass": None,
    }
    if TARGET_T in seq_lens:
        v = speedups(records, TARGET_T)["ct_real/ours_real"]
        if v is not None:
            res["value"], res["pass"] = v, bool(v >= TARGET_SPEEDUP)
    return res


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


def fwd_rows(records: list[dict]) -> list[list[str]]:
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


MASK_HEADERS = ("T", "mask (ours/real)", "time (ms)", "n", "vs no mask")


def mask_rows(records: list[dict]) -> list[list[str]]:
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


KV_HEADERS = ("decoding", "prompt", "new tokens", "total (ms)", "ms / token", "speed-up")


def kv_rows(records: list[dict]) -> list[list[str]]:
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


def markdown_body(payload: dict) -> str:
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    tg = payload["target"]
    verdict = (
        "not measured"
        if tg["pass"] is None
        else f"{tg['value']:.2f}x: **{'PASS' if tg['pass'] else 'FAIL'}**"
    )
    kv = _find(recs, part="kv_cache", method="cached")
    lines = [
        "## Complex multi-head attention (`complexformer.nn`) vs complextorch",
        "",
        f"`python benchmarks/complex_attention.py {cfg['argv']}`".replace(" `", "`"),
        "",
        f"B={cfg['B']}, H={cfg['H']}, d_k=d_v={cfg['d_k']}, d_model={cfg['H'] * cfg['d_k']}, "
        f"complex64, dropout 0; {env['device']} ({env['cpu_model']}), torch {env['torch']}, "
        f"{env['torch_threads']} thread(s), load average {env.get('load_avg_1m')}, "
        f"{env['date']}. Median of n timed forward + backward steps (gradients w.r.t. the input "
        "and all parameters). complextorch's `MultiheadAttention` includes a residual "
        "connection and a LayerNorm, so ours is timed as attention + residual + complex "
        "LayerNorm (`ours/*`): the same work. Peak = bytes allocated during one step on top "
        "of what was live before it.",
        "",
        markdown_table(FWD_HEADERS, fwd_rows(recs), "rlrrrrrr"),
        "",
        f"Target: {tg['target']} >= {tg['threshold']:g}x: {verdict}.",
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


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Forward+backward time and peak memory of complexformer.nn."
        "MultiheadAttention vs complextorch 2.1.1's, the cost of masks and of KV-cache "
        "decoding. Eager only (--no-compile is accepted and ignored: inductor does not "
        "support complex tensors). Writes a JSON record and the 'complex_attention' "
        "section of docs/benchmarks.md."
    )
    p.add_argument(
        "--seq-lens",
        type=int,
        nargs="+",
        default=None,
        metavar="T",
        help="sequence lengths (default: 256 1024; 64 128 with --quick).",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: small T, 1 repeat, no warm-up, short decoding; writes "
        "benchmarks/results/complex_attention-quick.json and no markdown.",
    )
    p.add_argument("--batch", type=int, default=4, help="batch size B (default: 4).")
    p.add_argument("--heads", type=int, default=8, help="heads H (default: 8).")
    p.add_argument("--head-dim", type=int, default=32, help="d_k = d_v (default: 32).")
    p.add_argument(
        "--prompt",
        type=int,
        default=None,
        help="KV-cache part: prompt length (default 512; 32 with --quick).",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="KV-cache part: decoded tokens (default 64; 8 with --quick).",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory probes.")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=30.0,
        help="per-method time budget: timing stops after 3 samples once they add "
        "up to more than this (default: 30).",
    )
    add_common_args(
        p,
        default_json=DEFAULT_JSON,
        default_repeats=5,
        default_warmup=1,
        quick_repeats=1,
        quick_warmup=0,
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    resolve_counts(args, quick=args.quick)
    if args.dtype != "float32":
        raise SystemExit("--dtype: only float32 (complex64) is supported by this benchmark")
    args.seq_lens = args.seq_lens or list(QUICK_SEQ_LENS if args.quick else DEFAULT_SEQ_LENS)
    args.prompt = args.prompt or (32 if args.quick else 512)
    args.steps = args.steps or (8 if args.quick else 64)
    if args.threads:
        torch.set_num_threads(args.threads)
    out_json = optional_path(args.out_json, QUICK_JSON if args.quick else DEFAULT_JSON)
    out_md = optional_path(args.out_md, None if args.quick else DOCS_MD)
    device = resolve_device(args.device)
    env = environment(device)
    print(
        f"complex attention benchmark: torch {env['torch']}, {env['device']}, "
        f"{env['torch_threads']} threads, T={args.seq_lens}, repeats={args.repeats}, "
        f"warmup={args.warmup}",
        flush=True,
    )
    t0 = time.perf_counter()
    records, notes = measure_fwd_bwd(args, device)
    records += measure_kv_cache(args, device)
    payload = {
        "benchmark": SECTION,
        "environment": env,
        "config": {
            "argv": " ".join(argv),
            "B": args.batch,
            "H": args.heads,
            "d_k": args.head_dim,
            "seq_lens": args.seq_lens,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "prompt": args.prompt,
            "steps": args.steps,
            "seed": args.seed,
            "total_seconds": None,
        },
        "records": records,
        "speedups": {str(t): speedups(records, t) for t in args.seq_lens},
        "target": target(records, args.seq_lens),
        "notes": notes,
    }
    payload["config"]["total_seconds"] = round(time.perf_counter() - t0, 1)
    print()
    print(text_table(FWD_HEADERS, fwd_rows(records)))
    print()
    print(text_table(MASK_HEADERS, mask_rows(records)))
    print()
    print(text_table(KV_HEADERS, kv_rows(records)))
    tg = payload["target"]
    if tg["value"] is not None:
        print(
            f"\ntarget {tg['target']} >= {tg['threshold']:g}: {tg['value']:.2f}x "
            f"({'PASS' if tg['pass'] else 'FAIL'})"
        )
    if out_json is not None:
        print(f"wrote {write_json(out_json, payload)}")
    if out_md is not None:
        print(
            f"updated section '{SECTION}' of "
            f"{update_markdown_section(out_md, SECTION, markdown_body(payload))}"
        )
    print(f"total {payload['config']['total_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
