"""Data at scale: ``complexformer prepare`` throughput and memory, and the start of a run on a
prepared folder.

A synthetic JSONL corpus is written at three sizes (the standard library's ``.py`` files as
documents, cycled with a counter line until the size is reached): small (``--small-mb``, the
start-up baseline), medium and large. One byte-level BPE (vocabulary 8192) is trained on the
small corpus and handed to every ``prepare`` as ``--tokenizer DIR``, so the throughput is that
of reading, encoding and writing, not of BPE training. Each measurement runs in a fresh
process:

* ``prepare`` of the medium corpus with 1 and with 2 workers: bytes of text per second of wall
  time (``prepare_2_vs_1``);
* what the machine gives two processes: two ``encode_batch`` measurements (below) run at
  the same time, their bytes over the slower one's time, against one alone
  (``machine_2_vs_1``: 2.0 on two idle cores of their own; less where the cores share
  execution units, caches or memory bandwidth, or other jobs run), and
  ``prepare_2_vs_1_of_machine``, prepare's 2-worker speed-up as a fraction of it;
* the engine's limit: the ``tokenizers`` library's own ``encode_batch`` (one thread,
  ``TOKENIZERS_PARALLELISM=false``, batches of 512 documents) over the medium corpus's text
  already in memory; ``prepare_1_vs_encode_batch`` is prepare's 1-worker throughput over it;
* peak memory of ``prepare`` (2 workers) at the medium and the large size: the largest sum,
  sampled every 50 ms, of the proportional set size (PSS, ``/proc/<pid>/smaps_rollup``) of
  its process tree, which counts the pages a forked worker shares with its parent once; and,
  for scale, that of a process that only imports the package (torch included);
* CPU seconds (user + system, the process and its workers) per MB of prepare with 1 worker
  against ``encode_batch``: a ratio the other jobs of a shared machine disturb less than wall
  time;
* the alternative: ``datasets.load_dataset("json")`` and ``map(num_proc=2)`` of the same
  encoding over the medium corpus (``prepare_2_vs_datasets_map_2``);
* launch to the end of the first training step: ``complexformer train --preset tiny --data
  prepared:DIR --max-steps 1`` on the small and on the large prepared folder, the wall time of
  the whole command (its one evaluation is capped at the same number of blocks).

Run: ``nice python -m benchmarks.data`` (writes ``benchmarks/results/data.json``; ``python -m
benchmarks.render`` updates docs/benchmarks.md). The sizes default to 10, 50 and 1,000 MB (11
minutes in all on two idle cores; the corpora are written to a temporary folder, about 2 GB with
the prepared shards, and removed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import (
    RESULTS_DIR,
    environment,
    record,
    source_fingerprint,
    write_record,
)

SOURCES = [
    "complexformer/data/prepare.py",
    "complexformer/data/prepared.py",
    "complexformer/data/shards.py",
    "complexformer/data/tokens.py",
    "complexformer/training/data_start.py",
]
MB = 10**6


def write_corpus(path: Path, size_mb: float) -> int:
    """A JSONL file of about ``size_mb`` MB of text; returns the text bytes written."""
    from complexformer.data import list_stdlib_files

    texts = []
    for f in list_stdlib_files():
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    # the longest file first: every size holds the longest document (a batch's peak)
    longest = max(range(len(texts)), key=lambda i: len(texts[i]))
    texts.insert(0, texts.pop(longest))
    target, written, i = int(size_mb * MB), 0, 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            text = f"# document {i}\n" + texts[i % len(texts)]
            out.write(json.dumps({"text": text}) + "\n")
            written += len(text.encode("utf-8"))
            i += 1
    return written


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rss() -> tuple[int, int]:
    """(this process's, its largest child's) peak RSS in bytes."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return own, kids


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc/<pid>/task/<tid>/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def _pss(pids: list[int]) -> int:
    """Sum of the proportional set sizes (``smaps_rollup`` ``Pss``) of ``pids``, in bytes:
    pages shared by a forked worker and its parent are counted once."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def _child(kind: str, args: list[str]) -> dict:
    """Run one measurement in a fresh process (``python -m benchmarks.data --child``),
    sampling the PSS of its process tree every 50 ms."""
    cmd = [sys.executable, "-m", "benchmarks.data", "--child", kind, *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _pss(_tree(proc.pid)))
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        log.seek(0)
        text = log.read()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
    out = json.loads(text.strip().splitlines()[-1])
    out |= {"process_wall_s": wall, "peak_pss": peak}
    return out


def _children_at_once(kind: str, args: list[str], n: int) -> list[dict]:
    """Run ``n`` copies of one measurement at the same time (fresh processes); their results."""
    cmd = [sys.executable, "-m", "benchmarks.data", "--child", kind, *args]
    logs = [tempfile.TemporaryFile("w+") for _ in range(n)]
    procs = [subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True) for f in logs]
    out = []
    for proc, log in zip(procs, logs, strict=True):
        proc.wait()
        log.seek(0)
        text = log.read()
        log.close()
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
        out.append(json.loads(text.strip().splitlines()[-1]))
    return out


def child_prepare(spec: str, out: str, tokenizer: str, workers: int) -> dict:
    from complexformer.data.prepare import prepare_corpus

    t0, c0 = time.perf_counter(), _cpu()
    prepare_corpus(spec, out, tokenizer=tokenizer, workers=workers, log=None, show_progress=False)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    own, kids = _rss()
    index = json.loads((Path(out) / "index.json").read_text())
    n_bytes = sum(index["splits"][s]["n_bytes"] for s in ("train", "val", "test"))
    n_tokens = sum(index["splits"][s]["n_tokens"] for s in ("train", "val", "test"))
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "n_bytes": n_bytes,
        "n_tokens": n_tokens,
        "rss_main": own,
        "rss_worker": kids,
    }


def child_encode(spec: str, tokenizer: str) -> dict:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from complexformer.data import load_corpus, load_tokenizer

    corpus = load_corpus(spec)
    tok = load_tokenizer(tokenizer)
    docs = [d for s in ("train", "val", "test") for d in corpus.documents(s)]
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    backend = tok.backend
    t0, c0 = time.perf_counter(), _cpu()
    n_tokens = 0
    for i in range(0, len(docs), 512):
        n_tokens += sum(
            len(e.ids) for e in backend.encode_batch(docs[i : i + 512], add_special_tokens=False)
        )
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    return {"seconds": seconds, "cpu_seconds": cpu, "n_bytes": n_bytes, "n_tokens": n_tokens}


def child_datasets(path: str, tokenizer: str, workers: int, cache: str) -> dict:
    """The alternative: ``datasets`` loads the JSONL into Arrow files and maps the encoding."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import datasets

    from complexformer.data import load_tokenizer

    tok = load_tokenizer(tokenizer)
    t0 = time.perf_counter()
    ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache)

    def encode(batch: dict) -> dict:
        return {"ids": tok.encode_batch(batch["text"])}

    mapped = ds.map(encode, batched=True, batch_size=512, num_proc=workers, remove_columns=["text"])
    n_tokens = sum(len(x) for x in mapped.with_format("numpy")["ids"])
    seconds = time.perf_counter() - t0
    n_bytes = sum(len(t.encode("utf-8")) for t in ds["text"])
    return {"seconds": seconds, "n_bytes": n_bytes, "n_tokens": int(n_tokens)}


def start_to_first_step(folder: str, out: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "complexformer.cli",
        "train",
        "--preset",
        "tiny",
        "--data",
        f"prepared:{folder}",
        "--out",
        out,
        "--max-steps",
        "1",
        "--sample-tokens",
        "0",
        "--threads",
        "1",
        "--set",
        "eval_blocks=4",
    ]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    return {"seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--small-mb",
        type=float,
        default=10,
        help="the small corpus (BPE training, the start-up baseline), MB (default 10)",
    )
    p.add_argument(
        "--medium-mb",
        type=float,
        default=50,
        help="the corpus of the throughput measurements, MB (default 50)",
    )
    p.add_argument(
        "--large-mb",
        type=float,
        default=1000,
        help="the large corpus (peak memory, the start), MB (default 1000)",
    )
    p.add_argument(
        "--json",
        type=Path,
        default=RESULTS_DIR / "data.json",
        help="where the results go (default benchmarks/results/data.json)",
    )
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "idle":
            import complexformer.data.prepare  # noqa: F401  (the runtime prepare starts with)

            time.sleep(1.0)
            out = {"seconds": 0.0}
        elif kind == "prepare":
            out = child_prepare(rest[0], rest[1], rest[2], int(rest[3]))
        elif kind == "datasets":
            out = child_datasets(rest[0], rest[1], int(rest[2]), rest[3])
        else:
            out = child_encode(rest[0], rest[1])
        print(json.dumps(out))
        return 0

    t_start = time.perf_counter()
    sources_before = source_fingerprint(SOURCES)
    with tempfile.TemporaryDirectory(prefix="cf-data-bench-") as tmp:
        root = Path(tmp)
        os.environ["COMPLEXFORMER_CACHE"] = str(root / "cache")
        specs = {}
        for name, mb in (
            ("small", args.small_mb),
            ("medium", args.medium_mb),
            ("large", args.large_mb),
        ):
            path = root / name / "corpus.jsonl"
            write_corpus(path, mb)
            specs[name] = f"text:{path}"
        print("corpora written", flush=True)
        from complexformer.data import get_tokenizer, load_corpus

        tok = get_tokenizer(None, load_corpus(specs["small"]), vocab_size=8192, show_progress=False)
        tok_dir = str(root / "tokenizer")
        tok.save(tok_dir)
        records = []

        def prep(name: str, workers: int) -> dict:
            out = str(root / f"prep-{name}-{workers}")
            r = _child("prepare", [specs[name], out, tok_dir, str(workers)])
            r |= {
                "what": "prepare",
                "corpus": name,
                "workers": workers,
                "mb_per_s": r["n_bytes"] / MB / r["seconds"],
                "folder": out,
            }
            print(json.dumps({k: v for k, v in r.items() if k != "folder"}), flush=True)
            records.append(r)
            return r

        idle = _child("idle", [])
        idle |= {"what": "idle", "corpus": "-"}
        records.append(idle)
        enc = _child("encode", [specs["medium"], tok_dir])
        enc |= {
            "what": "encode_batch",
            "corpus": "medium",
            "workers": 1,
            "mb_per_s": enc["n_bytes"] / MB / enc["seconds"],
        }
        records.append(enc)
        print(json.dumps(enc), flush=True)
        # what the machine gives two processes: two encode_batch at once, against one
        pair = _children_at_once("encode", [specs["medium"], tok_dir], 2)
        both = {
            "what": "encode_batch_x2",
            "corpus": "medium",
            "workers": 2,
            "seconds": max(r["seconds"] for r in pair),
            "n_bytes": sum(r["n_bytes"] for r in pair),
        }
        both["mb_per_s"] = both["n_bytes"] / MB / both["seconds"]
        records.append(both)
        print(json.dumps(both), flush=True)
        one = prep("medium", 1)
        two = prep("medium", 2)
        hf = None  # the alternative, where datasets is installed (an optional dependency)
        if importlib.util.find_spec("datasets") is not None:
            hf = _child(
                "datasets",
                [specs["medium"].removeprefix("text:"), tok_dir, "2", str(root / "hf-cache")],
            )
            hf |= {
                "what": "datasets_map",
                "corpus": "medium",
                "workers": 2,
                "mb_per_s": hf["n_bytes"] / MB / hf["seconds"],
            }
            records.append(hf)
            print(json.dumps(hf), flush=True)
        large = prep("large", 2)
        small = prep("small", 2)
        starts = {}
        for name, r in (("small", small), ("large", large)):
            s = start_to_first_step(r["folder"], str(root / f"run-{name}"))
            s |= {"what": "first_step", "corpus": name}
            records.append(s)
            starts[name] = s["seconds"]
            print(json.dumps(s), flush=True)
        for r in records:
            r.pop("folder", None)
    notes = []
    if source_fingerprint(SOURCES) != sources_before:
        notes.append("the measured sources changed during the run")
    ratios = {
        "prepare_2_vs_1": two["mb_per_s"] / one["mb_per_s"],
        "prepare_1_vs_encode_batch": one["mb_per_s"] / enc["mb_per_s"],
        "machine_2_vs_1": both["mb_per_s"] / enc["mb_per_s"],
        "prepare_2_vs_1_of_machine": (two["mb_per_s"] / one["mb_per_s"])
        / (both["mb_per_s"] / enc["mb_per_s"]),
        "prepare_2_vs_datasets_map_2": None if hf is None else two["mb_per_s"] / hf["mb_per_s"],
        "cpu_per_mb_prepare_1_vs_encode_batch": (one["cpu_seconds"] / one["n_bytes"])
        / (enc["cpu_seconds"] / enc["n_bytes"]),
        "peak_pss_gb": {"medium": two["peak_pss"] / 2**30, "large": large["peak_pss"] / 2**30},
        "peak_pss_large_vs_medium": large["peak_pss"] / two["peak_pss"],
        "idle_pss_gb": idle["peak_pss"] / 2**30,
        "first_step_large_vs_small": starts["large"] / starts["small"],
    }
    env = environment("cpu")
    env["sources"] = sources_before
    env["load_avg_1m_end"] = os.getloadavg()[0]
    config = {
        "small_mb": args.small_mb,
        "medium_mb": args.medium_mb,
        "large_mb": args.large_mb,
        "argv": " ".join(argv or sys.argv[1:]),
    }
    payload = record(
        "data",
        environment=env,
        config=config,
        records=records,
        ratios=ratios,
        notes=notes,
        total_seconds=time.perf_counter() - t_start,
    )
    write_record(args.json, payload)
    print(json.dumps(ratios, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
