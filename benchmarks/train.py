"""Language-model benchmark: training throughput of CMHA vs RoPE, and KV-cache generation.

Two measurements on models of the same shape (default: the ``tiny`` preset, vocabulary 8192,
context ``--seq-len`` 512):

* **Training tokens/s** of ``pos_scheme=cmha`` and ``pos_scheme=rope``: one step is forward,
  backward and an AdamW update on a (B, T) batch of random token ids; the two models are
  timed round-robin in one process (median of ``--repeats`` steps after warm-up), eager and,
  with ``--compile``, under ``torch.compile``. Target: cmha/rope >= 0.9 eager at T = 512.
* **Against a minimal model**: the same training step of our model (rope and cmha) and of
  :class:`benchmarks.minimal_gpt.MinimalGPT` (nanoGPT-style: fused qkv, rotate-half RoPE,
  SDPA, tied head; the same shapes and parameter count), timed round-robin in one process
  (``--ref-repeats``). Targets: ours / minimal <= 1.03 (rope) and <= 1.08 (cmha).
* **Generation tokens/s** of the cmha model, ``--new-tokens`` (512) greedy tokens after a
  16-token prompt, with the KV cache (rotated keys, one new position per step) and without it
  (every step recomputes the whole sequence). Target: >= 5x with the cache. The rope model's
  KV-cache ``generate`` is timed round-robin against the minimal model's decoding loop
  (:func:`benchmarks.minimal_gpt.decode_greedy`) with the same weights (same tokens).
  Target: ours / minimal tokens/s >= 0.95.
* **Peak memory of the loss** (``--memory``): one forward + backward of the ``--memory-preset``
  (paper) model at B = ``--memory-batch`` (8), T = ``--memory-seq-len`` (1024), float32, with
  the loss of earlier versions (logits sliced, ``logits[:, :-1]``), the plain loss (labels
  shifted) and the chunked linear + cross-entropy (``chunked_loss="always"``). Target:
  chunked / earlier <= 0.6.
* **Profile** (``--profile``): the operators with the most self CPU time in one training step
  of our rope model and of the minimal model (``torch.profiler``).

Writes ``benchmarks/results/train.json`` (the environment, raw timings and the ratios);
``python -m benchmarks.render`` turns it into the ``train`` section of ``docs/benchmarks.md``
and judges the targets declared in ``benchmarks/render/targets.py``.

    python -m benchmarks.train --threads 1 --profile --memory
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from benchmarks._common import (
    RESULTS_DIR,
    add_common_args,
    environment,
    optional_path,
    peak_memory,
    record,
    resolve_counts,
    time_interleaved,
    try_compile,
    write_record,
)
from benchmarks.minimal_gpt import MinimalGPT, decode_greedy
from complexformer.models import ComplexFormerLM, preset_config

SECTION = "train"
DEFAULT_JSON = RESULTS_DIR / "train.json"


def _loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    out = model(batch, labels=batch)
    return out if isinstance(out, torch.Tensor) else out.loss  # MinimalGPT returns the loss


def train_step_fn(model: torch.nn.Module, batch: torch.Tensor):
    """One training step (forward, backward, AdamW) of ours or of the minimal model."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> None:
        loss = _loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _models(args, scheme: str, seq_len: int) -> tuple[ComplexFormerLM, MinimalGPT]:
    """Our model of ``scheme`` and the minimal model with the same shapes (and, for rope,
    the same weights: both then compute the same function)."""
    cfg = preset_config(args.preset, vocab_size=args.vocab, max_seq_len=seq_len)
    torch.manual_seed(args.seed)
    ours = ComplexFormerLM(cfg.replace(pos_scheme=scheme))
    ref = MinimalGPT(cfg.replace(pos_scheme="rope"))
    state = {k: v for k, v in ours.state_dict().items() if "adapt_" not in k}
    ref.load_state_dict(state, strict=True)
    return ours, ref


def measure_vs_reference(args) -> list[dict]:
    """Our training step (rope, cmha) against the minimal model's, round-robin."""
    g = torch.Generator().manual_seed(args.seed)
    batch = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=g)
    fns, counts, losses = {}, {}, {}
    for scheme in ("rope", "cmha"):
        ours, ref = _models(args, scheme, args.seq_len)
        counts[scheme] = sum(p.numel() for p in ours.parameters())
        counts["minimal"] = sum(p.numel() for p in ref.parameters())
        with torch.no_grad():
            losses[scheme] = float(_loss(ours, batch))
            if scheme == "rope":  # the minimal model timed: the rope model's weights
                losses["minimal"] = float(_loss(ref, batch))
        fns[scheme] = train_step_fn(ours.train(), batch)
        if scheme == "rope":
            fns["minimal"] = train_step_fn(ref.train(), batch)
    res = time_interleaved(fns, device="cpu", warmup=args.warmup, repeats=args.ref_repeats)
    records = []
    for name in ("rope", "cmha", "minimal"):
        ms = res[name]["median_ms"]
        records.append(
            {
                "kind": "vs_reference",
                "model": name,
                "T": args.seq_len,
                "B": args.batch,
                "parameters": counts[name],
                "initial_loss": losses[name],
                **res[name],
                "tokens_per_s": args.batch * args.seq_len / (ms / 1e3),
            }
        )
        print(f"step {name:8s} {ms:8.1f} ms ({counts[name]:,} parameters)", flush=True)
    return records


def measure_generation_vs_reference(args) -> list[dict]:
    """Greedy KV-cache decoding: ``generate`` of our rope model against the minimal loop."""
    total = 16 + args.new_tokens
    ours, ref = _models(args, "rope", max(total, args.seq_len))
    ours.eval(), ref.eval()
    prompt = torch.randint(0, args.vocab, (1, 16), generator=torch.Generator().manual_seed(1))
    outputs = {}

    def run_ours() -> None:
        outputs["ours"] = ours.generate(prompt, args.new_tokens, temperature=0.0)

    def run_ref() -> None:
        outputs["minimal"] = decode_greedy(ref, prompt, args.new_tokens)

    res = time_interleaved(
        {"ours": run_ours, "minimal": run_ref}, device="cpu", warmup=1, repeats=args.ref_repeats
    )
    same = bool(torch.equal(outputs["ours"], outputs["minimal"]))
    records = []
    for name in ("ours", "minimal"):
        ms = res[name]["median_ms"]
        records.append(
            {
                "kind": "generate_vs_reference",
                "model": name,
                "scheme": "rope",
                "new_tokens": args.new_tokens,
                **res[name],
                "tokens_per_s": args.new_tokens / (ms / 1e3),
                "same_tokens": same,
            }
        )
        print(f"decode {name:8s} {args.new_tokens / (ms / 1e3):8.1f} tok/s", flush=True)
    return records


def legacy_loss(model: ComplexFormerLM, batch: torch.Tensor) -> torch.Tensor:
    """The loss of earlier versions: the (B, T, V) logits sliced to (B, T-1, V)."""
    logits = model(batch).logits
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1)
    )


LOSS_VARIANTS = ("sliced_logits", "plain", "chunked")


def measure_loss_memory(args) -> list[dict]:
    """Peak memory of one forward + backward of the ``--memory-preset`` model per loss."""
    b, t = args.memory_batch, args.memory_seq_len
    cfg = preset_config(args.memory_preset, max_seq_len=t, dropout=0.0)
    g = torch.Generator().manual_seed(args.seed)
    batch = torch.randint(0, cfg.vocab_size, (b, t), generator=g)
    torch.manual_seed(args.seed)
    model = ComplexFormerLM(cfg).train()
    records, grads = [], {}
    for variant in LOSS_VARIANTS:
        mode = {"plain": "never", "chunked": "always"}.get(variant, "never")
        model.config = cfg.replace(chunked_loss=mode)
        model.zero_grad(set_to_none=True)
        seen: dict[str, float] = {}
        loss_fn = legacy_loss if variant == "sliced_logits" else _loss

        def step(loss_fn=loss_fn, seen=seen) -> None:
            loss = loss_fn(model, batch)
            loss.backward()
            seen["loss"] = float(loss.detach())

        t0 = time.perf_counter()
        peak = peak_memory(step, "cpu")
        grads[variant] = model.lm_head.weight.grad.clone()
        diff = (grads[variant] - grads["sliced_logits"]).abs().max() / grads[
            "sliced_logits"
        ].abs().max()
        records.append(
            {
                "kind": "loss_memory",
                "loss": variant,
                "preset": args.memory_preset,
                "B": b,
                "T": t,
                "V": cfg.vocab_size,
                **peak,
                "seconds": time.perf_counter() - t0,
                "value": seen["loss"],
                "head_grad_rel_diff": float(diff),
            }
        )
        print(f"memory {variant:14s} {peak['peak_mib']:9.0f} MiB loss {seen['loss']:.6f}")
    model.config = cfg
    return records


def profile_steps(args, top: int = 12) -> list[dict]:
    """The operators with the most self CPU time in one step of ours (rope) and the minimal."""
    g = torch.Generator().manual_seed(args.seed)
    batch = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=g)
    ours, ref = _models(args, "rope", args.seq_len)
    records = []
    for name, model in (("rope", ours), ("minimal", ref)):
        step = train_step_fn(model.train(), batch)
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events) or 1.0
        rows = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
        records.append(
            {
                "kind": "profile",
                "model": name,
                "total_self_ms": total / 1e3,
                "ops": [
                    {
                        "name": e.key,
                        "self_ms": e.self_cpu_time_total / 1e3,
                        "percent": 100.0 * e.self_cpu_time_total / total,
                        "calls": e.count,
                    }
                    for e in rows
                ],
            }
        )
        print(f"profile {name}: {total / 1e3:.0f} ms of self CPU time", flush=True)
    return records


def measure_training(args, schemes=("cmha", "rope")) -> list[dict]:
    records = []
    g = torch.Generator().manual_seed(args.seed)
    base = preset_config(args.preset, vocab_size=args.vocab, max_seq_len=args.seq_len)
    batch = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=g)
    modes = ("eager",) if args.no_compile else ("eager", "compiled")
    for mode in modes:
        fns, notes = {}, {}
        for scheme in schemes:
            torch.manual_seed(args.seed)
            model = ComplexFormerLM(base.replace(pos_scheme=scheme)).train()
            if mode == "compiled":
                compiled, err = try_compile(model)
                if compiled is None:
                    notes[scheme] = err
                    continue
                model = compiled
            fns[scheme] = train_step_fn(model, batch)
            if mode == "compiled":
                fns[scheme]()  # compile outside the timed rounds
        res = time_interleaved(fns, device="cpu", warmup=args.warmup, repeats=args.repeats)
        for scheme in schemes:
            rec = {
                "kind": "train",
                "mode": mode,
                "scheme": scheme,
                "T": args.seq_len,
                "B": args.batch,
            }
            if scheme in res:
                ms = res[scheme]["median_ms"]
                rec.update(res[scheme], tokens_per_s=args.batch * args.seq_len / (ms / 1e3))
            else:
                rec["note"] = notes.get(scheme, "skipped")
            records.append(rec)
            tps = rec.get("tokens_per_s")
            shown = "-" if tps is None else f"{tps:,.0f}"
            print(f"train {mode:8s} {scheme:5s} {shown} tok/s", flush=True)
    return records


def measure_generation(args) -> list[dict]:
    torch.manual_seed(args.seed)
    total = 16 + args.new_tokens
    cfg = preset_config(args.preset, vocab_size=args.vocab, max_seq_len=max(total, args.seq_len))
    model = ComplexFormerLM(cfg).eval()
    prompt = torch.randint(0, args.vocab, (1, 16), generator=torch.Generator().manual_seed(1))
    records, outputs = [], {}
    for use_cache in (True, False):
        model.generate(prompt, 8, temperature=0.0, use_cache=use_cache)  # warm-up
        t0 = time.perf_counter()
        outputs[use_cache] = model.generate(
            prompt, args.new_tokens, temperature=0.0, use_cache=use_cache
        )
        dt = time.perf_counter() - t0
        records.append(
            {
                "kind": "generate",
                "scheme": "cmha",
                "use_cache": use_cache,
                "new_tokens": args.new_tokens,
                "seconds": dt,
                "tokens_per_s": args.new_tokens / dt,
            }
        )
        print(f"generate cache={use_cache}: {args.new_tokens / dt:,.1f} tok/s", flush=True)
    same = bool(torch.equal(outputs[True], outputs[False]))
    for r in records:
        r["same_tokens"] = same
    return records


def ratios(records: list[dict]) -> dict[str, float | None]:
    """Training tokens/s cmha / rope per mode, and generation tokens/s with / without cache."""
    out: dict[str, float | None] = {}
    tr = {(r["mode"], r["scheme"]): r.get("tokens_per_s") for r in records if r["kind"] == "train"}
    for mode in ("eager", "compiled"):
        c, r = tr.get((mode, "cmha")), tr.get((mode, "rope"))
        if (mode, "cmha") in tr:
            out[f"train_cmha_rope/{mode}"] = c / r if c and r else None
    gen = {r["use_cache"]: r["tokens_per_s"] for r in records if r["kind"] == "generate"}
    out["generate_cache_speedup"] = gen[True] / gen[False] if len(gen) == 2 else None
    ref = {r["model"]: r["median_ms"] for r in records if r["kind"] == "vs_reference"}
    for scheme in ("rope", "cmha"):
        if scheme in ref and ref.get("minimal"):
            out[f"step_vs_minimal/{scheme}"] = ref[scheme] / ref["minimal"]
    dec = {r["model"]: r["tokens_per_s"] for r in records if r["kind"] == "generate_vs_reference"}
    if len(dec) == 2:
        out["generate_vs_minimal"] = dec["ours"] / dec["minimal"]
    mem = {r["loss"]: r["peak_bytes"] for r in records if r["kind"] == "loss_memory"}
    if mem.get("sliced_logits"):
        for variant in ("plain", "chunked"):
            if variant in mem:
                out[f"loss_memory/{variant}_vs_sliced"] = mem[variant] / mem["sliced_logits"]
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.train",
        description=__doc__.split("\n\n")[0] + " Writes a JSON record (render it with "
        "python -m benchmarks.render).",
    )
    p.add_argument("--preset", default="tiny", help="model preset (default: tiny).")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size (default: 8192).")
    p.add_argument("--seq-len", type=int, default=512, help="training context T (default: 512).")
    p.add_argument("--batch", type=int, default=8, help="training batch B (default: 8).")
    p.add_argument(
        "--new-tokens",
        type=int,
        default=512,
        help="generated tokens per measurement (default: 512).",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="also time torch.compile'd training (slow to compile on CPU).",
    )
    p.add_argument(
        "--ref-repeats",
        type=int,
        default=15,
        metavar="N",
        help="timed rounds of ours against the minimal model (default: 15).",
    )
    p.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the comparisons with the minimal model.",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also profile one step of ours (rope) and of the minimal model.",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="also measure the peak memory of the loss variants (minutes: the paper model).",
    )
    p.add_argument("--memory-preset", default="paper", help="preset of --memory (paper).")
    p.add_argument("--memory-batch", type=int, default=8, help="B of --memory (8).")
    p.add_argument("--memory-seq-len", type=int, default=1024, help="T of --memory (1024).")
    add_common_args(p, default_json=DEFAULT_JSON, default_repeats=5, default_warmup=1)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.no_compile = args.no_compile or not args.compile
    resolve_counts(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = environment("cpu")
    t0 = time.perf_counter()
    records = measure_training(args) + measure_generation(args)
    if not args.no_reference:
        records += measure_vs_reference(args) + measure_generation_vs_reference(args)
    if args.profile:
        records += profile_steps(args)
    if args.memory:
        records += measure_loss_memory(args)
    config = {k: v for k, v in vars(args).items() if k not in ("_counts", "out_json")}
    payload = record(
        SECTION,
        environment=env,
        config={"argv": " ".join(argv), **config},
        records=records,
        ratios=ratios(records),
        total_seconds=round(time.perf_counter() - t0, 1),
    )
    for key, value in payload["ratios"].items():
        print(f"  {key}: {'-' if value is None else f'{value:.2f}'}", flush=True)
    write_record(optional_path(args.out_json, DEFAULT_JSON), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
