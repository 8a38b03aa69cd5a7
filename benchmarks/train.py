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

Writes ``benchmarks/results/train.json`` and the ``train`` section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

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
    resolve_counts,
    text_table,
    time_interleaved,
    try_compile,
    update_markdown_section,
    write_json,
)

ensure_repo_on_path()
from complexformer.models import ComplexFormerLM, preset_config  # noqa: E402

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
            print(
                f"train {mode:8s} {scheme:5s} {fmt_num(rec.get('tokens_per_s'), 0)} tok/s",
                flush=True,
            )
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


def targets(records: list[dict]) -> list[str]:
    lines = []
    tr = {(r["mode"], r["scheme"]): r.get("tokens_per_s") for r in records if r["kind"] == "train"}
    for mode in ("eager", "compiled"):
        c, r = tr.get((mode, "cmha")), tr.get((mode, "rope"))
        if c and r:
            ok = c / r >= 0.9 if mode == "eager" else None
            verdict = "PASS" if ok else ("FAIL" if ok is False else "info")
            lines.append(
                f"- {verdict} training tokens/s cmha/rope, {mode}: {c / r:.2f}"
                + (" (target >= 0.9)" if mode == "eager" else "")
            )
    gen = {r["use_cache"]: r["tokens_per_s"] for r in records if r["kind"] == "generate"}
    if len(gen) == 2:
        ratio = gen[True] / gen[False]
        lines.append(
            f"- {'PASS' if ratio >= 5 else 'FAIL'} generation with / without KV cache: "
            f"{ratio:.1f}x (target >= 5x)"
        )
    return lines


def rows(records: list[dict]) -> list[list[str]]:
    out = []
    rope = {
        r["mode"]: r.get("tokens_per_s")
        for r in records
        if r["kind"] == "train" and r["scheme"] == "rope"
    }
    for r in records:
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


HEADERS = ["what", "scheme", "shape", "time (ms)", "tokens/s", "vs rope"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Writes JSON and the "
        "'train' section of docs/benchmarks.md."
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
    args = build_parser().parse_args(argv)
    args.no_compile = args.no_compile or not args.compile
    resolve_counts(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = environment("cpu")
    t0 = time.perf_counter()
    records = measure_training(args) + measure_generation(args)
    payload = {
        "benchmark": SECTION,
        "environment": env,
        "config": vars(args) | {"_counts": None},
        "records": records,
        "targets": targets(records),
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    out_json = optional_path(args.out_json, DEFAULT_JSON)
    if out_json is not None:
        write_json(out_json, payload)
    print(text_table(HEADERS, rows(records)))
    print("\n".join(payload["targets"]))
    out_md = optional_path(args.out_md, DOCS_MD)
    if out_md is not None:
        cmd = "python benchmarks/train.py" + (" " + " ".join(argv or sys.argv[1:])).rstrip()
        body = "\n".join(
            [
                "## Language model: training throughput and KV-cache generation",
                "",
                f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch "
                f"threads), torch {env['torch']}. Command: `{cmd}`. Preset `{args.preset}`, "
                f"vocabulary {args.vocab}; training steps are forward + backward + AdamW on random "
                "ids, timed round-robin (median); generation is greedy from a 16-token prompt. "
                "Raw data: `benchmarks/results/train.json`.",
                "",
                markdown_table(HEADERS, rows(records), align="lllrrr"),
                "",
                *payload["targets"],
                "",
                "The cached and uncached generations produce the same tokens: "
                f"{records[-1]['same_tokens']}.",
            ]
        )
        update_markdown_section(out_md, SECTION, body)
        print(f"updated section {SECTION!r} of {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
