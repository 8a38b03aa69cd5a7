"""Per-rank memory of sharded training (``--shard``, PyTorch's FSDP2) against DDP.

For 1, 2 and 4 ranks (gloo on CPU, processes started as torchrun starts them), each rank builds
the same ComplexFormer LM, wraps it as the training loop does (DDP, or ``fully_shard`` on each
block then the root via :func:`complexformer.training.shard.shard_model`), runs one AdamW
update on a random batch and counts the bytes it stores for parameters, gradients and the
AdamW state (``exp_avg``, ``exp_avg_sq``; the local shard of every ``DTensor``), and its
process peak RSS (``ru_maxrss``, which also holds the Python runtime, the activations and,
under DDP, the gradient buckets). The record's ``ratios`` are sharded / DDP per-rank bytes.

Run: ``nice python -m benchmarks.shard`` (writes ``benchmarks/results/shard.json``; then
``python -m benchmarks.render`` updates docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import torch

from benchmarks._common import (
    RESULTS_DIR,
    environment,
    launch_ranks,
    record,
    source_fingerprint,
    write_record,
)

MODEL = dict(vocab_size=8192, n_layer=8, n_head=8, d_model=512, d_ff=2048, max_seq_len=64)


def _worker(mode: str, out: str) -> None:
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from complexformer.models import ComplexFormerLM, GPTConfig
    from complexformer.training import TrainConfig, build_optimizer
    from complexformer.training.shard import local_tensor_bytes, shard_model, transformer_blocks

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        tdist.init_process_group("gloo")
    rank = tdist.get_rank() if world > 1 else 0
    torch.manual_seed(0)
    model = ComplexFormerLM(GPTConfig(**MODEL))
    train_model = model
    if mode == "shard" and world > 1:
        shard_model(model, transformer_blocks(model), torch.device("cpu"), world)
    elif world > 1:
        train_model = DDP(model)
    opt = build_optimizer(model, TrainConfig(out_dir="unused"))
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(MODEL["vocab_size"], (2, MODEL["max_seq_len"]), generator=g)
    train_model(ids, labels=ids).loss.backward()
    opt.step()
    params = list(model.parameters())
    counts = {
        "params": sum(local_tensor_bytes(p) for p in params),
        "grads": sum(local_tensor_bytes(p.grad) for p in params),
        "optimizer": sum(
            local_tensor_bytes(v)
            for st in opt.state.values()
            for k, v in st.items()
            if k in ("exp_avg", "exp_avg_sq")
        ),
    }
    counts["total"] = sum(counts.values())
    counts["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    counts["n_params"] = sum(p.numel() for p in params)
    rows = [counts] if world == 1 else [None] * world
    if world > 1:
        tdist.all_gather_object(rows, counts)
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    if world > 1:
        tdist.barrier()  # every rank done before any tears the group down
        tdist.destroy_process_group()


def _launch(world: int, mode: str, out: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "benchmarks.shard", "--worker", mode, "--result", str(out)]
    launch_ranks(world, cmd, mode)
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", choices=("ddp", "shard"), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--worlds", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / "shard.json")
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.result)
        return 0
    t0 = time.perf_counter()
    records, ratios = [], {}
    tmp = args.json.parent / ".shard-rank0.json"
    for world in args.worlds:
        for mode in ("ddp", "shard"):
            rows = _launch(world, mode, tmp)
            worst = max(rows, key=lambda r: r["total"])
            records.append({"world": world, "mode": mode, "ranks": rows, **worst})
            print(f"{world} rank(s) {mode}: {worst['total'] / 2**20:.1f} MiB per rank", flush=True)
        ddp, shard = records[-2]["total"], records[-1]["total"]
        ratios[str(world)] = {"shard_vs_ddp": shard / ddp}
    tmp.unlink(missing_ok=True)
    payload = record(
        "shard",
        environment={
            **environment("cpu"),
            "sources": source_fingerprint(
                ["complexformer/training/shard.py", "benchmarks/shard.py"]
            ),
        },
        config={"model": MODEL, "worlds": args.worlds, "argv": " ".join(argv or sys.argv[1:])},
        records=records,
        ratios=ratios,
        notes=[
            "bytes: the largest rank's parameters + gradients + AdamW exp_avg/exp_avg_sq after "
            "one update (local shards of DTensors); peak_rss: that rank's ru_maxrss"
        ],
        total_seconds=time.perf_counter() - t0,
    )
    write_record(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
