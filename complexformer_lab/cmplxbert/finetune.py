"""The CmplxBERT comparison of ``cbert-finetune``: every model kind, once per seed.

Tamburini 2024 (sec. 5) compares a complexified, further pre-trained BERT (CmplxBERTLoRA_r)
with the real BERT fine-tuned in full and with a real LoRA of about the same number of
trainable parameters, reporting mean ± std over runs. :func:`finetune` runs all of them on
the same data, the same seeds and the same schedule, each run through the library's
:func:`complexformer.cmplxbert.finetune.finetune_run`, and reports accuracy and macro-F1 on
the test split against the majority class, paired tests between the models, and a plot. Each
finished (model, seed) run is saved as JSON at once with its settings; a rerun skips it, and
a rerun with other settings into the same folder is an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from complexformer.cmplxbert.finetune import (
    FinetuneConfig,
    finetune_run,
    matched_real_lora_rank,
    prepare_task,
    run_settings,
)
from complexformer.cmplxbert.finetune_task import PROBE_EXAMPLES
from complexformer.cmplxbert.labelled import ClassificationTask
from complexformer.cmplxbert.metrics import classification_metrics, mean_std, token_metrics
from complexformer.results import format_p, markdown_table, paired_t_test, write_json, write_report
from complexformer.runtime import cpu_settings, require
from complexformer.storage import atomic_output

__all__ = ["GROWTH_WINDOW", "finetune"]

#: Updates over which the summary reports the adapter growth (the largest probe value).
GROWTH_WINDOW = 100


def finetune(
    model_path: str,
    cfg: FinetuneConfig,
    out_dir: str | Path,
    log: Callable[[str], Any] | None = print,
    *,
    verify: bool = True,
) -> dict[str, Any]:
    """Fine-tune every model kind of ``cfg.models`` once per seed and report mean ± std.

    Args:
        model_path: a CmplxBERT directory (from ``complexformer cbert-complexify``), or a real BERT
            (hub name, local directory, or ``minilm``) to complexify without further
            pre-training. The real baselines use the CmplxBERT's base.
        cfg: the settings.
        out_dir: results: ``runs/<kind>-seed<s>.json`` (one per finished run; rerunning the
            same command skips them), ``train/<kind>-seed<s>/`` (each run's folder, with the
            kept CmplxBERT in ``model/``), ``finetune.json``, ``finetune.md`` and
            ``finetune.png``.
        log: message sink.
        verify: check a CmplxBERT directory against its manifest before anything is read
            from it (False: read it unchecked, ``--no-verify``).

    Returns:
        The ``finetune.json`` payload: config, task sizes, majority baseline, per-run results
        and per-model mean ± std of test accuracy and macro-F1.
    """
    require("transformers", "hf", "finetune")
    log = log or (lambda _m: None)
    out = Path(out_dir)
    with cpu_settings(cfg.num_threads or None):
        prepared = prepare_task(model_path, cfg, log, verify=verify)
        (out / "runs").mkdir(parents=True, exist_ok=True)
        task, data = prepared.task, prepared.data
        majority = _majority(task, data, cfg)
        log(f"majority class '{majority['label']}': test accuracy {majority['accuracy']:.3f}")
        runs: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        real_rank = cfg.real_lora_rank
        settings = run_settings(model_path, cfg)  # of every run here
        for kind in cfg.models:
            for seed in cfg.seeds:
                path = out / "runs" / f"{kind}-seed{seed}.json"
                if path.is_file():
                    rec = json.loads(path.read_text(encoding="utf-8"))
                    _check_finished(path, rec, settings)
                    log(f"{kind} seed {seed}: done before ({path}), skipped")
                    runs.append(rec)
                    counts[kind] = rec["trainable_params"]
                    continue
                if kind == "real-lora" and real_rank is None:
                    real_rank, target = matched_real_lora_rank(
                        model_path, task.num_labels, cfg, counts.get("cmplxbert"), verify=verify
                    )
                    log(f"real LoRA rank {real_rank} (matched to {target:,} trainable params)")
                run_dir = out / "train" / f"{kind}-seed{seed}"
                rec = finetune_run(
                    model_path, prepared, cfg, kind, seed, run_dir,
                    real_lora_rank=real_rank, verify=verify,
                )  # fmt: skip
                counts[kind] = rec["trainable_params"]
                write_json(path, rec)
                runs.append(rec)
                log(
                    f"{kind} seed {seed}: test accuracy {rec['test']['accuracy']:.4f}, macro-F1 "
                    f"{rec['test']['macro_f1']:.4f} ({rec['trainable_params']:,} trainable, "
                    f"{rec['train_s']:.0f} s)"
                )
        summary = _summarise(runs, cfg.models)
        metric = "macro_f1" if task.task_type == "token" else "accuracy"
        paired = _paired(runs, cfg.models, metric)
        payload = {
            "model": model_path,
            "config": asdict(cfg),
            "pooling": prepared.pooling,
            "task": task.name,
            "task_type": task.task_type,
            "labels": task.labels,
            "sizes": {s: len(v[0]) for s, v in data.items()},
            "majority": majority,
            "summary": summary,
            "paired": paired,
            "runs": [
                {k: v for k, v in r.items() if k not in ("test_predictions", "settings")}
                for r in runs
            ],
        }
        write_report(out, "finetune", payload, _markdown(payload))
        _plot(payload, metric, out / "finetune.png")
        return payload


def _check_finished(path: Path, rec: dict[str, Any], want: dict[str, Any]) -> None:
    """A finished run is reused only for the settings ``want`` (its model path included);
    otherwise a ``ValueError`` names what differs (records written before settings were kept
    pass)."""
    have = rec.get("settings")
    if have is None:
        return
    diff = [k for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k)]
    if diff:
        shown = ", ".join(f"{k}={have.get(k)!r} (now {want.get(k)!r})" for k in diff)
        raise ValueError(
            f"{path} is a finished run made with other settings: {shown}; fine-tune into "
            f"another --out, or delete {path} to run it again"
        )


def _majority(task: ClassificationTask, data, cfg: FinetuneConfig) -> dict[str, Any]:
    """The majority-class (tag) baseline on the test examples used."""
    majority = task.majority_baseline("test")
    if cfg.max_eval_examples is None:
        return majority
    top = task.labels.index(majority["label"])
    y = data["test"][1]
    if task.task_type == "token":
        words = [[t for t in lab if t != -100] for lab in y]
        metrics = token_metrics(words, [[top] * len(w) for w in words], task.labels)
    else:
        metrics = classification_metrics(y, [top] * len(y))
    return {"label": majority["label"], **metrics}


def _plot(p: dict[str, Any], metric: str, path: Path) -> None:
    """Each model's test ``metric`` per seed (points) and mean (bar), the majority class as a
    line; skipped without matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    kinds = list(p["summary"])
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(kinds), 3.6))
    for i, k in enumerate(kinds):
        ys = [r["test"][metric] for r in p["runs"] if r["model"] == k]
        ax.bar(i, sum(ys) / len(ys), color="#9ecae1", width=0.6)
        ax.plot([i] * len(ys), ys, "o", color="#08519c", markersize=4)
    ax.axhline(p["majority"][metric], color="k", linewidth=0.8, label="majority class")
    ax.set_xticks(range(len(kinds)), kinds, fontsize=8)
    ax.set_ylabel(f"test {metric.replace('_', '-')}")
    ax.set_title(f"{p['task']}: mean (bar) and seeds (points)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:  # refuses a symbolic link at path
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def _paired(runs: list[dict[str, Any]], kinds, metric: str) -> dict[str, Any]:
    """The first model kind against each other one on the test ``metric``: the difference
    paired over the seeds both have (same seed: same data order and new-weight init), its
    two-sided t-test, and the ratio of the means."""
    if len(kinds) < 2:
        return {}
    by = {k: {r["seed"]: r["test"][metric] for r in runs if r["model"] == k} for k in kinds}
    first, out = kinds[0], {"metric": metric, "model": kinds[0], "against": {}}
    for other in kinds[1:]:
        seeds = sorted(set(by[first]) & set(by[other]))
        if not seeds:
            continue
        test = paired_t_test([by[first][s] - by[other][s] for s in seeds])
        mine = sum(by[first][s] for s in seeds) / len(seeds)
        theirs = sum(by[other][s] for s in seeds) / len(seeds)
        out["against"][other] = {**test, "ratio": mine / theirs if theirs else None}
    return out


def _summarise(runs: list[dict[str, Any]], kinds) -> dict[str, dict[str, Any]]:
    out = {}
    for kind in kinds:
        rs = [r for r in runs if r["model"] == kind]
        if not rs:
            continue
        acc = mean_std([r["test"]["accuracy"] for r in rs])
        f1 = mean_std([r["test"]["macro_f1"] for r in rs])
        if all("entity_f1" in r["test"] for r in rs):
            ent = mean_std([r["test"]["entity_f1"] for r in rs])
            out.setdefault(kind, {}).update(entity_f1_mean=ent[0], entity_f1_std=ent[1])
        out[kind] = {
            **out.get(kind, {}),
            "n": len(rs),
            "accuracy_mean": acc[0],
            "accuracy_std": acc[1],
            "macro_f1_mean": f1[0],
            "macro_f1_std": f1[1],
            "trainable_params": rs[0]["trainable_params"],
            "train_s_mean": sum(r["train_s"] for r in rs) / len(rs),
        }
        probes = [[g for g in r.get("growth") or [] if g["updates"] <= GROWTH_WINDOW] for r in rs]
        if all(probes):  # adapter growth over the first updates, worst probe of each run
            for key in ("imag_to_real", "cosine"):
                m, sd = mean_std([max(g[key] for g in ps) for ps in probes])
                out[kind].update({f"{key}_max_mean": m, f"{key}_max_std": sd})
    return out


def _markdown(p: dict[str, Any]) -> str:
    names = {
        "cmplxbert": "CmplxBERT-LoRA",
        "cmplxbert-paper": "CmplxBERT-LoRA, paper's start",
        "real": "real BERT (full fine-tuning)",
        "real-lora": "real BERT + real LoRA",
    }
    entity = bool(p["summary"]) and all("entity_f1_mean" in s for s in p["summary"].values())
    rows = [
        [
            names[k],
            s["n"],
            f"{s['trainable_params']:,}",
            f"{s['accuracy_mean']:.4f} ± {s['accuracy_std']:.4f}",
            f"{s['macro_f1_mean']:.4f} ± {s['macro_f1_std']:.4f}",
            *([f"{s['entity_f1_mean']:.4f} ± {s['entity_f1_std']:.4f}"] if entity else []),
            _growth_cell(s, "imag_to_real"),
            _growth_cell(s, "cosine"),
            f"{s['train_s_mean']:.0f}",
        ]
        for k, s in p["summary"].items()
    ]
    m = p["majority"]
    rows.append(
        [
            f"majority class ({m['label']})",
            "-",
            "0",
            f"{m['accuracy']:.4f}",
            f"{m['macro_f1']:.4f}",
            *([f"{m.get('entity_f1', 0.0):.4f}"] if entity else []),
            "-",
            "-",
            "-",
        ]
    )
    c = p["config"]
    head = (
        f"Fine-tuning on `{p['task']}` ({len(p['labels'])} classes; train/validation/test "
        f"{p['sizes']['train']}/{p['sizes']['validation']}/{p['sizes']['test']}), "
        f"{c['epochs']} epochs, lr {c['lr']:g}, batch {c['batch_size']}, max_len "
        f"{c['max_len']}, {p['pooling']} pooling, seeds {list(c['seeds'])}; model "
        f"`{p['model']}`.\n\n"
        + (
            "Test token accuracy (= token-level micro-F1), macro-F1 over tags"
            + (" and entity F1 (BIO chunks, as seqeval)" if entity else "")
            if p.get("task_type") == "token"
            else "Test accuracy and macro-F1"
        )
        + ": mean ± std over seeds. Growth over the first "
        f"{GROWTH_WINDOW} updates, on {PROBE_EXAMPLES} validation examples: the largest "
        "imaginary-to-real energy of the last hidden states and the largest mean pairwise "
        "cosine of the sentence vectors (mean ± std over seeds).\n\n"
    )
    cols = ["model", "seeds", "trainable params", "accuracy", "macro-F1"]
    cols += ["entity F1"] if entity else []
    cols += ["max Im/Re", "max cosine", "train s"]
    table = head + markdown_table(cols, rows, align="lrr" + "r" * (len(cols) - 3))
    pr = p.get("paired") or {}
    if pr.get("against"):
        rows = [
            [names[k], str(t["n"]), f"{t['mean']:+.4f}",
             "no test" if t["p"] is None else format_p(t["p"]),
             "-" if t["ratio"] is None else f"{t['ratio']:.3f}"]
            for k, t in pr["against"].items()
        ]  # fmt: skip
        table += (
            f"\n\n{names[pr['model']]} minus each other model, test {pr['metric']} paired "
            "over seeds (two-sided paired t-test) and the ratio of the means.\n\n"
            + markdown_table(["against", "seeds", "difference", "p", "ratio"], rows, "lrrrr")
        )
    return table


def _growth_cell(s: dict[str, Any], key: str) -> str:
    if f"{key}_max_mean" not in s:
        return "-"
    return f"{s[f'{key}_max_mean']:.3f} ± {s[f'{key}_max_std']:.3f}"
