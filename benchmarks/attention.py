"""Attention micro-benchmark: CMHA vs RoPE vs the literal CMHA reference.

Measures forward + backward wall time and peak memory of three attention kernels on
(B, H, T, D) = (1, 8, T, 64) inputs, causal, at T in {256, 1024, 4096} by default:

* ``cmha``      - :func:`complexformer.attention.functional.cmha`: ``polar_rotate`` of q and k
  (modulus, atan2 phase, delta * phase + bias + position * omega, cos/sin) followed by
  ``F.scaled_dot_product_attention``; gradients w.r.t. q, k, v, delta and bias.
* ``rope``      - ``apply_rope`` on q and k, then the same SDPA call (``attention``); the
  baseline CMHA must stay close to. Gradients w.r.t. q, k, v.
* ``reference`` - :func:`cmha_reference`, the literal eq. 1-9 with the (B, H, T, T, J) phase
  tensor; gradients w.r.t. q, k, v, delta and bias. It is only run where its estimated peak
  memory (``REF_BYTES_PER_ELEMENT`` x B*H*T*T*J x element size, the factor measured on the
  eager reference) fits under ``--ref-max-gib`` and under 60% of the memory available.

Each method runs eager and, unless ``--no-compile``, through ``torch.compile`` of the whole
forward function (kernel call plus the loss), ``dynamic=False``, so AOTAutograd compiles the
backward too; a compile failure is recorded as a note and that variant is skipped. One timed
step is ``loss = (f(q, k, v, ...) * w).sum()`` with a fixed random ``w`` and
``torch.autograd.grad(loss, inputs)``.

Timing: a first call (compilation, in compiled mode), then one profiled call for the peak
memory (it also counts as the first warm-up), the remaining ``--warmup`` calls, then
``--repeats`` timed rounds in which CMHA and RoPE of one (T, mode) are called round-robin
(rotating order), so machine noise hits them alike; the median is reported. The reference is
probed and timed after them, on its own: its multi-GiB step between theirs disturbed their
ratio (1.07 to 1.13 at T = 1024 in three runs of the same code). Every
measurement is made in the same process so that the ratios are comparable. To bound the run
time, a step slower than 1 s gets no extra warm-up, one slower than ``--max-seconds`` is timed
once, and one whose timed calls add up to more than ``--max-seconds`` stops after 3 samples
(in practice only the reference is affected; the JSON records the sample count ``n``).

Peak memory: the peak of the bytes allocated during one fwd + bwd step, over what was live
before it (the inputs and ``w`` are excluded; the output, saved activations, gradients and
kernel workspaces are included). On CPU it is computed from the torch profiler
(``profile_memory=True``): every allocation/free of torch's CPU allocator during the step, on
any thread, is replayed in time order and the running total's maximum is taken (see
``benchmarks/_common.py``). It is exact for tensor memory, so it separates the O(T D) memory of
cmha / rope from the O(T^2 J) memory of the reference. On CUDA it is
``torch.cuda.max_memory_allocated`` minus the memory allocated before the step.

Output: one line per measurement on stdout and a JSON record (default
``benchmarks/results/attention.json``) with the environment, every measurement with its raw
timings, and the ratios cmha/rope and reference/cmha per (T, mode). ``python -m
benchmarks.render`` turns it into the ``attention`` section of ``docs/benchmarks.md`` and
judges the targets declared in ``benchmarks/render/targets.py``.

    python -m benchmarks.attention --threads 1     # full run, a few minutes on 2 CPU cores
    python -m benchmarks.attention --quick         # smoke test, seconds (attention-quick.json)
    python -m benchmarks.attention --seq-lens 512 --repeats 3 --no-compile --out-json none
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks._common import (
    GIB,
    RESULTS_DIR,
    add_common_args,
    display_path,
    environment,
    first_line,
    load_avg,
    memory_available_bytes,
    optional_path,
    peak_memory,
    record,
    resolve_counts,
    resolve_device,
    resolve_dtype,
    source_fingerprint,
    time_call,
    time_interleaved,
    try_compile,
    write_record,
)
from complexformer.attention.functional import (
    apply_rope,
    attention,
    cmha,
    cmha_reference,
    rope_frequencies,
)

SECTION = "attention"
# The measured code: hashed before and after the run (edits made meanwhile are flagged).
SOURCES = (
    "complexformer/attention/functional.py",
    "complexformer/attention/polar.py",
    "complexformer/attention/rotary.py",
)
METHODS = ("cmha", "rope", "reference")
MODES = ("eager", "compiled")
DEFAULT_SEQ_LENS = (256, 1024, 4096)
QUICK_SEQ_LENS = (64, 128)
DEFAULT_JSON = RESULTS_DIR / "attention.json"
QUICK_JSON = RESULTS_DIR / "attention-quick.json"
# Peak bytes of the eager reference per element of its (B, H, T, T, J) tensor, in units of the
# element size: 7.0 measured at T = 256 (as_mn, delta * as_mn + bias, + dp, cos, lq * lk,
# their product and a backward buffer alive together). Used to decide whether it fits.
REF_BYTES_PER_ELEMENT = 7.0

# --------------------------------------------------------------------------- the kernels


def make_forward(method: str, layout: str) -> Callable:
    """The loss ``(f(q, k, v, ...) * w).sum()`` of ``method``; cmha and rope use pair ``layout``
    ("halves", what the model's attention uses, or "interleaved")."""

    def fwd_cmha(q, k, v, delta, bias, omega, w):
        out = cmha(q, k, v, delta, bias, omega=omega, is_causal=True, layout=layout)
        return (out * w).sum()

    def fwd_rope(q, k, v, delta, bias, omega, w):
        qr = apply_rope(q, 0, omega, layout)
        kr = apply_rope(k, 0, omega, layout)
        return (attention(qr, kr, v, is_causal=True) * w).sum()

    def fwd_reference(q, k, v, delta, bias, omega, w):
        return (cmha_reference(q, k, v, delta, bias, omega=omega, is_causal=True) * w).sum()

    return {"cmha": fwd_cmha, "rope": fwd_rope, "reference": fwd_reference}[method]


GRAD_WRT = {"cmha": 5, "rope": 3, "reference": 5}  # q, k, v (+ delta, bias)


def make_inputs(b: int, h: int, t: int, d: int, device, dtype, seed: int) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    j = d // 2

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(device=device, dtype=dtype)

    q, k, v = (rnd(b, h, t, d).requires_grad_() for _ in range(3))
    delta = rnd(h, j, scale=0.1, shift=1.0).requires_grad_()
    bias = rnd(h, j, scale=0.1).requires_grad_()
    w = rnd(b, h, t, d)
    omega = rope_frequencies(d, device=device)
    return {"q": q, "k": k, "v": v, "delta": delta, "bias": bias, "omega": omega, "w": w}


def make_step(fn: Callable, inp: dict[str, Any], method: str) -> Callable[[], None]:
    args = (inp["q"], inp["k"], inp["v"], inp["delta"], inp["bias"], inp["omega"], inp["w"])
    wrt = args[: GRAD_WRT[method]]

    def step() -> None:
        loss = fn(*args)
        torch.autograd.grad(loss, wrt)

    return step


def reference_estimate_bytes(b: int, h: int, t: int, d: int, dtype: torch.dtype) -> int:
    elem = torch.empty((), dtype=dtype).element_size()
    return int(REF_BYTES_PER_ELEMENT * b * h * t * t * (d // 2) * elem)


# --------------------------------------------------------------------------- measurement


def measure(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> dict:
    modes = ("eager",) if args.no_compile else MODES
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    b, h, d = args.batch, args.heads, args.head_dim
    avail = memory_available_bytes(device)
    ref_limit = args.ref_max_gib * GIB
    if avail is not None:
        ref_limit = min(ref_limit, 0.6 * avail)
    forwards = {m: make_forward(m, args.layout) for m in args.methods}
    compiled_fns: dict[str, Callable | None] = {}
    compile_notes: dict[str, str] = {}
    if not args.no_compile:
        for m in args.methods:
            compiled_fns[m], why = try_compile(forwards[m], dynamic=False)
            if why:
                compile_notes[m] = why
    else:
        notes.append("torch.compile variants not run (--no-compile).")

    for t in args.seq_lens:
        inp = make_inputs(b, h, t, d, device, dtype, args.seed)
        for mode in modes:
            steps: dict[str, Callable[[], None]] = {}
            first: dict[str, float] = {}
            for m in args.methods:
                rec = {
                    "T": t,
                    "mode": mode,
                    "method": m,
                    "B": b,
                    "H": h,
                    "D": d,
                    "dtype": str(dtype).removeprefix("torch."),
                    "status": "ok",
                }
                if m == "reference":
                    est = reference_estimate_bytes(b, h, t, d, dtype)
                    rec["estimated_peak_mib"] = est / 2**20
                    if est > ref_limit:
                        rec["status"] = "skipped"
                        rec["note"] = (
                            f"estimated peak {est / GIB:.1f} GiB > limit {ref_limit / GIB:.1f} GiB"
                        )
                        records.append(rec)
                        continue
                fn = forwards[m] if mode == "eager" else compiled_fns.get(m)
                if fn is None:
                    rec["status"] = "skipped"
                    rec["note"] = compile_notes.get(m, "compile unavailable")
                    records.append(rec)
                    continue
                step = make_step(fn, inp, m)
                try:
                    first[m] = time_call(step, device)
                except Exception as exc:  # a compile failure shows on the first call
                    if mode == "eager":
                        raise
                    rec["status"] = "skipped"
                    rec["note"] = f"compile failed: {first_line(exc)}"
                    compile_notes.setdefault(m, rec["note"])
                    compiled_fns[m] = None
                    records.append(rec)
                    continue
                rec["first_call_s"] = first[m]
                steps[m] = step
                records.append(rec)
            # After the first call (which compiles, in compiled mode) one profiled call gives
            # the peak memory and serves as warm-up and as a probe of the step's cost: a step
            # that takes more than a second gets no further warm-up, one that takes more than
            # --max-seconds is timed once.
            # CMHA and RoPE are timed round-robin between themselves, the reference on its own
            # afterwards: its 7 GiB step between theirs made their ratio swing from run to run.
            mems, timing = {}, {}
            for group in (
                [m for m in steps if m != "reference"],
                [m for m in steps if m == "reference"],
            ):
                warm, reps = {}, {}
                for m in group:
                    t_probe = time.perf_counter()
                    mems[m] = peak_memory(steps[m], device)
                    probe = time.perf_counter() - t_probe
                    warm[m] = max(args.warmup - 1, 0) if probe < 1.0 else 0
                    reps[m] = args.repeats if probe <= args.max_seconds else 1
                timing |= time_interleaved(
                    {m: steps[m] for m in group},
                    device=device,
                    warmup=warm,
                    repeats=reps,
                    max_seconds=args.max_seconds,
                )
            for m in steps:
                rec = next(
                    r for r in records if r["T"] == t and r["mode"] == mode and r["method"] == m
                )
                rec["time"] = timing[m]
                rec["time_ms"] = timing[m]["median_ms"]
                rec["peak_mib"] = mems[m]["peak_mib"]
                rec["peak_bytes"] = mems[m]["peak_bytes"]
                rec["memory_method"] = mems[m]["method"]
                print(
                    f"  T={t:5d} {mode:8s} {m:9s} {rec['time_ms']:10.2f} ms "
                    f"{rec['peak_mib']:10.1f} MiB  (n={timing[m]['n']}, "
                    f"first call {first[m]:.2f} s)",
                    flush=True,
                )
            del steps
            gc.collect()
        del inp
        gc.collect()
    for m, why in compile_notes.items():
        notes.append(f"{m}: compiled variant skipped ({why}).")
    return {"records": records, "notes": notes}


def _get(records, t, mode, method) -> dict | None:
    for r in records:
        if r["T"] == t and r["mode"] == mode and r["method"] == method and r["status"] == "ok":
            return r
    return None


def _div(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def ratios(records: list[dict], t: int, mode: str) -> dict[str, float | None]:
    c, r, ref = (_get(records, t, mode, m) for m in METHODS)
    val = lambda rec, key: None if rec is None else rec.get(key)  # noqa: E731
    return {
        "cmha_rope_time": _div(val(c, "time_ms"), val(r, "time_ms")),
        "cmha_rope_mem": _div(val(c, "peak_mib"), val(r, "peak_mib")),
        "ref_cmha_time": _div(val(ref, "time_ms"), val(c, "time_ms")),
        "ref_cmha_mem": _div(val(ref, "peak_mib"), val(c, "peak_mib")),
    }


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.attention",
        description="Forward+backward time and peak memory of cmha (polar rotation + SDPA), "
        "rope (apply_rope + SDPA) and cmha_reference (literal (B,H,T,T,J) form), eager and "
        "torch.compile'd. Writes a JSON record (render it with python -m benchmarks.render).",
    )
    p.add_argument(
        "--seq-lens",
        type=int,
        nargs="+",
        default=None,
        metavar="T",
        help="sequence lengths to measure (default: 256 1024 4096; 64 128 with --quick).",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test in a few seconds: T in {64, 128}, 1 repeat, no warm-up, no "
        "compile; writes benchmarks/results/attention-quick.json unless --out-json is given.",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=list(METHODS),
        help="methods to measure (default: all three).",
    )
    p.add_argument(
        "--layout",
        choices=("halves", "interleaved"),
        default="halves",
        help="pair layout of cmha and rope: halves (pairs (x[j], x[j+D/2]), what the model "
        "uses) or interleaved (the paper's (x[2j], x[2j+1])); default: halves.",
    )
    p.add_argument("--batch", type=int, default=1, help="batch size B (default: 1).")
    p.add_argument("--heads", type=int, default=8, help="number of heads H (default: 8).")
    p.add_argument("--head-dim", type=int, default=64, help="head dimension D, even (default: 64).")
    p.add_argument(
        "--ref-max-gib",
        type=float,
        default=8.0,
        help="run the reference only where its estimated peak memory "
        f"({REF_BYTES_PER_ELEMENT:g} x B*H*T*T*(D/2) x element size) is at most this "
        "many GiB and at most 60%% of the available memory (default: 8).",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=15.0,
        help="time budget per method and (T, mode): a step slower than this is "
        "timed once, and timing stops after 3 samples once their sum exceeds it; "
        "keeps the slow reference short (default: 15).",
    )
    add_common_args(p, default_json=DEFAULT_JSON, quick_repeats=1, quick_warmup=0)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.quick:
        args.no_compile = True
    resolve_counts(args, quick=args.quick)
    if args.seq_lens is None:
        args.seq_lens = list(QUICK_SEQ_LENS if args.quick else DEFAULT_SEQ_LENS)
    if args.head_dim % 2 or args.head_dim <= 0:
        raise SystemExit("--head-dim must be a positive even integer")
    if args.threads:
        torch.set_num_threads(args.threads)
    out_json = optional_path(args.out_json, QUICK_JSON if args.quick else DEFAULT_JSON)
    device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)
    torch.manual_seed(args.seed)

    env = environment(device)
    env["sources"] = source_fingerprint(SOURCES)
    load = env.get("load_avg_1m")
    if (
        device.type == "cpu"
        and load is not None
        and torch.get_num_threads() > 1
        and (load >= 0.5 * (env["cpu_count"] or 1))
    ):
        print(
            f"warning: load average {load:.1f} on {env['cpu_count']} CPUs; with "
            f"{torch.get_num_threads()} intra-op threads OpenMP barriers stall on a busy "
            "machine and times can be many-fold too slow (consider --threads 1).",
            flush=True,
        )
    print(
        f"attention benchmark: torch {env['torch']}, {env['device']}, {env['cpu_model']}, "
        f"{env['torch_threads']} threads, dtype {args.dtype}, T={args.seq_lens}, "
        f"repeats={args.repeats}, warmup={args.warmup}, compile={not args.no_compile}",
        flush=True,
    )
    t0 = time.perf_counter()
    result = measure(args, device, dtype)
    if source_fingerprint(SOURCES) != env["sources"]:
        msg = (
            f"WARNING: {', '.join(SOURCES)} changed while the benchmark ran; the numbers "
            "may mix versions of the code (hashes in the JSON are from the start)."
        )
        print(msg, flush=True)
        result["notes"].append(msg)
    modes = ("eager",) if args.no_compile else MODES
    per_t = {
        f"{t}/{mode}": ratios(result["records"], t, mode) for t in args.seq_lens for mode in modes
    }
    env["load_avg_1m_end"] = load_avg()
    config = {
        "argv": " ".join(argv),
        "B": args.batch,
        "H": args.heads,
        "D": args.head_dim,
        "layout": args.layout,
        "dtype": args.dtype,
        "seq_lens": args.seq_lens,
        "methods": args.methods,
        "modes": list(modes),
        "repeats": args.repeats,
        "warmup": args.warmup,
        "max_seconds": args.max_seconds,
        "ref_max_gib": args.ref_max_gib,
        "ref_bytes_per_element": REF_BYTES_PER_ELEMENT,
        "seed": args.seed,
        "out_json": display_path(out_json),
    }
    payload = record(
        SECTION,
        environment=env,
        config=config,
        records=result["records"],
        ratios=per_t,
        notes=result["notes"],
        total_seconds=round(time.perf_counter() - t0, 1),
    )
    for key, vals in per_t.items():
        shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in vals.items())
        print(f"  ratios {key}: {shown}", flush=True)
    for n in payload["notes"]:
        print(f"note: {n}", flush=True)
    write_record(out_json, payload)
    print(f"total {payload['total_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
