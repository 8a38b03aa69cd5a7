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
``--repeats`` timed rounds in which the methods of one (T, mode) are called round-robin
(rotating order), so machine noise hits them alike; the median is reported. Every
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

Outputs: a table on stdout, a JSON record (default ``benchmarks/results/attention.json``) with
the environment and every measurement, and the section between ``<!-- attention:start -->``
and ``<!-- attention:end -->`` of ``docs/benchmarks.md`` (other sections are kept), with
pass/fail lines for the performance targets in ``TARGETS``.

    python benchmarks/attention.py                 # full run, a few minutes on 2 CPU cores
    python benchmarks/attention.py --quick         # smoke test, seconds; writes no markdown
    python benchmarks/attention.py --seq-lens 512 --repeats 3 --no-compile --out-md none
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    DOCS_MD,
    GIB,
    REPO_ROOT,
    RESULTS_DIR,
    add_common_args,
    ensure_repo_on_path,
    environment,
    first_line,
    fmt_num,
    fmt_ratio,
    markdown_table,
    memory_available_bytes,
    optional_path,
    peak_memory,
    resolve_counts,
    resolve_device,
    resolve_dtype,
    source_fingerprint,
    text_table,
    time_call,
    time_interleaved,
    try_compile,
    update_markdown_section,
    write_json,
)

ensure_repo_on_path()
from complexformer.attention.functional import (  # noqa: E402
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

# (name, metric, mode, T, threshold, comparison). Metrics: ratio keys of `ratios()`.
TARGETS = (
    ("cmha/rope time, eager, T=1024", "cmha_rope_time", "eager", 1024, 1.25, "<="),
    ("cmha/rope time, compiled, T=1024", "cmha_rope_time", "compiled", 1024, 1.10, "<="),
    ("cmha/rope peak memory, eager, T=4096", "cmha_rope_mem", "eager", 4096, 1.2, "<="),
    ("cmha/rope peak memory, compiled, T=4096", "cmha_rope_mem", "compiled", 4096, 1.2, "<="),
    (
        "reference/cmha time (cmha speed-up), eager, T=1024",
        "ref_cmha_time",
        "eager",
        1024,
        20.0,
        ">=",
    ),
    (
        "reference/cmha time (cmha speed-up), compiled, T=1024",
        "ref_cmha_time",
        "compiled",
        1024,
        20.0,
        ">=",
    ),
)


# --------------------------------------------------------------------------- the kernels


# Pair layout of cmha and rope; set from --layout. "halves" is what the model's attention uses.
LAYOUT = {"value": "halves"}


def fwd_cmha(q, k, v, delta, bias, omega, w):
    out = cmha(q, k, v, delta, bias, omega=omega, is_causal=True, layout=LAYOUT["value"])
    return (out * w).sum()


def fwd_rope(q, k, v, delta, bias, omega, w):
    qr = apply_rope(q, 0, omega, LAYOUT["value"])
    kr = apply_rope(k, 0, omega, LAYOUT["value"])
    return (attention(qr, kr, v, is_causal=True) * w).sum()


def fwd_reference(q, k, v, delta, bias, omega, w):
    return (cmha_reference(q, k, v, delta, bias, omega=omega, is_causal=True) * w).sum()


FORWARDS: dict[str, Callable] = {"cmha": fwd_cmha, "rope": fwd_rope, "reference": fwd_reference}
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
    compiled_fns: dict[str, Callable | None] = {}
    compile_notes: dict[str, str] = {}
    if not args.no_compile:
        for m in args.methods:
            compiled_fns[m], why = try_compile(FORWARDS[m], dynamic=False)
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
                fn = FORWARDS[m] if mode == "eager" else compiled_fns.get(m)
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
            warm, reps, mems = {}, {}, {}
            for m, step in steps.items():
                t_probe = time.perf_counter()
                mems[m] = peak_memory(step, device)
                probe = time.perf_counter() - t_probe
                warm[m] = max(args.warmup - 1, 0) if probe < 1.0 else 0
                reps[m] = args.repeats if probe <= args.max_seconds else 1
            timing = time_interleaved(
                steps, device=device, warmup=warm, repeats=reps, max_seconds=args.max_seconds
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


def evaluate_targets(records: list[dict], seq_lens, modes) -> list[dict]:
    out = []
    for name, metric, mode, t, thr, cmp in TARGETS:
        res = {
            "target": name,
            "metric": metric,
            "mode": mode,
            "T": t,
            "threshold": thr,
            "comparison": cmp,
            "value": None,
            "pass": None,
        }
        if t not in seq_lens or mode not in modes:
            res["note"] = "not measured in this run"
        else:
            v = ratios(records, t, mode)[metric]
            if v is None:
                res["note"] = "not measured (a method was skipped)"
            else:
                res["value"] = v
                res["pass"] = bool(v <= thr) if cmp == "<=" else bool(v >= thr)
        out.append(res)
    return out


# --------------------------------------------------------------------------- reporting

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


def table_rows(records: list[dict]) -> list[list[str]]:
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
        rows.append(
            [
                str(r["T"]),
                r["mode"],
                r["method"],
                fmt_num(r["time_ms"], 2),
                (
                    f"{fmt_num(r['time']['p25_ms'], 1)}-{fmt_num(r['time']['p75_ms'], 1)}"
                    if r["time"]["n"] >= 2
                    else "-"
                ),
                str(r["time"]["n"]),
                fmt_num(r["peak_mib"], 1),
                fmt_ratio(t_rope),
                fmt_ratio(m_rope),
                fmt_ratio(t_cmha) if r["method"] != "cmha" else fmt_ratio(1.0),
            ]
        )
    return rows


def target_lines(targets: list[dict]) -> list[str]:
    lines = []
    for tg in targets:
        want = f"{tg['comparison']} {tg['threshold']:g}"
        if tg["pass"] is None:
            lines.append(f"- **N/A** {tg['target']}: target {want}; {tg.get('note', '')}")
        else:
            tag = "PASS" if tg["pass"] else "FAIL"
            lines.append(f"- **{tag}** {tg['target']}: {tg['value']:.2f} (target {want})")
    return lines


def _fmt_load(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def markdown_body(payload: dict) -> str:
    env, cfg = payload["environment"], payload["config"]
    recs = payload["records"]
    cmd = "python benchmarks/attention.py" + (f" {cfg['argv']}" if cfg["argv"] else "")
    out = [
        "## Attention kernels: CMHA vs RoPE vs the literal reference",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch threads, "
        f"{env['cpu_count']} CPUs, capability {env.get('cpu_capability')}), torch "
        f"{env['torch']}, device `{env['device']}`"
        + (f" ({env['cuda_device']})" if env.get("cuda_device") else "")
        + f", dtype {cfg['dtype']}. Command: `{cmd}`. Code measured: "
        + ", ".join(f"`{p}` sha256 `{h}`" for p, h in env.get("sources", {}).items())
        + f". Load average (1 min) {_fmt_load(env.get('load_avg_1m'))} at the start, "
        f"{_fmt_load(env.get('load_avg_1m_end'))} at the end; run time "
        f"{cfg.get('total_seconds') or 0:.0f} s.",
        "",
        f"B={cfg['B']}, H={cfg['H']}, D={cfg['D']}, pair layout "
        f"`{cfg.get('layout', 'interleaved')}` for cmha and rope, causal; one step = forward + "
        "`(out * w).sum()` + backward (grads of q, k, v, and delta, bias for cmha / reference). "
        f"Time: median of n (up to {cfg['repeats']}) interleaved repeats after the first "
        f"call and up to {cfg['warmup']} warm-up call(s), the first of which is the profiled "
        "memory call; slow reference steps get fewer (see `--max-seconds`). "
        "Peak: extra memory allocated during one step "
        f"({recs[0].get('memory_method', 'n/a') if recs else 'n/a'}). Ratio columns divide "
        "by the rope / cmha row of the same T and mode. Raw data: "
        f"`{cfg['out_json'] or '(not written)'}`.",
        "",
        markdown_table(HEADERS, table_rows(recs), align="rllrrrrrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload["targets"]),
    ]
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
    if notes:
        out += ["", "Notes:", "", *[f"- {n}" for n in notes]]
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI


def _load_avg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _display_path(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Forward+backward time and peak memory of cmha (polar rotation + SDPA), "
        "rope (apply_rope + SDPA) and cmha_reference (literal (B,H,T,T,J) form), eager and "
        "torch.compile'd. Writes a JSON record and the 'attention' section of "
        "docs/benchmarks.md, and prints the table.",
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
        "compile; writes benchmarks/results/attention-quick.json and no markdown "
        "unless --out-json / --out-md are given.",
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
    p.add_argument(
        "--from-json",
        type=str,
        default=None,
        metavar="PATH",
        help="measure nothing: re-render the table and the markdown section from a "
        "JSON record written by an earlier run (e.g. after editing this script's "
        "report format).",
    )
    add_common_args(p, default_json=DEFAULT_JSON, quick_repeats=1, quick_warmup=0)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.from_json:
        return render_only(args)
    if args.quick:
        args.no_compile = True
    resolve_counts(args, quick=args.quick)
    if args.seq_lens is None:
        args.seq_lens = list(QUICK_SEQ_LENS if args.quick else DEFAULT_SEQ_LENS)
    if args.head_dim % 2 or args.head_dim <= 0:
        raise SystemExit("--head-dim must be a positive even integer")
    if args.threads:
        torch.set_num_threads(args.threads)
    LAYOUT["value"] = args.layout
    out_json = optional_path(args.out_json, QUICK_JSON if args.quick else DEFAULT_JSON)
    out_md = optional_path(args.out_md, None if args.quick else DOCS_MD)
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
    targets = evaluate_targets(result["records"], args.seq_lens, modes)
    per_t = {
        f"{t}/{mode}": ratios(result["records"], t, mode) for t in args.seq_lens for mode in modes
    }
    payload = {
        "benchmark": SECTION,
        "environment": env,
        "config": {
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
            "out_json": _display_path(out_json),
            "total_seconds": None,
        },
        "records": result["records"],
        "ratios": per_t,
        "targets": targets,
        "notes": result["notes"],
    }
    payload["config"]["total_seconds"] = round(time.perf_counter() - t0, 1)
    payload["environment"]["load_avg_1m_end"] = _load_avg()

    if out_json is not None:
        print(f"wrote {write_json(out_json, payload)}")
    report(payload, out_md)
    print(f"total {payload['config']['total_seconds']:.1f} s")
    return 0


def report(payload: dict, out_md: Path | None) -> None:
    """Print the table, targets and notes; update the markdown section if asked."""
    print()
    print(text_table(HEADERS, table_rows(payload["records"])))
    print()
    for line in target_lines(payload["targets"]):
        print(line.replace("**", ""))
    for n in payload["notes"]:
        print(f"note: {n}")
    if out_md is not None:
        md = update_markdown_section(out_md, SECTION, markdown_body(payload))
        print(f"updated section '{SECTION}' of {md}")


def render_only(args: argparse.Namespace) -> int:
    payload = json.loads(Path(args.from_json).read_text())
    if payload.get("benchmark") != SECTION:
        raise SystemExit(f"{args.from_json} is not a record of the {SECTION!r} benchmark")
    cfg = payload["config"]
    # Re-evaluate the targets with the current TARGETS table.
    payload["targets"] = evaluate_targets(payload["records"], cfg["seq_lens"], cfg["modes"])
    report(payload, optional_path(args.out_md, DOCS_MD))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
