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

Timing: :func:`benchmarks._common.time_interleaved` (warm-up calls, then rounds in rotating
order, the median reported). Peak memory (part 1 only, unless ``--no-memory``):
:func:`benchmarks._common.peak_memory`, the peak of the bytes allocated during one step over
what was live before it (CPU: replay of the torch profiler's allocation events).

Output: one line per measurement on stdout and ``benchmarks/results/complex_attention.json``
(the environment, raw timings and the speed-ups over complextorch per T); ``python -m
benchmarks.render`` turns it into the ``complex_attention`` section of ``docs/benchmarks.md``
and judges the target declared in ``benchmarks/render/targets.py``.

    python -m benchmarks.complex_attention --threads 1   # full run, a few minutes on CPU
    python -m benchmarks.complex_attention --quick       # smoke test (complex_attention-quick.json)
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import complexformer.nn as cnn
from benchmarks._common import (
    RESULTS_DIR,
    add_common_args,
    environment,
    optional_path,
    peak_memory,
    record,
    resolve_counts,
    resolve_device,
    time_interleaved,
    write_record,
)

SECTION = "complex_attention"
DEFAULT_SEQ_LENS = (256, 1024)
QUICK_SEQ_LENS = (64, 128)
DEFAULT_JSON = RESULTS_DIR / "complex_attention.json"
QUICK_JSON = RESULTS_DIR / "complex_attention-quick.json"
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
                f"{_mib(rec['peak_mib']):>10s} MiB (n={timing[name]['n']})",
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


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


# --------------------------------------------------------------------------- ratios


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


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.complex_attention",
        description="Forward+backward time and peak memory of complexformer.nn."
        "MultiheadAttention vs complextorch 2.1.1's, the cost of masks and of KV-cache "
        "decoding. Eager only (--no-compile is accepted and ignored: inductor does not "
        "support complex tensors). Writes a JSON record (render it with "
        "python -m benchmarks.render).",
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
        "benchmarks/results/complex_attention-quick.json unless --out-json is given.",
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
    config = {
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
    }
    payload = record(
        SECTION,
        environment=env,
        config=config,
        records=records,
        ratios={str(t): speedups(records, t) for t in args.seq_lens},
        notes=notes,
        total_seconds=round(time.perf_counter() - t0, 1),
    )
    for t, vals in payload["ratios"].items():
        shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in vals.items())
        print(f"  speed-ups T={t}: {shown}", flush=True)
    write_record(out_json, payload)
    print(f"total {payload['total_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
