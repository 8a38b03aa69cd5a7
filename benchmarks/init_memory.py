"""Per-rank peak memory at the start of a sharded run: meta-device initialisation
(``TrainConfig.meta_init``, the default under ``--shard``) against building the whole model
on every rank first.

Each rank (gloo on CPU, processes started as torchrun starts them) imports the package, joins
the process group and resets its peak resident set size (``/proc/self/clear_refs``), then sets
up the model as :class:`~complexformer.training.Trainer` does: one process builds the LM on
the CPU (an unsharded run); under ``--shard`` a rank either builds it whole on the CPU and
then shards it (``meta_init=false``) or records its construction on the ``meta`` device,
replays it keeping only its shard, shards the meta model and fills its local tensors
(``meta_init=true``). The peak RSS (``VmHWM``) is read after the set-up; "model at start" is
that peak less the RSS before the set-up (the runtime: Python, torch, the process group).
The LM is large enough for the model to dominate: about 0.6 GB of float32 parameters.

Run: ``nice python -m benchmarks.init_memory`` (writes ``benchmarks/results/init_memory.json``;
then ``python -m benchmarks.render`` updates docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
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

MODEL = dict(vocab_size=8192, n_layer=12, n_head=16, d_model=1024, d_ff=4096, max_seq_len=256)
GIB = 2**30


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _worker(mode: str, out: Path) -> None:
    import torch.distributed as tdist

    from complexformer.models import ComplexFormerLM, GPTConfig
    from complexformer.training.meta_init import build_on_meta
    from complexformer.training.shard import shard_model, transformer_blocks

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        tdist.init_process_group("gloo")
    rank = tdist.get_rank() if world > 1 else 0
    cfg = GPTConfig(**MODEL)
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS starts again from here
    before = _status_bytes("VmRSS")
    t0 = time.perf_counter()
    torch.manual_seed(0)
    if mode == "meta":
        built = build_on_meta(lambda: ComplexFormerLM(cfg))
        model = built.model
        shard_model(model, transformer_blocks(model), torch.device("cpu"), world)
        built.fill_sharded(rank, world, torch.device("cpu"))
    else:
        model = ComplexFormerLM(cfg)
        if world > 1:
            shard_model(model, transformer_blocks(model), torch.device("cpu"), world)
    seconds = time.perf_counter() - t0
    peak = _status_bytes("VmHWM")
    local = sum(
        (p.to_local() if hasattr(p, "to_local") else p).numel() * 4 for p in model.parameters()
    )
    row = {
        "rank": rank,
        "peak_rss": peak,
        "rss_before": before,
        "model_at_start": peak - before,
        "local_param_bytes": local,
        "seconds": seconds,
    }
    if world > 1:
        rows: list = [None] * world
        tdist.all_gather_object(rows, row)
        tdist.destroy_process_group()
    else:
        rows = [row]
    if rank == 0:
        out.write_text(json.dumps(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worlds", nargs="+", type=int, default=[2, 4], help="sharded world sizes")
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / "init_memory.json")
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.result)
        return 0
    t0 = time.perf_counter()
    records = []
    result = RESULTS_DIR.parent / ".init_memory_rows.json"
    runs = [(1, "cpu")] + [(w, m) for w in args.worlds for m in ("cpu", "meta")]
    try:
        for world, mode in runs:
            cmd = [sys.executable, "-m", "benchmarks.init_memory", "--worker", mode]
            launch_ranks(world, cmd + ["--result", str(result)], "init_memory")
            rows = json.loads(result.read_text())
            worst = max(rows, key=lambda r: r["peak_rss"])
            rec = {
                "world": world,
                "meta_init": mode == "meta",
                "peak_rss": worst["peak_rss"],
                "model_at_start": max(r["model_at_start"] for r in rows),
                "seconds": max(r["seconds"] for r in rows),
                "ranks": rows,
            }
            records.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "ranks"}), flush=True)
    finally:
        result.unlink(missing_ok=True)
    one = records[0]
    ratios: dict = {}
    for r in records[1:]:
        key = f"{r['world']}/{'meta' if r['meta_init'] else 'whole'}"
        ratios[key] = {
            "peak_rss_vs_one": r["peak_rss"] / one["peak_rss"],
            "model_at_start_vs_one": r["model_at_start"] / one["model_at_start"],
        }
    payload = record(
        "init_memory",
        environment={
            **environment("cpu"),
            "sources": source_fingerprint(
                ["complexformer/training/meta_init.py", "benchmarks/init_memory.py"]
            ),
        },
        config={"model": MODEL, "worlds": args.worlds, "argv": " ".join(argv or sys.argv[1:])},
        records=records,
        ratios=ratios,
        notes=[
            "peak_rss: VmHWM of the largest rank after the model's set-up (the runtime "
            "included); model_at_start: that peak less the RSS before the set-up"
        ],
        total_seconds=time.perf_counter() - t0,
    )
    write_record(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
