"""Construction time of complextorch's ViT through the compat namespace against complextorch.

Building a complex ViT is dominated by drawing the complex weights (Trabelsi et al.'s
Rayleigh-modulus, uniform-phase init). This script builds ViT-B/16 (and with ``--huge``
ViT-H/14) once with ``complexformer.compat.complextorch.models.ViT`` and once with
``complextorch.models.ViT``, interleaved, ``--repeats`` times each after a warm-up, and
records the medians and their ratio (target: at most 1.2). complextorch must be installed.

    python -m benchmarks.init_construction --threads 1 [--huge]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Any

import torch

from benchmarks._common import (
    RESULTS_DIR,
    add_common_args,
    environment,
    optional_path,
    record,
    resolve_counts,
    source_fingerprint,
    time_interleaved,
    write_record,
)

SECTION = "init_construction"
DEFAULT_JSON = RESULTS_DIR / "init_construction.json"
#: (name, ViT arguments): ViT-B/16 and ViT-H/14 of Dosovitskiy et al. (Table 1).
MODELS = {
    "vit_b16": dict(image_size=224, patch_size=16, in_channels=3, dim=768, depth=12,
                    heads=12, mlp_dim=3072),
    "vit_h14": dict(image_size=224, patch_size=14, in_channels=3, dim=1280, depth=32,
                    heads=16, mlp_dim=5120),
}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(p, default_json=DEFAULT_JSON, default_repeats=3, default_warmup=1)
    p.add_argument("--huge", action="store_true", help="also ViT-H/14 (about 630 M weights)")
    return p


def main(argv: list[str] | None = None) -> int:
    import complextorch.models as ct

    from complexformer.compat.complextorch import models as compat

    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    resolve_counts(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = environment("cpu")
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    ratios: dict[str, Any] = {}
    for name in ["vit_b16", *(["vit_h14"] if args.huge else [])]:
        kw = MODELS[name]

        def ours(kw=kw):
            compat.ViT(**kw)
            gc.collect()

        def theirs(kw=kw):
            ct.ViT(**kw)
            gc.collect()

        stats = time_interleaved({"compat": ours, "complextorch": theirs}, device="cpu",
                                 repeats=args.repeats, warmup=args.warmup)  # fmt: skip
        for impl, s in stats.items():
            records.append({"model": name, "impl": impl, **s})
        ratio = stats["compat"]["median_ms"] / stats["complextorch"]["median_ms"]
        ratios[name] = {"compat_over_complextorch": ratio}
        ours_s, theirs_s = (stats[k]["median_ms"] / 1e3 for k in ("compat", "complextorch"))
        print(f"{name}: compat {ours_s:.2f} s, complextorch {theirs_s:.2f} s, ratio {ratio:.2f}")
    env["sources"] = source_fingerprint(["complexformer/nn/init.py"])
    payload = record(
        SECTION,
        environment=env,
        config={"argv": " ".join(argv), "repeats": args.repeats, "warmup": args.warmup},
        records=records,
        ratios=ratios,
        total_seconds=time.perf_counter() - t0,
    )
    write_record(optional_path(args.out_json, DEFAULT_JSON), payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
