"""Fine-tuning runs of Tables 2-4 and their code / math evaluation, cached by settings.

See :mod:`complexformer_lab.reproduce.runner` for the whole protocol and :mod:`.finetune` for the
recipes. A fine-tuning run ``OUT/finetune/<task>/<variant>/seed<k>`` continues the training
of ``OUT/runs/<variant>/seed<k>``; its evaluation is saved in
``RUN/eval/<suite>-<benchmark>-<key>/`` and read back instead of repeated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from complexformer.evaluation.code_suite import run_code_suite
from complexformer.evaluation.math_suite import run_math_suite
from complexformer.lm import load_run, train
from complexformer.results import write_json

from .evaluate import settings_key
from .finetune import math_corpus_file, math_problem_file
from .plan import PlannedRun, ReproduceConfig
from .variants import Scale

__all__ = [
    "benchmark_name",
    "cached_task_result",
    "evaluate_task_run",
    "prepare_task_data",
    "task_settings",
    "train_task_run",
]


def benchmark_name(source: str) -> str:
    """A short name of a benchmark source: ``humaneval``, ``mbpp``, ``gsm8k``, ``math``,
    ``synthetic`` or the stem of a JSONL file."""
    name = Path(source).name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name.lower()


def task_settings(config: ReproduceConfig, task: str) -> dict[str, dict[str, Any]]:
    """The evaluation settings of ``task``, one dict per benchmark (its hash names the
    files)."""
    scale = config.scale
    assert isinstance(scale, Scale) and scale.finetune is not None
    spec = scale.finetune
    out: dict[str, dict[str, Any]] = {}
    for source in config.benchmarks(task):
        if task == "code":
            d = spec.code_config(source).to_dict()
        else:
            d = spec.math_config(source).to_dict()
            if source == "synthetic":
                d["synthetic_problems"] = list(spec.synthetic_problems)
        d.pop("progress", None)
        out[benchmark_name(source)] = {"source": source, **d}
    return out


def _paths(run: PlannedRun, settings: dict[str, dict[str, Any]], steps: Any) -> dict[str, Path]:
    suite = "code" if run.task == "code" else "math"
    keys = {name: settings_key({**s, "steps": steps}) for name, s in settings.items()}
    return {
        name: run.run_dir / "eval" / f"{suite}-{name}-{k}" / "result.json"
        for name, k in keys.items()
    }


def cached_task_result(
    run: PlannedRun, settings: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The run's result from its saved files, or None if it is unfinished or any is missing."""
    if not run.finished:
        return None
    summary = run.summary()
    paths = _paths(run, settings, summary.get("steps"))
    if not all(p.is_file() for p in paths.values()):
        return None
    return _result(run, summary, paths)


def _result(run: PlannedRun, summary: dict[str, Any], paths: dict[str, Path]) -> dict[str, Any]:
    scores = {name: json.loads(p.read_text(encoding="utf-8")) for name, p in paths.items()}
    params = next((s.get("params") for s in scores.values()), None)
    return {
        "variant": run.variant,
        "seed": run.seed,
        "task": run.task,
        "run_dir": str(run.run_dir),
        "params": params,
        "steps": summary.get("steps"),
        "train_time_s": summary.get("elapsed_s"),
        "train_val_ppl": summary.get("val_ppl"),
        run.task: {name: s["metrics"] for name, s in scores.items()},
        "eval_time_s": sum(s.get("time_s", 0.0) for s in scores.values()),
    }


def _seconds(timing: dict[str, Any]) -> float:
    """A suite's wall time: ``total_s`` (code) or ``generate_s`` (math)."""
    return float(timing.get("total_s", timing.get("generate_s", 0.0)))


def prepare_task_data(config: ReproduceConfig, log: Callable[[str], Any]) -> None:
    """Write the local data files the fine-tuning runs and the math suite read: the math
    fine-tuning corpus and the synthetic test problems (when used)."""
    scale = config.scale
    assert isinstance(scale, Scale) and scale.finetune is not None
    if "math" in config.tasks:
        template = scale.finetune.math_config("synthetic").prompt_template
        spec = math_corpus_file(config.out, scale.finetune, template)
        log(f"reproduce: math fine-tuning corpus {spec}")
        for source in config.benchmarks("math"):
            math_problem_file(config.out, source, scale.finetune)


def train_task_run(run: PlannedRun, log: Callable[[str], Any] | None) -> dict[str, Any] | None:
    """Fine-tune (resumably) from the pre-training run named by ``init_from``.

    Raises:
        ValueError: the pre-training run is not finished.
    """
    base = Path(run.train_config.init_from or "")
    if not (base / "summary.json").is_file():
        raise ValueError(f"{run.name}: the pre-training run {base} is not finished; train it first")
    return train(run.model_config, run.train_config, resume=True, log=log)


def evaluate_task_run(
    run: PlannedRun,
    config: ReproduceConfig,
    settings: dict[str, dict[str, Any]],
    device: torch.device,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Evaluate a finished fine-tuning run on every benchmark whose files are missing and
    return its result (``{"variant", "seed", "task", "params", <task>: {benchmark:
    metrics}, ...}``)."""
    scale = config.scale
    assert isinstance(scale, Scale) and scale.finetune is not None
    spec = scale.finetune
    summary = run.summary()
    paths = _paths(run, settings, summary.get("steps"))
    missing = [name for name, p in paths.items() if not p.is_file()]
    if missing:
        loaded = load_run(run.run_dir, device=device)
        model, tok = loaded.model, loaded.tokenizer
        params = sum(p.numel() for p in model.parameters())
        for name in missing:
            source = settings[name]["source"]
            target = paths[name].parent
            if run.task == "code":
                payload = run_code_suite(model, tok, spec.code_config(source), target, log=log)
            else:
                data = math_problem_file(config.out, source, spec)
                payload = run_math_suite(model, tok, spec.math_config(data), str(target), log=log)
            write_json(
                paths[name],
                {
                    "settings": settings[name],
                    "steps": summary.get("steps"),
                    "params": params,
                    "metrics": payload["metrics"],
                    "time_s": _seconds(payload.get("timing") or {}),
                },
            )
        del loaded, model
    return _result(run, summary, paths)
