"""The report of a compute ladder: per-rung tables, paired tests, power-law fits, one plot.

From the per-run results of :func:`complexformer_lab.reproduce.ladder.run_ladder`, per corpus:

* per rung and variant: validation and test perplexity (mean ± sample std over seeds) and the
  length-extrapolation ratios ppl(2T)/ppl(T) and ppl(4T)/ppl(T);
* per rung: the paired difference variant − RoPE (same seed: same data order and
  initialisation seed) of val and test perplexity, with a two-sided paired t-test;
* per variant: the power law L(C) = a · C^(−α) of validation loss against compute
  (:mod:`.ladder_fit`), its prediction with a 95 % band at the target's compute (the ``paper``
  preset's non-embedding parameters under the ladder's token rule: an extrapolation), and the
  gap to RoPE there; the trend of the paired loss gap per tenfold compute inside the ladder.

Files: ``OUT/ladder.md``, ``OUT/ladder.json`` and ``OUT/ladder.png`` (perplexity against
compute, one line per variant with its band, seeds as points, one panel per corpus).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from complexformer.results import format_p, markdown_table, mean_std, paired_t_test, write_report

from .ladder_fit import fit_power_law, gap_at, gap_trend
from .plots import figure, save_figure
from .table import format_mean_std

__all__ = ["LABELS", "ladder_payload", "plot_ladder", "write_ladder_report"]

LABELS = {
    "rope": "RoPE",
    "cmha_nopcl": "CMHA w/o PCL",
    "cmha": "ComplexFormer (CMHA + θ-PCL)",
}


def _by(results: Sequence[dict], **keys: Any) -> list[dict]:
    return [r for r in results if all(r.get(k) == v for k, v in keys.items())]


def _ratio(r: dict, m: str) -> float | None:
    ex = r.get("extrapolation") or {}
    a, b = ex.get(m), ex.get("1")
    return a / b if a is not None and b else None


def ladder_payload(
    results: Sequence[dict],
    rungs: Sequence[str],
    corpora: Sequence[str],
    variants: Sequence[str],
    target: dict[str, Any],
) -> dict[str, Any]:
    """Tables, tests and fits of the ladder as one JSON-ready dict (see the module docstring)."""
    out: dict[str, Any] = {"target": target, "corpora": {}}
    for corpus in corpora:
        mine = _by(results, corpus=corpus)
        if not mine:
            continue
        per_rung = []
        for rung in rungs:
            rows = {}
            for v in variants:
                rs = _by(mine, rung=rung, variant=v)
                if not rs:
                    continue
                rows[v] = {
                    "n": len(rs),
                    "compute": rs[0]["compute"],
                    "non_embedding_params": rs[0]["non_embedding_params"],
                    "tokens": rs[0]["tokens"],
                    "val_ppl": mean_std([r["val_ppl"] for r in rs]),
                    "test_ppl": mean_std([r["test_ppl"] for r in rs]),
                    "x2": mean_std([_ratio(r, "2") for r in rs]),
                    "x4": mean_std([_ratio(r, "4") for r in rs]),
                }
            paired = {}
            base = {r["seed"]: r for r in _by(mine, rung=rung, variant="rope")}
            for v in variants:
                if v == "rope":
                    continue
                pairs = [
                    (r, base[r["seed"]])
                    for r in _by(mine, rung=rung, variant=v)
                    if r["seed"] in base
                ]
                if not pairs:
                    continue
                paired[v] = {
                    split: paired_t_test([a[f"{split}_ppl"] - b[f"{split}_ppl"] for a, b in pairs])
                    for split in ("val", "test")
                }
                for m in ("2", "4"):
                    diffs = [(_ratio(a, m), _ratio(b, m)) for a, b in pairs]
                    paired[v][f"x{m}"] = paired_t_test(
                        [x - y for x, y in diffs if x is not None and y is not None]
                    )
                paired[v]["loss_gaps"] = [
                    (a["compute"], a["val_loss"] - b["val_loss"]) for a, b in pairs
                ]
            if rows:
                per_rung.append({"rung": rung, "variants": rows, "paired": paired})
        fits: dict[str, Any] = {}
        for v in variants:
            rs = _by(mine, variant=v)
            if len({r["rung"] for r in rs}) < 2 or len(rs) < 3:
                continue
            fit = fit_power_law([r["compute"] for r in rs], [r["val_loss"] for r in rs])
            pred = fit.predict(target["compute"])
            fits[v] = {
                "fit": fit.to_dict(),
                "alpha": fit.alpha,
                "alpha_se": fit.alpha_se,
                "at_target": pred,
                "_fit": fit,
            }
        for v in variants:
            if v != "rope" and v in fits and "rope" in fits:
                fits[v]["gap_at_target"] = gap_at(
                    fits[v]["_fit"], fits["rope"]["_fit"], target["compute"]
                )
            gaps = [g for row in per_rung for g in row["paired"].get(v, {}).get("loss_gaps", [])]
            if v != "rope" and v in fits and len({c for c, _ in gaps}) >= 2 and len(gaps) >= 3:
                fits[v]["gap_trend"] = gap_trend([c for c, _ in gaps], [g for _, g in gaps])
        out["corpora"][corpus] = {"rungs": per_rung, "fits": fits}
    return out


def _markdown(payload: dict[str, Any], variants: Sequence[str], meta: dict[str, str]) -> str:
    t = payload["target"]
    lines = ["# Compute ladder: RoPE, CMHA without PCL and ComplexFormer across model sizes", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines.append("")
    for corpus, body in payload["corpora"].items():
        lines += [f"## {corpus}", ""]
        rows = []
        for row in body["rungs"]:
            for v in variants:
                if v not in row["variants"]:
                    continue
                x = row["variants"][v]
                rows.append(
                    [
                        row["rung"],
                        f"{x['non_embedding_params']:,}",
                        f"{x['tokens']:,}",
                        f"{x['compute']:.2e}",
                        LABELS.get(v, v),
                        x["n"],
                        format_mean_std(x["val_ppl"]),
                        format_mean_std(x["test_ppl"]),
                        format_mean_std(x["x2"], 3),
                        format_mean_std(x["x4"], 3),
                    ]
                )
        lines.append(
            markdown_table(
                [
                    "Rung",
                    "N (non-emb.)",
                    "Tokens",
                    "C (FLOP)",
                    "Variant",
                    "Seeds",
                    "val ppl ↓",
                    "test ppl ↓",
                    "ppl 2T / T",
                    "ppl 4T / T",
                ],
                rows,
                "lrrrlrrrrr",
            )
        )
        lines += [
            "",
            "Paired against RoPE (same seed), difference variant − RoPE (two-sided paired t-test):",
            "",
        ]
        prow = []
        for row in body["rungs"]:
            for v, p in row["paired"].items():
                prow.append(
                    [
                        row["rung"],
                        LABELS.get(v, v),
                        _diff(p["val"]),
                        _diff(p["test"]),
                        _diff(p["x2"], 3),
                        _diff(p["x4"], 3),
                    ]
                )
        lines.append(
            markdown_table(
                ["Rung", "Variant", "val ppl (p)", "test ppl (p)", "ppl 2T/T (p)", "ppl 4T/T (p)"],
                prow,
                "llrrrr",
            )
        )
        lines += [
            "",
            f"Power law of validation loss L = a · C^(−α) per variant; prediction at "
            f"the `{t['preset']}` preset's N = {t['non_embedding_params']:,} non-embedding "
            f"parameters ({t['params']:,} in all) with the ladder's token rule, "
            f"D = {t['tokens']:,.0f}, C = {t['compute']:.2e} FLOP "
            "(an extrapolation; the band covers the fitted line only):",
            "",
        ]
        frow = []
        for v in variants:
            f = body["fits"].get(v)
            if f is None:
                continue
            a = f["at_target"]
            g = f.get("gap_at_target")
            tr = f.get("gap_trend")
            frow.append(
                [
                    LABELS.get(v, v),
                    f"{f['alpha']:.4f} ± {f['alpha_se']:.4f}",
                    f"{math.exp(a['loss']):.1f} [{math.exp(a['lo']):.1f}, {math.exp(a['hi']):.1f}]",
                    "–"
                    if g is None
                    else f"{g['gap']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] ({format_p(g['p'])})",
                    "–"
                    if tr is None
                    else f"{tr['slope']:+.4f} ± {tr['slope_se']:.4f} ({format_p(tr['p'])})",
                ]
            )
        lines.append(
            markdown_table(
                [
                    "Variant",
                    "α ± se",
                    "ppl at target [95 %]",
                    "loss gap to RoPE at target (p)",
                    "paired gap per 10× C inside the ladder (p)",
                ],
                frow,
                "lrrrr",
            )
        )
        lines.append("")
    return "\n".join(lines)


def _diff(p: dict[str, Any], digits: int = 2) -> str:
    if p.get("mean") is None:
        return "–"
    return f"{p['mean']:+.{digits}f} ({format_p(p.get('p'))})"


def plot_ladder(
    payload: dict[str, Any],
    results: Sequence[dict],
    variants: Sequence[str],
    out_path: str | os.PathLike,
    log: Callable[[str], Any] | None = None,
) -> Path | None:
    """Validation perplexity against compute (log-log), one column per corpus: seeds as points,
    each variant's fitted power law with its 95 % band, extended to the target's compute;
    below it the paired difference variant − RoPE of validation loss per seed and rung."""
    try:
        fig = figure(max(1, len(payload["corpora"])), height=8.0)
    except ImportError:
        if log is not None:
            log("note: matplotlib is not installed, skipping the ladder plot")
        return None
    colors = {"rope": "tab:blue", "cmha_nopcl": "tab:green", "cmha": "tab:red"}
    target = payload["target"]["compute"]
    ncols = len(payload["corpora"])
    for i, (corpus, body) in enumerate(payload["corpora"].items()):
        ax = fig.add_subplot(2, ncols, i + 1)
        for v in variants:
            rs = _by(results, corpus=corpus, variant=v)
            if not rs:
                continue
            c = colors.get(v)
            ax.scatter(
                [r["compute"] for r in rs],
                [r["val_ppl"] for r in rs],
                s=14,
                color=c,
                alpha=0.7,
                label=LABELS.get(v, v),
            )
            f = body["fits"].get(v)
            if f is None:
                continue
            fit = f["_fit"]
            lo_c = min(r["compute"] for r in rs)
            xs = [lo_c * (target / lo_c) ** (k / 60) for k in range(61)]
            preds = [fit.predict(x) for x in xs]
            ax.plot(xs, [math.exp(p["loss"]) for p in preds], color=c, lw=1.2)
            ax.fill_between(
                xs,
                [math.exp(p["lo"]) for p in preds],
                [math.exp(p["hi"]) for p in preds],
                color=c,
                alpha=0.12,
            )
        ax.axvline(fit.c_max if body["fits"] else target, color="0.6", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training compute C = 6 N D (FLOP)")
        ax.set_ylabel("validation perplexity")
        ax.set_title(
            f"{corpus}: fits extended to the paper preset (right of the dotted line: "
            "extrapolation)",
            fontsize=8,
        )
        ax.legend(fontsize=7)
        gx = fig.add_subplot(2, ncols, ncols + i + 1)
        gx.axhline(0.0, color="tab:blue", lw=1.0, label="RoPE")
        for v in variants:
            gaps = [
                g for row in body["rungs"] for g in row["paired"].get(v, {}).get("loss_gaps", [])
            ]
            if not gaps:
                continue
            gx.scatter(
                [c for c, _ in gaps],
                [g for _, g in gaps],
                s=14,
                alpha=0.7,
                color=colors.get(v),
                label=LABELS.get(v, v),
            )
            means: dict[float, list[float]] = {}
            for c, g in gaps:
                means.setdefault(c, []).append(g)
            xs = sorted(means)
            gx.plot(xs, [sum(means[x]) / len(means[x]) for x in xs], color=colors.get(v), lw=1.0)
        gx.set_xscale("log")
        gx.set_xlabel("training compute C = 6 N D (FLOP)")
        gx.set_ylabel("val loss − RoPE's, same seed (nats)")
        gx.set_title(f"{corpus}: paired gap to RoPE (points: seeds, line: mean)", fontsize=8)
        gx.legend(fontsize=7)
    return save_figure(fig, out_path)


def write_ladder_report(
    config: Any,
    results: Sequence[dict],
    variants: Sequence[str],
    target: dict[str, Any],
    log: Callable[[str], Any] | None = None,
) -> dict[str, str]:
    """Write ``OUT/ladder.md``, ``ladder.json`` and ``ladder.png`` for a
    :class:`~.ladder.LadderConfig`, the fits extrapolated to ``target``
    (:meth:`~.ladder.Ladder.target_compute`); returns their paths."""
    ladder = config.ladder
    rungs = [r.name for r in ladder.rungs]
    corpora = tuple(dict.fromkeys(r["corpus"] for r in results))
    payload = ladder_payload(results, rungs, corpora, variants, target)
    meta = {
        "command": f"`{config.command}`" if config.command else "(Python API)",
        "ladder": ladder.description,
        "runs": str(len(results)),
    }
    md = _markdown(payload, variants, meta)
    clean = {
        "meta": meta,
        "ladder": ladder.to_dict(),
        "results": list(results),
        "target": target,
        "corpora": {
            c: {
                "rungs": b["rungs"],
                "fits": {
                    v: {k: x for k, x in f.items() if k != "_fit"} for v, f in b["fits"].items()
                },
            }
            for c, b in payload["corpora"].items()
        },
    }
    json_path, md_path = write_report(config.out, "ladder", clean, md)
    files = {"json": str(json_path), "markdown": str(md_path)}
    png = plot_ladder(payload, results, variants, Path(config.out) / "ladder.png", log)
    if png is not None:
        files["png"] = str(png)
    if log is not None:
        log(md)
    return files
