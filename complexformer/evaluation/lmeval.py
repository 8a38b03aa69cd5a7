"""The lm-evaluation-harness suite: a run scored by EleutherAI's harness through transformers.

``complexformer evaluate --suite lm-eval --tasks ...`` exports the run to a temporary
transformers directory (:func:`complexformer.hf.export.save_hf`; a directory that already is
an export is used as it is), loads it in the harness as ``--model hf`` with
``trust_remote_code=True`` and calls ``lm_eval.simple_evaluate`` with a ``TaskManager`` whose
``include_path`` holds the tasks shipped in ``lm_eval_tasks/``:

* ``complexformer_ppl``: ``loglikelihood_rolling`` over held-out documents: the first
  ``max_documents`` documents of the ``split`` of the corpus (``data``, default the run's
  training corpus), written as JSONL and passed to the task as ``ppl_file``. The harness
  reports word perplexity exp(-Σ log p / Σ words), byte perplexity exp(-Σ log p / Σ bytes)
  and bits per byte -Σ log p / (Σ bytes · ln 2), Σ over the documents;
* ``complexformer_mc``: a small multiple-choice task from ``mc_questions.jsonl`` (acc,
  acc_norm).

Any other task name is one of the harness's own (``hellaswag``, ``gsm8k``, ...), which
downloads its data; with only the shipped tasks the harness runs offline (``HF_HUB_OFFLINE``
and ``HF_DATASETS_OFFLINE`` are set while it runs). Writes ``lm-eval.json``, ``lm-eval.md``
and the scored documents ``lm-eval_documents.jsonl``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigBase
from ..data import load_corpus
from ..hf import register_auto_classes
from ..runtime import require
from ..storage import atomic_write_text
from .suite import (
    BATCH_SIZE,
    DATA,
    NUM_FEWSHOT,
    SEED,
    SPLIT,
    Suite,
    data_spec,
    fmt_number,
    model_info,
    option,
    register_suite,
)

__all__ = [
    "LOCAL_TASKS",
    "TASKS_DIR",
    "LmEvalConfig",
    "LmEvalSuite",
    "run_harness",
    "run_lmeval_suite",
]

#: The task definitions shipped with the package (``--include_path`` of the harness).
TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"
PPL_TASK, MC_TASK = "complexformer_ppl", "complexformer_mc"
LOCAL_TASKS = (PPL_TASK, MC_TASK)
_SPLITS = ("train", "val", "test")
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


@dataclass
class LmEvalConfig(ConfigBase):
    """Settings of the lm-eval suite.

    Attributes:
        tasks: task names: the shipped ``complexformer_ppl`` and ``complexformer_mc`` or any
            task of lm-evaluation-harness (online).
        data: corpus spec of ``complexformer_ppl``'s documents; None: the run's corpus.
        split: the split they come from (``"val"``).
        max_documents: documents of the split written for ``complexformer_ppl``.
        limit: the harness's ``limit``: at most this many documents per task (None: all).
        num_fewshot: few-shot examples (None: each task's default).
        batch_size: the harness's batch size.
        device: where the harness runs the model (``"cpu"``, ``"cuda"``).
        seed: the harness's random, numpy, torch and few-shot seeds.
    """

    tasks: tuple[str, ...] = LOCAL_TASKS
    data: str | None = None
    split: str = "val"
    max_documents: int = 200
    limit: int | None = None
    num_fewshot: int | None = None
    batch_size: int = 8
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        tasks = (self.tasks,) if isinstance(self.tasks, str) else tuple(self.tasks)
        tasks = tuple(t for item in tasks for t in str(item).split(",") if t.strip())
        if not tasks:
            raise ValueError(f"tasks must name at least one task, e.g. {', '.join(LOCAL_TASKS)}")
        self.tasks = tuple(t.strip() for t in tasks)
        if self.split not in _SPLITS:
            raise ValueError(f"split must be one of {', '.join(_SPLITS)}, got {self.split!r}")
        for name in ("max_documents", "batch_size", "limit"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_fewshot is not None and self.num_fewshot < 0:
            raise ValueError(f"num_fewshot must be >= 0, got {self.num_fewshot}")

    @property
    def offline(self) -> bool:
        """Only shipped tasks: the harness needs no network."""
        return all(t in LOCAL_TASKS for t in self.tasks)


def held_out_documents(spec: str, split: str, max_documents: int) -> list[str]:
    """The first ``max_documents`` non-empty documents of ``split`` of the corpus ``spec``."""
    docs = []
    for doc in load_corpus(spec).documents(split):
        if doc.strip():
            docs.append(doc)
        if len(docs) >= max_documents:
            break
    if not docs:
        raise ValueError(f"the {split} split of {spec!r} holds no documents; choose --split")
    return docs


def write_documents(docs: list[str], path: str | os.PathLike) -> Path:
    """Documents as JSONL ``{"text": ...}`` (the format ``complexformer_ppl`` reads)."""
    return atomic_write_text(path, "".join(json.dumps({"text": d}) + "\n" for d in docs))


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_harness(
    model_dir: str | os.PathLike, config: LmEvalConfig, ppl_file: str | None = None
) -> dict[str, Any]:
    """``lm_eval.simple_evaluate`` on an exported model directory; the harness's results dict.

    Args:
        model_dir: a transformers model directory (``complexformer export``).
        config: the settings (tasks, limit, few-shot, batch size, device, seed).
        ppl_file: JSONL documents of ``complexformer_ppl`` (None: the shipped sample).

    Raises:
        ImportError: lm-evaluation-harness is not installed (the ``lmeval`` extra).
    """
    lm_eval = require("lm_eval", "lmeval", "the lm-eval suite")
    from lm_eval.tasks import TaskManager

    register_auto_classes()  # the harness's auto classes resolve model_type complexformer
    metadata = {"ppl_file": ppl_file} if ppl_file is not None else {}
    offline = dict.fromkeys(_OFFLINE_VARS, "1") if config.offline else {}
    with _environment(offline):
        manager = TaskManager(
            include_path=str(TASKS_DIR), include_defaults=not config.offline, metadata=metadata
        )
        return lm_eval.simple_evaluate(
            model="hf",
            model_args={
                "pretrained": str(model_dir),
                "trust_remote_code": True,
                "dtype": "float32",
            },
            tasks=list(config.tasks),
            num_fewshot=config.num_fewshot,
            batch_size=config.batch_size,
            device=config.device,
            limit=config.limit,
            task_manager=manager,
            log_samples=False,
            random_seed=config.seed,
            numpy_random_seed=config.seed,
            torch_random_seed=config.seed,
            fewshot_random_seed=config.seed,
        )


def _metrics(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` from the harness's ``results`` (``"acc,none"`` keys)."""
    out: dict[str, dict[str, float]] = {}
    for task, values in results.get("results", {}).items():
        row = {}
        for key, value in values.items():
            metric, _, _filter = key.partition(",")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and metric != "":
                row[metric] = float(value)
        out[task] = row
    return out


@register_suite
class LmEvalSuite(Suite):
    """lm-evaluation-harness on the run (see the module docstring)."""

    name = "lm-eval"
    position = 90
    description = "EleutherAI's lm-evaluation-harness on the model exported for transformers"
    config_class = LmEvalConfig
    options = (
        option("--tasks", metavar="TASK"),
        DATA,
        SPLIT,
        option("--max-documents", metavar="N"),
        option("--limit", metavar="N"),
        NUM_FEWSHOT,
        BATCH_SIZE,
        SEED,
    )
    lists_files = True

    def reads_corpus(self) -> bool:
        return PPL_TASK in self.config.tasks

    def load_data(self, run: Any) -> dict[str, Any]:
        cfg = self.config
        if PPL_TASK not in cfg.tasks:
            return {"spec": None, "documents": []}
        spec = data_spec(cfg.data, run, "data")
        return {"spec": spec, "documents": held_out_documents(spec, cfg.split, cfg.max_documents)}

    def compute(self, run: Any, data: dict[str, Any]) -> dict[str, Any]:
        # the export needs transformers: imported here, so that declaring the suite (and
        # building the evaluate parser) does not import it; the harness is checked first
        require("lm_eval", "lmeval", "the lm-eval suite")
        from ..hf.export import save_hf
        from ..hf.markers import is_export_dir

        source = getattr(run, "source", None)
        with tempfile.TemporaryDirectory(prefix="complexformer-lmeval-") as tmp:
            if source is not None and is_export_dir(source):
                model_dir, exported = Path(source), str(source)
            else:
                self.say("lm-eval: exporting the run to a temporary transformers directory")
                model_dir, exported = save_hf(run.model, run.tokenizer, Path(tmp) / "model"), None
            ppl_file = None
            if data["documents"]:
                ppl_file = str(write_documents(data["documents"], Path(tmp) / "documents.jsonl"))
            results = run_harness(model_dir, self.config, ppl_file)
        self._documents = data["documents"]
        return {
            "model": model_info(run.model),
            "export": exported,
            "ppl_data": {"spec": data["spec"], "split": self.config.split},
            "documents": len(data["documents"]),
            "metrics": _metrics(results),
            "versions": {k: v for k, v in results.get("versions", {}).items()},
            "n_samples": results.get("n-samples", {}),
            "lm_eval_version": _lm_eval_version(),
        }

    def write_files(self, payload: dict[str, Any], out: Path) -> dict[str, str]:
        docs = getattr(self, "_documents", [])
        if not docs:
            return {}
        return {"documents": str(write_documents(docs, out / f"{self.name}_documents.jsonl"))}

    def markdown(self, payload: dict[str, Any]) -> str:
        lines = [
            "# lm-evaluation-harness",
            "",
            f"Tasks: {', '.join(self.config.tasks)}; model: {payload['model']['pos_scheme']}, "
            f"{payload['model']['parameters']:,} parameters; lm-eval "
            f"{payload['lm_eval_version']}.",
        ]
        if payload["documents"]:
            spec = payload["ppl_data"]
            lines.append(
                f"Perplexity documents: {payload['documents']} of the {spec['split']} split of "
                f"`{spec['spec']}`."
            )
        lines += ["", "| task | metric | value | stderr |", "| --- | --- | ---: | ---: |"]
        for task, row in payload["metrics"].items():
            for metric, value in row.items():
                if metric.endswith("_stderr"):
                    continue
                err = row.get(f"{metric}_stderr")
                lines.append(f"| {task} | {metric} | {fmt_number(value)} | {fmt_number(err)} |")
        return "\n".join(lines)

    def summary(self, payload: dict[str, Any]) -> str | None:
        parts = []
        for task, row in payload["metrics"].items():
            for metric in ("word_perplexity", "acc", "exact_match", "pass@1"):
                if metric in row:
                    parts.append(f"{task} {metric} {fmt_number(row[metric])}")
                    break
        return "lm-eval: " + "; ".join(parts) if parts else None


def _lm_eval_version() -> str | None:
    try:
        return importlib.metadata.version("lm_eval")
    except importlib.metadata.PackageNotFoundError:
        return None


def run_lmeval_suite(
    run: Any,
    config: LmEvalConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Run lm-evaluation-harness on ``run`` (a path or a loaded run); see the module docstring.

    Returns:
        The payload written to ``out_dir/lm-eval.json`` (``metrics``: ``{task: {metric:
        value}}``).
    """
    return LmEvalSuite(config, log).run(run, out_dir)
