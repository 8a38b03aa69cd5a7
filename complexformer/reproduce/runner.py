"""Train and evaluate every (variant, seed) of the requested tables, resumably, then tabulate.

The protocol of Shao et al., "ComplexFormer: Disruptively Advancing Transformer Inference
Ability via Head-Specific Complex Vector Attention" (2025), Tables 1 and 4, at a chosen
:class:`~complexformer.reproduce.variants.Scale`:

1. **Plan.** The distinct variants of the tables (:data:`~.variants.TABLES`) times seeds
   0 .. N − 1; run ``(v, k)`` lives in ``OUT/runs/<v>/seed<k>`` whichever table asked for
   it, so Table 4 after Table 1 reuses the ``cmha``, ``cmha_shared`` and ``rope`` runs.
   Every run has the same data, tokenizer, token budget and TrainConfig (seed aside); only
   the model's ``pos_scheme``, ``pcl`` and (for ``gpt2``) shape differ.
2. **Train** with :func:`complexformer.training.train` (``resume=True``): a run whose
   ``summary.json`` exists is finished and skipped; an interrupted one continues from its
   newest intact checkpoint (exactly, see docs/training.md). A run directory trained with
   other settings is refused rather than mixed into the table.
3. **Evaluate** each finished run (skipped when its result files for the same settings
   exist): val and test perplexity over the run's corpus splits
   (:func:`complexformer.training.evaluate_perplexity`), the text suite (gen-PPL under one
   evaluator loaded once per process, Dist-1/2, Rep-4) and, for the extrapolation table,
   the extrapolation suite. Files: ``RUN/eval/ppl-<key>.json``, ``RUN/eval/text-<key>/``,
   ``RUN/eval/extrapolation-<key>/`` with ``<key>`` a hash of the settings.
4. **Tabulate** (:mod:`.table`) and plot (:mod:`.plots`): ``OUT/table1.md``/``.json``,
   ``OUT/loss_table1.png``, likewise for 4 and ``table_extrapolation``; ``OUT/reproduce.json``
   (the last invocation: settings and every run's numbers) and one line per invocation in
   ``OUT/invocations.jsonl`` (command, runs trained / skipped / evaluated, wall time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .._config import ConfigBase
from .._report import write_json
from .._runtime import cpu_settings
from ..data import load_corpus, load_token_splits
from ..evaluation.extrapolation import ExtrapolationConfig, run_extrapolation_suite
from ..evaluation.genppl import load_evaluator, resolve_evaluator
from ..evaluation.text import TextSuiteConfig, run_text_suite
from ..models.config import GPTConfig
from ..training import evaluate_perplexity, load_run, train
from ..training.checkpoint import CHECKPOINTS_DIR, list_checkpoints
from ..training.config import TrainConfig
from ..training.dist import env_world, resolve_device
from ..training.rundir import run_lock
from . import table as tables
from .plots import plot_extrapolation_means, plot_table_losses
from .variants import TABLE4_LABELS, TABLE_TITLES, TABLES, VARIANTS, Scale, get_scale, run_dir
from .variants import table_variants as _table_variants

__all__ = [
    "PlannedRun",
    "ReproduceConfig",
    "cached_result",
    "check_run_settings",
    "evaluate_run",
    "eval_paths",
    "eval_settings",
    "format_plan",
    "plan_runs",
    "reproduce",
]

#: TrainConfig fields that do not change what is learned (ignored when comparing a run
#: directory's saved settings with the plan).
_TRAIN_IGNORED = (
    "out_dir",
    "num_threads",
    "device",
    "tensorboard",
    "compile",
    "keep_last",
    "log_every",
    "save_every",
    "eval_every",
    "eval_blocks",
)


@dataclass
class ReproduceConfig(ConfigBase):
    """What ``complexformer reproduce`` does.

    Attributes:
        out: the output directory (``OUT/runs/<variant>/seed<k>``, ``OUT/table*.md``).
        tables: table ids: ``"1"``, ``"4"``, ``"extrapolation"``.
        scale: a :class:`Scale` or the name of one (``tiny``, ``small``, ``paper``).
        seeds: number of seeds; the seeds are 0 .. seeds − 1.
        data: corpus spec (None: the scale's).
        evaluator: gen-PPL evaluator spec (None: the scale's; ``"none"`` skips gen-PPL).
        threads: torch CPU threads for training and evaluation (None: torch's default).
        device: ``auto``, ``cpu`` or ``cuda``.
        bf16: train under bfloat16 autocast.
        train_only: train, do not evaluate or tabulate (automatic under torchrun).
        only: restrict training and evaluation to these runs: ``"VARIANT"`` (all its seeds)
            or ``"VARIANT/seedK"``; the tables still include the other runs' saved results.
        command: the command line, printed above the tables.
    """

    out: str
    tables: tuple[str, ...] = ("1",)
    scale: Scale | str = "tiny"
    seeds: int = 3
    data: str | None = None
    evaluator: str | None = None
    threads: int | None = None
    device: str = "auto"
    bf16: bool = False
    train_only: bool = False
    only: tuple[str, ...] = ()
    command: str | None = None

    def __post_init__(self) -> None:
        self.out = os.fspath(self.out)
        self.tables = tuple(dict.fromkeys(str(t) for t in self.tables))
        if not self.tables:
            raise ValueError("give at least one table (1, 4, extrapolation)")
        _table_variants(self.tables)  # validates the ids
        if isinstance(self.scale, str):
            self.scale = get_scale(self.scale)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise ValueError(f"seeds must be an integer >= 1, got {self.seeds!r}")
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
            if s and not (s.startswith("seed") and s[4:].isdigit() and int(s[4:]) < self.seeds):
                raise ValueError(f"--only {item!r}: expected VARIANT/seedK with K < {self.seeds}")

    @property
    def variants(self) -> list[str]:
        """The distinct variants of the tables, in order."""
        return _table_variants(self.tables)

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
    """

    variant: str
    seed: int
    run_dir: Path
    model_config: GPTConfig
    train_config: TrainConfig
    selected: bool = True

    @property
    def name(self) -> str:
        return f"{self.variant}/seed{self.seed}"

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
        for seed in range(config.seeds):
            d = run_dir(config.out, v, seed)
            tc = scale.train_config(
                d, seed, data=config.data_spec, device=config.device, num_threads=config.threads
            )
            if config.bf16:
                tc = tc.replace(bf16=True)
            runs.append(PlannedRun(v, seed, d, scale.model_config(v), tc, config.selected(v, seed)))
    return runs


def _settings_diff(run: PlannedRun) -> dict[str, tuple[Any, Any]]:
    """Fields where the run directory's saved configs differ from the plan."""
    diff: dict[str, tuple[Any, Any]] = {}
    cfg_path, tc_path = run.run_dir / "config.json", run.run_dir / "train_config.json"
    if cfg_path.is_file():
        saved = json.loads(cfg_path.read_text(encoding="utf-8"))
        planned = run.model_config.to_dict()
        for k in sorted(set(saved) | set(planned)):
            if k != "vocab_size" and saved.get(k) != planned.get(k):
                diff[k] = (saved.get(k), planned.get(k))
    if tc_path.is_file():
        saved = json.loads(tc_path.read_text(encoding="utf-8"))
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
    diff = _settings_diff(run)
    if diff:
        raise ValueError(
            f"{run.run_dir} holds a run trained with other settings (field: (saved, planned)): "
            f"{diff}; use another --out, or delete that directory to retrain it"
        )


# ---------------------------------------------------------------------- evaluation settings
def _key(settings: dict[str, Any]) -> str:
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
        key = _key({**s, "steps": steps})
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


class _Context:
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
    context: _Context,
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


# ---------------------------------------------------------------------- plan printing
def _status(run: PlannedRun, settings: dict[str, dict[str, Any]]) -> str:
    if run.finished:
        if cached_result(run, settings) is not None:
            return "finished, evaluated"
        return "finished, evaluation pending"
    step = run.checkpoint_step()
    if step is not None:
        return f"partial: checkpoint at step {step}/{run.train_config.max_steps}"
    return "new"


def format_plan(config: ReproduceConfig, runs: list[PlannedRun] | None = None) -> str:
    """The plan as text (``--dry-run``): tables, variants, the shared configs, every run
    directory and its state."""
    scale = config.scale
    assert isinstance(scale, Scale)
    runs = runs if runs is not None else plan_runs(config)
    settings = eval_settings(config)
    lines = [
        f"reproduce: scale {scale.name}: {scale.description}",
        f"output: {Path(config.out).resolve()}",
        f"data: {config.data_spec}; tokenizer: {scale.tokenizer or 'BPE'} "
        f"(vocab {scale.vocab_size}); seeds: {list(range(config.seeds))}; "
        f"device {config.device}; threads {config.threads or 'default'}",
        f"gen-PPL evaluator: {config.evaluator_spec or 'none (gen-PPL skipped)'}",
        "",
    ]
    for t in config.tables:
        lines.append(f"{TABLE_TITLES[t]}: {', '.join(TABLES[t])}")
    lines += ["", "variants (GPTConfig fields that differ from the first variant's):"]
    base = runs[0].model_config.to_dict() if runs else {}
    seen = set()
    for r in runs:
        if r.variant in seen:
            continue
        seen.add(r.variant)
        d = r.model_config.to_dict()
        diff = {k: v for k, v in d.items() if v != base.get(k)}
        v = VARIANTS[r.variant]
        lines.append(
            f"  {r.variant:<12} {v.label:<28} pos_scheme={d['pos_scheme']} "
            f"pcl={d['pcl']}" + (f" {diff}" if diff else "")
        )
    if runs:
        lines += ["", f"model ({runs[0].variant}): {json.dumps(base)}"]
        tc = {
            k: v for k, v in runs[0].train_config.to_dict().items() if k not in ("out_dir", "seed")
        }
        lines.append(f"training (every run; seed = k): {json.dumps(tc)}")
        mc = runs[0].model_config
        lines.append(
            f"tokens per run: {tc['max_steps'] * tc['batch_size'] * mc.max_seq_len:,}"
            f" ({tc['max_steps']} steps x {tc['batch_size']} x {mc.max_seq_len})"
        )
    lines.append(f"evaluation: {json.dumps(settings)}")
    lines += ["", f"runs ({len(runs)}):"]
    for r in runs:
        sel = "" if r.selected else "  [not selected by --only]"
        diff = _settings_diff(r)
        warn = f"  [OTHER SETTINGS: {diff}]" if diff else ""
        lines.append(f"  {r.name:<20} {r.run_dir}  {_status(r, settings)}{sel}{warn}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- the whole thing
def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _table_meta(config: ReproduceConfig, runs: list[PlannedRun]) -> dict[str, Any]:
    scale = config.scale
    assert isinstance(scale, Scale)
    tc, mc = runs[0].train_config, runs[0].model_config
    return {
        "scale": f"{scale.name} ({scale.description})",
        "data": config.data_spec,
        "tokens_per_run": f"{tc.max_steps * tc.batch_size * mc.max_seq_len:,} "
        f"({tc.max_steps} steps x {tc.batch_size} x {mc.max_seq_len})",
        "seeds": list(range(config.seeds)),
        "evaluator": config.evaluator_spec or "none (gen-PPL skipped)",
        "command": config.command,
    }


def _write_tables(
    config: ReproduceConfig,
    runs: list[PlannedRun],
    results: list[dict[str, Any]],
    log: Callable[[str], Any],
) -> dict[str, Any]:
    out = Path(config.out)
    meta = _table_meta(config, runs)
    written: dict[str, Any] = {}
    dirs: dict[str, list[str]] = {}
    for r in runs:
        if r.finished:
            dirs.setdefault(r.variant, []).append(str(r.run_dir))
    for t in config.tables:
        if t == "1":
            payload = tables.build_table1(results, TABLES["1"], meta=meta)
        elif t == "4":
            payload = tables.build_table4(results, TABLES["4"], meta=meta)
        else:
            scale = config.scale
            assert isinstance(scale, Scale)
            mults = scale.extrapolation_config("cpu").multipliers
            payload = tables.build_extrapolation_table(results, TABLES[t], mults, meta=meta)
        json_path, md_path = tables.write_table(out, payload)
        files = {"json": str(json_path), "markdown": str(md_path)}
        name = json_path.stem
        if t == "extrapolation":
            png = plot_extrapolation_means(payload, out / f"{name}.png", log=log)
        else:
            labels = TABLE4_LABELS if t == "4" else {v: VARIANTS[v].label for v in TABLES[t]}
            png = plot_table_losses(
                {v: dirs.get(v, []) for v in TABLES[t]},
                out / f"loss_{name}.png",
                title=TABLE_TITLES[t],
                labels=labels,
                log=log,
            )
        if png is not None:
            files["png"] = str(png)
        written[t] = {"files": files, "payload": payload}
        log(f"reproduce: wrote {md_path}" + (f" and {png}" if png is not None else ""))
    return written


def reproduce(
    config: ReproduceConfig,
    *,
    log: Callable[[str], Any] | None = print,
    evaluator: Any = None,
) -> dict[str, Any]:
    """Train, evaluate and tabulate (see the module docstring); resumable at every stage.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) every rank trains each run data-parallel and
    nothing is evaluated (``train_only``); run the same command again in one process to
    evaluate and write the tables.

    Args:
        config: what to reproduce.
        log: progress messages (rank 0 only); None for silence.
        evaluator: an already loaded gen-PPL evaluator to use instead of loading
            ``config.evaluator_spec`` (its spec still names the result files).

    Returns:
        ``{"runs": [per-run result dicts], "tables": {id: {"files", "payload"}},
        "elapsed_s", "trained", "skipped"}``.

    Raises:
        ValueError: a run directory trained with other settings, bad config values.
        ImportError: the evaluator's package is missing (checked before any training).
    """

    scale = config.scale
    assert isinstance(scale, Scale)
    rank, world, local = env_world()
    say: Callable[[str], Any] = (log or (lambda _m: None)) if rank == 0 else (lambda _m: None)
    train_only = config.train_only or world > 1
    runs = plan_runs(config)
    for r in runs:
        check_run_settings(r)
    settings = eval_settings(config)
    spec = config.evaluator_spec
    if not train_only and spec is not None and evaluator is None:
        resolve_evaluator(spec)  # fail now (missing package / file), not after training
    device = resolve_device(config.device, local)
    t_start = time.perf_counter()
    todo = [r for r in runs if r.selected]
    trained, skipped = 0, 0
    results: list[dict[str, Any]] = []
    lock = run_lock(config.out, "reproduce") if rank == 0 else contextlib.nullcontext()
    with lock, cpu_settings(config.threads, scale.flush_denormal and device.type == "cpu"):
        # ---- training
        for i, r in enumerate(todo, 1):
            head = f"[{i}/{len(todo)}] {r.name}"
            if r.finished:
                skipped += 1
                say(f"{head}: finished already ({r.run_dir / 'summary.json'}), skipped")
                continue
            step = r.checkpoint_step()
            say(
                f"{head}: training -> {r.run_dir}"
                + (f" (resuming from step {step})" if step is not None else "")
            )
            t0 = time.perf_counter()
            summary = train(r.model_config, r.train_config, resume=True, log=log)
            trained += 1
            if summary is not None:
                val = summary.get("val_ppl")
                say(
                    f"{head}: trained in {_fmt_s(time.perf_counter() - t0)}"
                    + (f", val ppl {val:.2f}" if val is not None else "")
                    + f" (total {_fmt_s(time.perf_counter() - t_start)})"
                )
        if train_only:
            say(
                f"reproduce: training done ({trained} trained, {skipped} already finished) in "
                f"{_fmt_s(time.perf_counter() - t_start)}; evaluate and tabulate with the "
                "same command in one process"
            )
            return {
                "runs": [],
                "tables": {},
                "elapsed_s": time.perf_counter() - t_start,
                "trained": trained,
                "skipped": skipped,
            }

        # ---- evaluation
        ctx = _Context(spec, device, evaluator, log=say)
        for i, r in enumerate(runs, 1):
            head = f"[{i}/{len(runs)}] {r.name}"
            if not r.finished:
                say(f"{head}: not trained, left out of the tables")
                continue
            cached = cached_result(r, settings)
            if cached is not None or not r.selected:
                if cached is not None:
                    results.append(cached)
                    say(f"{head}: evaluated already, skipped")
                continue
            say(f"{head}: evaluating")
            t0 = time.perf_counter()
            res = evaluate_run(r, settings, ctx)
            ctx.evaluated += 1
            results.append(res)
            g = res.get("gen_ppl")
            say(
                f"{head}: evaluated in {_fmt_s(time.perf_counter() - t0)}: val ppl "
                f"{res['val_ppl']:.2f}, test ppl {res['test_ppl']:.2f}"
                + (f", gen-PPL {g:.2f}" if g is not None else "")
                + f" (total {_fmt_s(time.perf_counter() - t_start)})"
            )

        # ---- tables
        written = _write_tables(config, runs, results, say)
    elapsed = time.perf_counter() - t_start
    write_json(
        Path(config.out) / "reproduce.json",
        {
            "config": {
                **{k: v for k, v in asdict(config).items() if k != "scale"},
                "tables": list(config.tables),
                "only": list(config.only),
            },
            "scale": scale.to_dict(),
            "evaluation": settings,
            "runs": results,
            "tables": {t: w["files"] for t, w in written.items()},
            "elapsed_s": elapsed,
            "evaluator_load_s": ctx.evaluator_load_s,
            "trained": trained,
            "skipped": skipped,
        },
    )
    with open(Path(config.out) / "invocations.jsonl", "a", encoding="utf-8") as f:
        f.write(
            json.dumps(
                {
                    "command": config.command,
                    "tables": list(config.tables),
                    "seeds": config.seeds,
                    "scale": scale.name,
                    "threads": config.threads,
                    "trained": trained,
                    "skipped": skipped,
                    "evaluated": ctx.evaluated,
                    "elapsed_s": round(elapsed, 1),
                    "evaluator_load_s": round(ctx.evaluator_load_s, 1),
                    "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
            + "\n"
        )
    for w in written.values():
        say("")
        say(w["payload"]["markdown"].split("\n## Paired")[0].rstrip())
    say(
        f"\nreproduce: done in {_fmt_s(elapsed)} ({trained} trained, {skipped} already "
        f"finished); tables in {Path(config.out).resolve()}"
    )
    return {
        "runs": results,
        "tables": written,
        "elapsed_s": elapsed,
        "trained": trained,
        "skipped": skipped,
    }
