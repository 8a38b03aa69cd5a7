"""Peak memory of ``complexformer prepare`` on an ``hf:`` dataset, streamed and memory-mapped,
at two sizes.

A local ``datasets`` folder (one ``train.jsonl``; val and test are carved out of it) is
written at ``--small-mb`` and ``--large-mb`` MB of text (the corpus of
:func:`benchmarks.data.write_corpus`). One byte-level BPE (vocabulary 8192) trained on the
small one is passed to every ``prepare`` as ``--tokenizer DIR``, so each run reads, encodes
and writes only. Each ``prepare`` (1 worker) runs in a fresh process, with
``hf_streaming=True`` (``datasets.load_dataset(..., streaming=True)``, the path of a dataset
on the Hub) and with ``hf_streaming=False`` (converted once into Arrow files in a fresh
``datasets`` cache, then memory-mapped); its peak memory is the largest proportional set size
of its process tree, sampled every 50 ms (as :mod:`benchmarks.data` measures it), next to
that of a process that only imports the package.

Run: ``nice python -m benchmarks.data_hf`` (writes ``benchmarks/results/data_hf.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import RESULTS_DIR, environment, record, source_fingerprint, write_record
from benchmarks.data import MB, _pss, _tree, write_corpus

SOURCES = ["complexformer/data/hf.py", "complexformer/data/prepare.py"]


def _child(args: list[str], env: dict[str, str]) -> dict:
    """One measurement in a fresh process, sampling the PSS of its tree every 50 ms."""
    cmd = [sys.executable, "-m", "benchmarks.data_hf", "--child", *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
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
    return out | {"process_wall_s": wall, "peak_pss": peak}


def _run_child(kind: str, rest: list[str]) -> dict:
    if kind == "idle":
        import complexformer.data.prepare  # noqa: F401  (the runtime prepare starts with)

        time.sleep(1.0)
        return {"seconds": 0.0}
    from complexformer.data.prepare import prepare_corpus

    spec, out, tok, streaming = rest
    t0 = time.perf_counter()
    prepare_corpus(
        spec,
        out,
        tokenizer=tok,
        workers=1,
        hf_streaming=streaming == "1",
        show_progress=False,
    )
    index = json.loads((Path(out) / "index.json").read_text())
    n_bytes = sum(index["splits"][s]["n_bytes"] for s in ("train", "val", "test"))
    n_tokens = sum(index["splits"][s]["n_tokens"] for s in ("train", "val", "test"))
    return {"seconds": time.perf_counter() - t0, "n_bytes": n_bytes, "n_tokens": n_tokens}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small-mb", type=float, default=2)
    p.add_argument("--large-mb", type=float, default=8)
    p.add_argument("--json", type=Path, default=RESULTS_DIR / "data_hf.json")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_run_child(args.child[0], args.child[1:])))
        return 0
    t_start = time.perf_counter()
    sources_before = source_fingerprint(SOURCES)
    with tempfile.TemporaryDirectory(prefix="cf-data-hf-bench-") as tmp:
        root = Path(tmp)
        env = dict(os.environ)
        env |= {
            "COMPLEXFORMER_CACHE": str(root / "cache"),
            "HF_DATASETS_CACHE": str(root / "hf-cache"),
            "HF_DATASETS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        }
        os.environ.update(env)
        sizes = {"small": args.small_mb, "large": args.large_mb}
        for name, mb in sizes.items():
            write_corpus(root / name / "train.jsonl", mb)
        from complexformer.data import get_tokenizer, load_corpus

        corpus = load_corpus(f"text:{root / 'small'}")
        tok_dir = str(root / "tokenizer")
        get_tokenizer(None, corpus, vocab_size=8192, show_progress=False).save(tok_dir)
        idle = _child(["idle"], env) | {"what": "idle", "corpus": "-"}
        records = [idle]
        peaks: dict[str, dict[str, float]] = {"streamed": {}, "memory_mapped": {}}
        for name in sizes:
            for mode, flag in (("streamed", "1"), ("memory_mapped", "0")):
                out = str(root / f"prep-{name}-{mode}")
                r = _child(["prepare", f"hf:{root / name}", out, tok_dir, flag], env)
                r |= {
                    "what": "prepare",
                    "corpus": name,
                    "mode": mode,
                    "mb_per_s": r["n_bytes"] / MB / r["seconds"],
                }
                records.append(r)
                peaks[mode][name] = r["peak_pss"] / 2**30
                print(json.dumps(r), flush=True)
    notes = []
    if source_fingerprint(SOURCES) != sources_before:
        notes.append("the measured sources changed during the run")
    ratios = {
        "peak_pss_gb": peaks,
        "peak_pss_large_vs_small": {m: v["large"] / v["small"] for m, v in peaks.items()},
        "idle_pss_gb": idle["peak_pss"] / 2**30,
    }
    env_rec = environment("cpu")
    env_rec["sources"] = sources_before
    env_rec["load_avg_1m_end"] = os.getloadavg()[0]
    config = {**{f"{k}_mb": v for k, v in sizes.items()}, "argv": " ".join(argv or sys.argv[1:])}
    payload = record(
        "data_hf",
        environment=env_rec,
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
