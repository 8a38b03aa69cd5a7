"""Sharded checkpoints: bytes each rank writes, and how long a save blocks training.

For 1, 2 and 4 ranks (gloo on CPU, processes started as torchrun starts them), each rank
builds the ComplexFormer LM of ``benchmarks.shard`` (29.4M parameters), shards it as
``--shard`` does (one rank: unsharded), runs one AdamW update so that the optimizer has its
state, and saves checkpoints as the training loop does: one process writes the usual
single-file checkpoint (:func:`complexformer.training.checkpoint.save_checkpoint`); 2 and 4
ranks write their parts (:class:`complexformer.training.checkpoint.ShardedSave`), first
synchronously, then asynchronously (``async_checkpoint``: the time training is blocked is the
time until the save has copied the state into CPU tensors made at the first save and kept, as
the trainer keeps them, and handed the writes to a background thread; the test waits for the
writes before the next save). Each save is timed ``--repeats`` times
(median); bytes are the files each rank wrote (the largest rank).

Run: ``nice python -m benchmarks.checkpoint`` (writes ``benchmarks/results/checkpoint.json``;
then ``python -m benchmarks.render`` updates docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
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
from benchmarks.shard import MODEL


def _worker(work: Path, out: Path, repeats: int) -> None:
    import torch.distributed as tdist

    from complexformer.models import ComplexFormerLM, GPTConfig
    from complexformer.training import TrainConfig, build_optimizer
    from complexformer.training.checkpoint import (
        ShardedSave,
        capture_rng_state,
        save_checkpoint,
    )
    from complexformer.training.dist import all_gather_objects
    from complexformer.training.parts import PARTS_DIR, CachedStager, part_files
    from complexformer.training.shard import shard_model, transformer_blocks

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        tdist.init_process_group("gloo")
    rank = tdist.get_rank() if world > 1 else 0
    torch.manual_seed(0)
    model = ComplexFormerLM(GPTConfig(**MODEL))
    if world > 1:
        shard_model(model, transformer_blocks(model), torch.device("cpu"), world)
    tc = TrainConfig(out_dir=str(work))
    opt = build_optimizer(model, tc)
    ids = torch.randint(MODEL["vocab_size"], (2, MODEL["max_seq_len"]))
    model(ids, labels=ids).loss.backward()
    opt.step()
    rng = all_gather_objects(capture_rng_state())
    common = dict(scheduler=None, model_config={}, train_config=tc, rng=rng)
    row: dict = {"rank": rank, "world": world}
    if world == 1:
        times = []
        for i in range(repeats):
            t0 = time.perf_counter()
            path = save_checkpoint(work / "sync", i, model=model, optimizer=opt, **common)
            times.append(time.perf_counter() - t0)
        row["bytes"] = sum(
            (path / f).stat().st_size for f in ("model.safetensors", "optimizer.safetensors")
        )
        row["sync_s"] = statistics.median(times)
    else:
        group = tdist.new_group(backend="gloo")
        stager = CachedStager()  # kept for the run, as the trainer keeps it
        for mode in ("sync", "async"):
            blocked, total = [], []
            for i in range(repeats):
                tdist.barrier()
                t0 = time.perf_counter()
                save = ShardedSave(
                    work / mode,
                    i,
                    model=model,
                    optimizer=opt,
                    async_group=group if mode == "async" else None,
                    async_stager=stager if mode == "async" else None,
                    **common,
                )
                t1 = time.perf_counter()
                path = save.complete()
                t2 = time.perf_counter()
                tdist.barrier()  # rank 0 renames the folder in complete()
                blocked.append((t2 if mode == "sync" else t1) - t0)
                total.append(t2 - t0)
            row[f"{mode}_s"] = statistics.median(blocked)
            row[f"{mode}_total_s"] = statistics.median(total)
            row[f"{mode}_bytes"] = sum(
                (path / PARTS_DIR / n).stat().st_size for n in part_files(path / PARTS_DIR, rank)
            )
        row["bytes"] = row["sync_bytes"]
    rows = all_gather_objects(row)
    if rank == 0:
        out.write_text(json.dumps(rows))
    if world > 1:
        tdist.barrier()
        tdist.destroy_process_group()


def _launch(world: int, work: Path, out: Path, repeats: int) -> list[dict]:
    cmd = [sys.executable, "-m", "benchmarks.checkpoint", "--worker", str(work)]
    cmd += ["--result", str(out), "--repeats", str(repeats)]
    launch_ranks(world, cmd, "checkpoint")
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=3, help="saves timed per mode (median)")
    ap.add_argument("--worlds", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / "checkpoint.json")
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.result, args.repeats)
        return 0
    t0 = time.perf_counter()
    records = []
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as tmp:
        for world in args.worlds:
            work = Path(tmp) / f"w{world}"
            rows = _launch(world, work, Path(tmp) / "rows.json", args.repeats)
            shutil.rmtree(work, ignore_errors=True)
            worst = max(rows, key=lambda r: r["bytes"])
            rec = {"world": world, "ranks": rows, "bytes": worst["bytes"]}
            for key in ("sync_s", "async_s", "async_total_s"):
                if key in rows[0]:
                    rec[key] = max(r[key] for r in rows)
            records.append(rec)
            print(f"{world} rank(s): {rec}", flush=True)
    one = next(r for r in records if r["world"] == 1)
    ratios: dict = {}
    for r in records:
        if r["world"] > 1:
            ratios[str(r["world"])] = {
                "bytes_vs_one": r["bytes"] / one["bytes"],
                "async_vs_sync_blocked": r["async_s"] / r["sync_s"],
            }
    payload = record(
        "checkpoint",
        environment={
            **environment("cpu"),
            "sources": source_fingerprint(
                [
                    "complexformer/training/checkpoint.py",
                    "complexformer/training/parts.py",
                    "benchmarks/checkpoint.py",
                ]
            ),
        },
        config={
            "model": MODEL,
            "worlds": args.worlds,
            "repeats": args.repeats,
            "argv": " ".join(argv or sys.argv[1:]),
        },
        records=records,
        ratios=ratios,
        notes=[
            "bytes: model + optimizer files written by the largest rank (one process: "
            "model.safetensors + optimizer.safetensors); sync_s: a whole save (parts, "
            "hashes, manifest, rename); async_s: the time until the save returned to "
            "training (state copied, writes started); medians of the repeats, slowest rank"
        ],
        total_seconds=time.perf_counter() - t0,
    )
    write_record(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
