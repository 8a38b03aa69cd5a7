"""The plan of a reproduction: its configuration and every (variant, seed) run.

See :mod:`complexformer_lab.reproduce.runner` for the whole protocol.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from complexformer.config import ConfigBase
from complexformer.models.config import GPTConfig
from complexformer.training.checkpoint import CHECKPOINTS_DIR, list_checkpoints
from complexformer.training.config import TrainConfig

from .finetune import math_corpus_spec
from .variants import TABLE_TASKS, TABLES, Scale, get_scale, run_dir
from .variants import table_variants as _table_variants

__all__ = [
    "PlannedRun",
    "ReproduceConfig",
    "check_run_settings",
    "finetune_dir",
    "plan_finetunes",
    "plan_runs",
]

#: TrainConfig fields that do not change what is learned (ignored when comparing a run
#: directory's saved settings with the plan).
_TRAIN_IGNORED = (
    "out_dir",
    "num_threads",
    "device",
    "tensorboard",
    "compile",
    "shard",
    "keep_last",
    "log_every",
    "save_every",
    "eval_every",
    "eval_blocks",
    "cache_dir",
    "data_timeout",
    "stop_signals",
    "dist_timeout",
    "async_checkpoint",
    "activation_checkpointing",
    "meta_init",
    "hf_streaming",
)


#: What a run directory's config.json meant by a field it does not have (written before the
#: field existed): PCL on the rotated phases, summed; δ drawn around 0.
_LEGACY_MODEL = {"delta_init": "paper", "pcl_target": "rotated", "pcl_reduce": "sum"}
#: The same for train_config.json: the BPE's sample budget, whose default samples nothing of
#: a train split up to 256 MiB (the scales' corpora), as runs before the field did; AdamW as
#: "auto" chooses it on the CPU (unfused), as runs before the field had it.
_LEGACY_TRAIN = {"tokenizer_sample_bytes": 1 << 28, "fused_adamw": "auto"}


@dataclass
class ReproduceConfig(ConfigBase):
    """What ``complexformer reproduce`` does.

    Attributes:
        out: the output directory (``OUT/runs/<variant>/seed<k>``, ``OUT/table*.md``).
        tables: the paper's tables to reproduce: ``"1"``, ``"2"``, ``"3"``, ``"4"``,
            ``"extrapolation"``; on the command line also ``"ladder"``, the compute ladder
            (RoPE, CMHA w/o PCL and ComplexFormer at several sizes; the tiny scale on CPU,
            paper on GPUs), which runs alone.
        scale: a :class:`Scale` or the name of one in ``complexformer_lab/configs/scales.toml``
            (listed by ``--help``): a model preset with its data, token budget and evaluation.
            ``tiny`` trains the ``micro`` preset on a CPU (about 40 min for Tables 1 and 4
            with 3 seeds on 2 cores), ``small`` the ``small`` preset (CPU hours, GPU
            minutes), ``paper`` the ``paper`` preset as the paper's Appendix A does (45
            epochs of WikiText-103; GPUs).
        seeds: the seeds to run, one run per variant and seed (as ``--seeds 0 1 2``).
        data: corpus spec to train and evaluate on (default None: the scale's, ``stdlib``,
            or WikiText-103 for ``paper``).
        evaluator: gen-PPL evaluator: ``smollm2`` (offline; the tiny and small scales'),
            ``gpt2-large`` (the paper's; the paper scale's), a model directory, a ``.gguf``
            file, or ``"none"``, which skips gen-PPL (default None: the scale's).
        threads: torch CPU threads for training and evaluation (None: torch's default).
        device: ``auto``, ``cpu`` or ``cuda``.
        bf16: train under bfloat16 autocast.
        shard: under torchrun, shard each run over the ranks (FSDP2; ``TrainConfig.shard``).
        train_only: train, do not evaluate or tabulate (automatic under torchrun).
        only: restrict training and evaluation to these runs: ``"VARIANT"`` (all its seeds)
            or ``"VARIANT/seedK"`` (the ladder: ``RUNG``, ``VARIANT``, ``RUNG/VARIANT`` or
            ``RUNG/VARIANT/seedK``); the tables still include the other runs' saved results.
        command: the command line, printed above the tables.
        code_benchmarks: code problem sources of Tables 2 and 4 replacing the scale's
            (``humaneval``, ``mbpp`` (online), HumanEval-format JSONL paths); empty: the
            scale's.
        math_benchmarks: math test sources of Tables 3 and 4 replacing the scale's
            (``gsm8k``, ``math`` (online), ``synthetic``, JSONL paths of question/answer
            records); empty: the scale's.
        budget: the token budget of a scale given in epochs, filled in by
            :func:`~.budget.resolve_token_budget` (the plan prints it).
    """

    out: str
    tables: tuple[str, ...] = ("1",)
    scale: Scale | str = "tiny"
    seeds: tuple[int, ...] = (0, 1, 2)
    data: str | None = None
    evaluator: str | None = None
    threads: int | None = None
    device: str = "auto"
    bf16: bool = False
    shard: bool = False
    train_only: bool = False
    only: tuple[str, ...] = ()
    command: str | None = None
    code_benchmarks: tuple[str, ...] = ()
    math_benchmarks: tuple[str, ...] = ()
    budget: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.out = os.fspath(self.out)
        self.tables = tuple(dict.fromkeys(str(t) for t in self.tables))
        if not self.tables:
            raise ValueError("give at least one table (1, 2, 3, 4, extrapolation)")
        _table_variants(self.tables)  # validates the ids
        if isinstance(self.scale, str):
            self.scale = get_scale(self.scale)
        self.code_benchmarks = tuple(self.code_benchmarks)
        self.math_benchmarks = tuple(self.math_benchmarks)
        if self.scale.finetune is None:
            bad = [t for t in self.tables if t in ("2", "3")]
            if bad:
                raise ValueError(
                    f"table {bad[0]} needs fine-tuning, which scale {self.scale.name!r} does "
                    "not define (Scale.finetune is None)"
                )
        if isinstance(self.seeds, int):
            raise ValueError(
                f"seeds is the list of seeds to run, e.g. seeds=(0, 1, 2); got the number "
                f"{self.seeds!r}"
            )
        self.seeds = tuple(dict.fromkeys(int(s) for s in self.seeds))
        if not self.seeds or min(self.seeds) < 0:
            raise ValueError(f"seeds must be one or more integers >= 0, got {self.seeds!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        names = set(self.variants)
        for item in self.only:
            v, _, s = item.partition("/")
            if v not in names:
                raise ValueError(
                    f"--only {item!r}: {v!r} is not a variant of tables "
                    f"{', '.join(self.tables)} ({', '.join(self.variants)})"
                )
            if s and not (s.startswith("seed") and s[4:].isdigit() and int(s[4:]) in self.seeds):
                raise ValueError(
                    f"--only {item!r}: expected VARIANT/seedK with K one of the seeds "
                    f"{' '.join(map(str, self.seeds))}"
                )

    @property
    def variants(self) -> list[str]:
        """The distinct variants of the tables, in order."""
        return _table_variants(self.tables)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The fine-tuning tasks the tables need (``code``, ``math``), none without a
        fine-tuning recipe."""
        assert isinstance(self.scale, Scale)
        if self.scale.finetune is None:
            return ()
        names = [k for t in self.tables for k in TABLE_TASKS.get(t, ())]
        return tuple(dict.fromkeys(names))

    def task_variants(self, task: str) -> list[str]:
        """The variants fine-tuned for ``task``, in table order."""
        names = [v for t in self.tables if task in TABLE_TASKS.get(t, ()) for v in TABLES[t]]
        return list(dict.fromkeys(names))

    def benchmarks(self, task: str) -> tuple[str, ...]:
        """The code or math benchmarks: the overrides, else the scale's."""
        assert isinstance(self.scale, Scale) and self.scale.finetune is not None
        if task == "code":
            return self.code_benchmarks or self.scale.finetune.code_benchmarks
        return self.math_benchmarks or self.scale.finetune.math_benchmarks

    @property
    def data_spec(self) -> str:
        assert isinstance(self.scale, Scale)
        return self.data or self.scale.data

    @property
    def evaluator_spec(self) -> str | None:
        """The evaluator spec, None when gen-PPL is skipped."""
        assert isinstance(self.scale, Scale)
        spec = self.scale.evaluator if self.evaluator is None else self.evaluator
        return None if (spec or "none").strip().lower() == "none" else spec

    def selected(self, variant: str, seed: int) -> bool:
        """Whether ``--only`` lets this run be trained and evaluated."""
        if not self.only:
            return True
        return variant in self.only or f"{variant}/seed{seed}" in self.only


@dataclass
class PlannedRun:
    """One (variant, seed) of the plan.

    Attributes:
        variant: the variant name.
        seed: the seed.
        run_dir: ``OUT/runs/<variant>/seed<seed>``.
        model_config: its :class:`GPTConfig`.
        train_config: its :class:`TrainConfig`.
        selected: whether ``--only`` selects it.
        task: ``""`` for a pre-training run, ``"code"`` or ``"math"`` for a fine-tuning run
            (which starts from the pre-training run of the same variant and seed).
    """

    variant: str
    seed: int
    run_dir: Path
    model_config: GPTConfig
    train_config: TrainConfig
    selected: bool = True
    task: str = ""

    @property
    def name(self) -> str:
        return (f"{self.task}:" if self.task else "") + f"{self.variant}/seed{self.seed}"

    @property
    def finished(self) -> bool:
        return (self.run_dir / "summary.json").is_file()

    def checkpoint_step(self) -> int | None:
        """The newest checkpoint's step (unverified), or None."""

        found = list_checkpoints(self.run_dir / CHECKPOINTS_DIR)
        return found[-1][0] if found else None

    def summary(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "summary.json").read_text(encoding="utf-8"))


def plan_runs(config: ReproduceConfig) -> list[PlannedRun]:
    """Every (variant, seed) of ``config.tables``: variants in table order, then seeds."""
    scale = config.scale
    assert isinstance(scale, Scale)
    runs = []
    for v in config.variants:
        for seed in config.seeds:
            d = run_dir(config.out, v, seed)
            tc = scale.train_config(
                d, seed, data=config.data_spec, device=config.device, num_threads=config.threads
            )
            if config.bf16:
                tc = tc.replace(bf16=True)
            if config.shard:
                tc = tc.replace(shard=True)
            runs.append(PlannedRun(v, seed, d, scale.model_config(v), tc, config.selected(v, seed)))
    return runs


def finetune_dir(out: str | os.PathLike, task: str, variant: str, seed: int) -> Path:
    """``OUT/finetune/<task>/<variant>/seed<seed>``."""
    return Path(out) / "finetune" / task / variant / f"seed{seed}"


def plan_finetunes(config: ReproduceConfig) -> list[PlannedRun]:
    """The fine-tuning runs of Tables 2-4: per task, variant and seed, continued training of
    ``OUT/runs/<variant>/seed<k>`` (``init_from``, its tokenizer) on the task's corpus with
    the scale's fine-tuning settings (lr 2e-5, Appendix A)."""
    scale = config.scale
    assert isinstance(scale, Scale)
    spec = scale.finetune
    runs: list[PlannedRun] = []
    for task in config.tasks:
        assert spec is not None
        if task == "code":
            data, text_field = spec.code_data, spec.code_text_field
        else:
            data, text_field = math_corpus_spec(config.out), "text"
        for v in config.task_variants(task):
            for seed in config.seeds:
                d = finetune_dir(config.out, task, v, seed)
                tc = scale.train_config(
                    d, seed, data=data, device=config.device, num_threads=config.threads
                ).replace(
                    **spec.train,
                    init_from=os.fspath(run_dir(config.out, v, seed)),
                    tokenizer=None,
                    text_field=text_field,
                )
                if config.bf16:
                    tc = tc.replace(bf16=True)
                if config.shard:
                    tc = tc.replace(shard=True)
                runs.append(
                    PlannedRun(
                        v, seed, d, scale.model_config(v), tc, config.selected(v, seed), task
                    )
                )
    return runs


def settings_diff(run: PlannedRun) -> dict[str, tuple[Any, Any]]:
    """Fields where the run directory's saved configs differ from the plan."""
    diff: dict[str, tuple[Any, Any]] = {}
    cfg_path, tc_path = run.run_dir / "config.json", run.run_dir / "train_config.json"
    if cfg_path.is_file():
        saved = {**_LEGACY_MODEL, **json.loads(cfg_path.read_text(encoding="utf-8"))}
        planned = run.model_config.to_dict()
        skip = {"vocab_size"} | (set() if planned.get("pcl") else {"pcl_target", "pcl_reduce"})
        for k in sorted(set(saved) | set(planned)):
            if k not in skip and saved.get(k) != planned.get(k):
                diff[k] = (saved.get(k), planned.get(k))
    if tc_path.is_file():
        saved = {**_LEGACY_TRAIN, **json.loads(tc_path.read_text(encoding="utf-8"))}
        planned = run.train_config.to_dict()
        for k in sorted(set(saved) | set(planned)):
            if k not in _TRAIN_IGNORED and saved.get(k) != planned.get(k):
                diff[k] = (saved.get(k), planned.get(k))
    return diff


def check_run_settings(run: PlannedRun) -> None:
    """Refuse a run directory that was trained with other settings than the plan's.

    Raises:
        ValueError: naming the run, the differing fields (saved, planned) and the way out.
    """
    diff = settings_diff(run)
    if diff:
        raise ValueError(
            f"{run.run_dir} holds a run trained with other settings (field: (saved, planned)): "
            f"{diff}; use another --out, or delete that directory to retrain it"
        )
