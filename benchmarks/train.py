"""Language-model benchmark: training throughput of CMHA vs RoPE, and KV-cache generation.

Two measurements on models of the same shape (default: the ``tiny`` preset, vocabulary 8192,
context ``--seq-len`` 512):

* **Training tokens/s** of ``pos_scheme=cmha`` and ``pos_scheme=rope``: one step is forward,
  backward and an AdamW update on a (B, T) batch of random token ids; the two models are
  timed round-robin in one process (median of ``--repeats`` steps after warm-up), eager and,
  with ``--compile``, under ``torch.compile``. Target: cmha/rope >= 0.9 eager at T = 512.
* **Generation tokens/s** of the cmha model, ``--new-tokens`` (512) greedy tokens after a
  16-token prompt, with the KV cache (rotated keys, one new position per step) and without it
  (every step recomputes the whole sequence). Target: >= 5x with the cache.

Writes ``benchmarks/results/train.json`` (the environment, raw timings and the ratios);
``python -m benchmarks.render`` turns it into the ``train`` section of ``docs/benchmarks.md``
and judges the targets declared in ``benchmarks/render/targets.py``.

    python -m benchmarks.train --threads 1
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from benchmarks._common import (
    RESULTS_DIR,
    add_common_args,
    environment,
    optional_path,
    record,
    resolve_counts,
    time_interleaved,
    try_compile,
    write_record,
)
from complexformer.models import ComplexFormerLM, preset_config

SECTION = "train"
DEFAULT_JSON = RESULTS_DIR / "train.json"


def train_step_fn(model: torch.nn.Module, batch: torch.Tensor):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> None:
        loss = model(batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


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
