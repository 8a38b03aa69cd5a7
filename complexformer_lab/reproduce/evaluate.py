"""Evaluating a finished run of a reproduction, with results cached by settings.

See :mod:`complexformer_lab.reproduce.runner` for the whole protocol.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from complexformer.data import load_corpus, load_token_splits
from complexformer.evaluation.extrapolation import ExtrapolationConfig, run_extrapolation_suite
from complexformer.evaluation.genppl import load_evaluator
from complexformer.evaluation.text import TextSuiteConfig, run_text_suite
from complexformer.lm import load_run
from complexformer.results import write_json
from complexformer.training import evaluate_perplexity

from .plan import PlannedRun, ReproduceConfig
from .variants import Scale

__all__ = ["cached_result", "eval_paths", "eval_settings", "evaluate_run", "settings_key"]


# ---------------------------------------------------------------------- evaluation settings
def settings_key(settings: dict[str, Any]) -> str:
    """A short hash of evaluation settings (10 hex digits) that names their result files.

    The settings are hashed as sorted JSON, so the key does not depend on the order of the
    dict; any setting that changes names another file, and an earlier result is not reused.
    """
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def eval_settings(config: ReproduceConfig) -> dict[str, dict[str, Any]]:
    """The evaluation settings of the plan, one dict per piece (``ppl``, ``text``,
    ``extrapolation`` when that table is requested); each piece's hash names its files."""
    scale = config.scale
    assert isinstance(scale, Scale)
    data = config.data_spec
    text = asdict(scale.text_config(data, config.evaluator_spec))
    text.pop("progress", None)
    out: dict[str, dict[str, Any]] = {
        "ppl": {
            "data": data,
            "splits": ["val", "test"],
            "batch_size": scale.ppl_batch_size,
            "max_blocks": scale.ppl_max_blocks,
        },
        "text": text,
    }
    if "extrapolation" in config.tables:
        ex = asdict(scale.extrapolation_config("cpu"))
        for k in ("device", "show_progress"):
            ex.pop(k, None)
        ex["multipliers"] = list(ex["multipliers"])
        out["extrapolation"] = ex
    return out


def eval_paths(
    run_dir_: Path, settings: dict[str, dict[str, Any]], steps: int | None
) -> dict[str, Path]:
    """Where each evaluation piece of a run is saved: ``RUN/eval/ppl-<key>.json``,
    ``RUN/eval/text-<key>/text.json``, ``RUN/eval/extrapolation-<key>/extrapolation.json``;
    ``<key>`` hashes the piece's settings and the run's number of steps."""
    paths = {}
    for piece, s in settings.items():
        key = settings_key({**s, "steps": steps})
        if piece == "ppl":
            paths[piece] = run_dir_ / "eval" / f"ppl-{key}.json"
        else:
            paths[piece] = run_dir_ / "eval" / f"{piece}-{key}" / f"{piece}.json"
    return paths


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _result_from_files(run: PlannedRun, paths: dict[str, Path]) -> dict[str, Any]:
    summary = run.summary()
    ppl = _read(paths["ppl"])
    text = _read(paths["text"])
    m = text["metrics"]
    result: dict[str, Any] = {
        "variant": run.variant,
        "seed": run.seed,
        "run_dir": str(run.run_dir),
        "pos_scheme": run.model_config.pos_scheme,
        "pcl": run.model_config.pcl,
        "params": ppl["params"],
        "steps": summary.get("steps"),
        "tokens_seen": summary.get("tokens_seen"),
        "train_time_s": summary.get("elapsed_s"),
        "train_val_ppl": summary.get("val_ppl"),
        "val_loss": ppl["val"]["loss"],
        "val_ppl": ppl["val"]["ppl"],
        "test_loss": ppl["test"]["loss"],
        "test_ppl": ppl["test"]["ppl"],
        "gen_ppl": m.get("gen_ppl"),
        "gen_ppl_mean_per_sample": m.get("gen_ppl_mean_per_sample"),
        "dist_1": m.get("dist_1"),
        "dist_2": m.get("dist_2"),
        "rep_4": m.get("rep_4"),
        "num_prompts": m.get("num_prompts"),
        "mean_new_tokens": m.get("mean_new_tokens"),
        "eval_time_s": ppl.get("time_s", 0.0) + sum(text.get("timing", {}).values()),
    }
    if "extrapolation" in paths:
        ex = _read(paths["extrapolation"])
        res = ex["runs"][0]["results"]
        result["extrapolation"] = {str(r["multiplier"]): r["ppl"] for r in res}
        result["max_seq_len"] = ex["runs"][0]["max_seq_len"]
        result["eval_time_s"] += ex.get("time_s", 0.0)
    return result


def cached_result(run: PlannedRun, settings: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The run's result from its saved evaluation files, or None if any is missing."""
    if not run.finished:
        return None
    paths = eval_paths(run.run_dir, settings, run.summary().get("steps"))
    if not all(p.is_file() for p in paths.values()):
        return None
    return _result_from_files(run, paths)


class EvalContext:
    """What evaluation shares across runs: the evaluator (loaded once, lazily) and the
    val/test token arrays (per corpus and tokenizer)."""

    def __init__(
        self,
        evaluator_spec: str | None,
        device: torch.device,
        evaluator: Any = None,
        log: Callable[[str], Any] = print,
    ) -> None:
        self.spec = evaluator_spec
        self.device = device
        self._evaluator = evaluator
        self._tokens: dict[tuple[str, str], dict[str, Any]] = {}
        self._corpora: dict[str, Any] = {}
        self.log = log
        self.evaluator_load_s = 0.0
        self.evaluated = 0

    def evaluator(self) -> Any:
        if self.spec is None:
            return None
        if self._evaluator is None:
            t0 = time.perf_counter()
            self.log(f"reproduce: loading the gen-PPL evaluator {self.spec} (once)")
            self._evaluator = load_evaluator(self.spec, device=self.device)
            self.evaluator_load_s = time.perf_counter() - t0
            self.log(f"reproduce: evaluator loaded in {self.evaluator_load_s:.0f} s")
        return self._evaluator

    def tokens(self, data: str, tokenizer: Any) -> dict[str, Any]:

        key = (data, tokenizer.fingerprint)
        if key not in self._tokens:
            if data not in self._corpora:
                self._corpora[data] = load_corpus(data)
            self._tokens[key] = load_token_splits(
                self._corpora[data], tokenizer, splits=("val", "test"), show_progress=False
            )
        return self._tokens[key]


def evaluate_run(
    run: PlannedRun,
    settings: dict[str, dict[str, Any]],
    context: EvalContext,
) -> dict[str, Any]:
    """Evaluate a finished run (only the pieces whose files are missing) and return its
    result dict (see :mod:`.table`)."""

    steps = run.summary().get("steps")
    paths = eval_paths(run.run_dir, settings, steps)
    missing = [p for p, path in paths.items() if not path.is_file()]
    if missing:
        loaded = load_run(run.run_dir, device=context.device)
        model, tok = loaded.model, loaded.tokenizer
        if "ppl" in missing:
            s = settings["ppl"]
            t0 = time.perf_counter()
            toks = context.tokens(s["data"], tok)
            res = {
                split: evaluate_perplexity(
                    model,
                    toks[split],
                    model.config.max_seq_len - 1,
                    s["batch_size"],
                    max_blocks=s["max_blocks"],
                    device=context.device,
                )
                for split in s["splits"]
            }
            write_json(
                paths["ppl"],
                {
                    "settings": s,
                    "steps": steps,
                    **res,
                    "params": sum(p.numel() for p in model.parameters()),
                    "time_s": time.perf_counter() - t0,
                },
            )
        if "text" in missing:
            cfg = TextSuiteConfig(**{**settings["text"], "progress": False})
            run_text_suite(model, tok, cfg, paths["text"].parent, evaluator=context.evaluator())
        if "extrapolation" in missing:
            ex = settings["extrapolation"]
            cfg = ExtrapolationConfig(
                **{
                    **ex,
                    "multipliers": tuple(ex["multipliers"]),
                    "device": str(context.device),
                    "show_progress": False,
                }
            )
            t0 = time.perf_counter()
            payload = run_extrapolation_suite(
                [loaded], cfg, paths["extrapolation"].parent, names=[run.name]
            )
            payload = {k: v for k, v in payload.items() if k != "files"}
            write_json(paths["extrapolation"], {**payload, "time_s": time.perf_counter() - t0})
        del loaded, model
    return _result_from_files(run, paths)
