"""Train and evaluate every (variant, seed) of the requested tables, resumably, then tabulate.

The protocol of Shao et al., "ComplexFormer: Disruptively Advancing Transformer Inference
Ability via Head-Specific Complex Vector Attention" (2025), Tables 1 and 4, at a chosen
:class:`~complexformer_lab.reproduce.variants.Scale`:

1. **Plan.** The distinct variants of the tables (:data:`~.variants.TABLES`) times seeds
   0 .. N − 1; run ``(v, k)`` lives in ``OUT/runs/<v>/seed<k>`` whichever table asked for
   it, so Table 4 after Table 1 reuses the ``cmha``, ``cmha_shared`` and ``rope`` runs.
   Every run has the same data, tokenizer, token budget and TrainConfig (seed aside); only
   the model's ``pos_scheme``, ``pcl`` and (for ``gpt2``) shape differ.
2. **Train** with :func:`complexformer.lm.train` (``resume=True``): a run whose
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
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from complexformer.evaluation.genppl import resolve_evaluator
from complexformer.lm import train
from complexformer.results import write_json
from complexformer.runtime import cpu_settings
from complexformer.storage import open_file
from complexformer.training.dist import env_world, resolve_device
from complexformer.training.rundir import run_lock

from . import table as tables
from . import table_tasks
from .budget import gpu_hours, resolve_token_budget
from .evaluate import EvalContext, cached_result, eval_paths, eval_settings, evaluate_run
from .plan import (
    PlannedRun,
    ReproduceConfig,
    check_run_settings,
    plan_finetunes,
    plan_runs,
    settings_diff,
)
from .plots import plot_extrapolation_means, plot_table_losses
from .tasks import (
    benchmark_name,
    cached_task_result,
    evaluate_task_run,
    prepare_task_data,
    task_settings,
    train_task_run,
)
from .variants import TABLE4_LABELS, TABLE_TITLES, TABLES, VARIANTS, Scale

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
    "resolve_budget",
]

#: Tables that read the pre-training runs' own evaluation (perplexity, text suite).
_BASE_EVAL_TABLES = ("1", "4", "extrapolation")


def resolve_budget(
    config: ReproduceConfig, *, count: bool, log: Callable[[str], Any] | None = None
) -> ReproduceConfig:
    """For a scale given in epochs (``paper``), the config with ``max_steps`` computed from
    the corpus's training tokens (:mod:`.budget`) and ``budget`` filled in; otherwise
    ``config`` itself.

    Args:
        config: the reproduction.
        count: tokenise the train split when its count is not recorded yet (a real run);
            False (``--dry-run``) uses the scale's estimate where it applies.
        log: progress messages.
    """
    scale = config.scale
    assert isinstance(scale, Scale)
    if scale.epochs is None:
        return config
    budget = resolve_token_budget(
        out=config.out,
        data=config.data_spec,
        tokenizer=scale.tokenizer,
        vocab_size=scale.vocab_size,
        epochs=scale.epochs,
        estimate=scale.train_tokens_estimate,
        estimate_data=scale.data,
        batch_size=scale.train_config(config.out, 0).batch_size,
        seq_len=scale.model_config(config.variants[0]).max_seq_len,
        count=count,
        log=log,
    )
    new_scale = dataclasses.replace(scale, train={**scale.train, "max_steps": budget["max_steps"]})
    return dataclasses.replace(config, scale=new_scale, budget=budget)


def _budget_lines(config: ReproduceConfig, runs: list[PlannedRun]) -> list[str]:
    """The epochs, token count, steps and estimated GPU-hours of a scale given in epochs."""
    b = config.budget
    if not b or not runs:
        return []
    src = (
        "counted from the tokenised corpus"
        if b["source"] == "counted"
        else "estimate: WikiText-103's 103,227,021 words x 1.15 GPT-2 tokens per word; "
        "counted when the corpus is tokenised before training"
    )
    tokens = b["max_steps"] * b["tokens_per_step"]
    hours = [gpu_hours(r.model_config, tokens) for r in runs]
    return [
        f"budget: {b['epochs']:g} epochs of {b['train_tokens']:,} training tokens ({src}) = "
        f"{b['max_steps']:,} steps of {b['tokens_per_step']:,} tokens "
        f"({tokens / b['train_tokens']:.2f} epochs)",
        f"estimated GPU-hours (A100 at 40 % of 312 TFLOP/s, 6N + 6LTd FLOPs per token): "
        f"{hours[0]:.1f} per {runs[0].variant} run, {sum(hours):.0f} for the {len(runs)} "
        "runs of the plan",
    ]


# ---------------------------------------------------------------------- plan printing
def _status(run: PlannedRun, settings: dict[str, dict[str, Any]] | None) -> str:
    if run.finished:
        if settings is None:  # no table reads this run's own evaluation
            return "finished"
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
        f"(vocab {scale.vocab_size}); seeds: {list(config.seeds)}; "
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
    lines += _budget_lines(config, runs)
    lines.append(f"evaluation: {json.dumps(settings)}")
    lines += ["", f"runs ({len(runs)}):"]
    for r in runs:
        sel = "" if r.selected else "  [not selected by --only]"
        diff = settings_diff(r)
        warn = f"  [OTHER SETTINGS: {diff}]" if diff else ""
        st = _status(r, settings if any(t in _BASE_EVAL_TABLES for t in config.tables) else None)
        lines.append(f"  {r.name:<20} {r.run_dir}  {st}{sel}{warn}")
    ft = plan_finetunes(config)
    if ft:
        spec = scale.finetune
        assert spec is not None
        lines += ["", f"fine-tuning (Tables 2-4; from each run, its tokenizer): {spec.train}"]
        for task in config.tasks:
            data = ft[[r.task for r in ft].index(task)].train_config.data
            lines.append(
                f"  {task}: corpus {data}; benchmarks {', '.join(config.benchmarks(task))}; "
                f"{json.dumps(task_settings(config, task))}"
            )
        lines += ["", f"fine-tuning runs ({len(ft)}):"]
        for r in ft:
            sel = "" if r.selected else "  [not selected by --only]"
            diff = settings_diff(r)
            warn = f"  [OTHER SETTINGS: {diff}]" if diff else ""
            st = _task_status(r, task_settings(config, r.task))
            lines.append(f"  {r.name:<26} {r.run_dir}  {st}{sel}{warn}")
    return "\n".join(lines)


def _task_status(run: PlannedRun, settings: dict[str, dict[str, Any]]) -> str:
    if run.finished:
        if cached_task_result(run, settings) is not None:
            return "finished, evaluated"
        return "finished, evaluation pending"
    step = run.checkpoint_step()
    if step is not None:
        return f"partial: checkpoint at step {step}/{run.train_config.max_steps}"
    return "new"


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
        "seeds": list(config.seeds),
        "evaluator": config.evaluator_spec or "none (gen-PPL skipped)",
        "command": config.command,
    }


def _merge_task_results(
    results: list[dict[str, Any]], task_results: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The pre-training results with each fine-tuned run's scores added under its task."""
    scores = {
        (r["variant"], r["seed"], task): r[task] for task, rs in task_results.items() for r in rs
    }
    merged = []
    for r in results:
        extra = {
            task: scores[(r["variant"], r["seed"], task)]
            for task in task_results
            if (r["variant"], r["seed"], task) in scores
        }
        merged.append({**r, **extra})
    return merged


def _write_tables(
    config: ReproduceConfig,
    runs: list[PlannedRun],
    results: list[dict[str, Any]],
    log: Callable[[str], Any],
    task_results: dict[str, list[dict[str, Any]]] | None = None,
    ft_runs: list[PlannedRun] | None = None,
) -> dict[str, Any]:
    out = Path(config.out)
    meta = _table_meta(config, runs)
    task_results = task_results or {}
    ft_meta = dict(meta)
    scale = config.scale
    assert isinstance(scale, Scale)
    if scale.finetune is not None:
        ft_meta["finetune"] = json.dumps(scale.finetune.train)
    if not any(t in _BASE_EVAL_TABLES for t in config.tables):
        ft_meta.pop("evaluator", None)  # no gen-PPL in Tables 2 and 3
    written: dict[str, Any] = {}
    dirs: dict[str, list[str]] = {}
    for r in runs:
        if r.finished:
            dirs.setdefault(r.variant, []).append(str(r.run_dir))
    for r in ft_runs or []:
        if r.finished:
            dirs.setdefault(f"{r.task}:{r.variant}", []).append(str(r.run_dir))
    for t in config.tables:
        if t == "1":
            payload = tables.build_table1(results, TABLES["1"], meta=meta)
        elif t == "2":
            assert scale.finetune is not None
            payload = table_tasks.build_table2(
                task_results.get("code", []),
                [benchmark_name(b) for b in config.benchmarks("code")],
                tuple(scale.finetune.code_config("humaneval").ks),
                TABLES["2"],
                meta=ft_meta,
            )
        elif t == "3":
            payload = table_tasks.build_table3(
                task_results.get("math", []),
                [benchmark_name(b) for b in config.benchmarks("math")],
                TABLES["3"],
                meta=ft_meta,
            )
        elif t == "4":
            extra: tuple = ()
            if config.tasks:
                extra = table_tasks.task_metrics_table4(
                    benchmark_name(config.benchmarks("code")[0]),
                    benchmark_name(config.benchmarks("math")[0]),
                )
            payload = tables.build_table4(
                _merge_task_results(results, task_results),
                TABLES["4"],
                meta=ft_meta if extra else meta,
                task_metrics=extra,
            )
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
            prefix = {"2": "code:", "3": "math:"}.get(t, "")
            png = plot_table_losses(
                {v: dirs.get(prefix + v, []) for v in TABLES[t]},
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

    rank, world, local = env_world()
    say: Callable[[str], Any] = (log or (lambda _m: None)) if rank == 0 else (lambda _m: None)
    config = resolve_budget(config, count=True, log=say)
    scale = config.scale
    assert isinstance(scale, Scale)
    train_only = config.train_only or world > 1
    runs = plan_runs(config)
    ft_runs = plan_finetunes(config)
    for r in runs + ft_runs:
        check_run_settings(r)
    settings = eval_settings(config)
    base_eval = any(t in _BASE_EVAL_TABLES for t in config.tables)
    spec = config.evaluator_spec if base_eval else None
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
        # ---- fine-tuning (Tables 2-4)
        ft_todo = [r for r in ft_runs if r.selected]
        if ft_todo:
            prepare_task_data(config, say)
        for i, r in enumerate(ft_todo, 1):
            head = f"[fine-tune {i}/{len(ft_todo)}] {r.name}"
            if r.finished:
                skipped += 1
                say(f"{head}: finished already, skipped")
                continue
            say(f"{head}: fine-tuning {r.train_config.init_from} -> {r.run_dir}")
            t0 = time.perf_counter()
            train_task_run(r, log)
            trained += 1
            say(f"{head}: fine-tuned in {_fmt_s(time.perf_counter() - t0)}")
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
        ctx = EvalContext(spec, device, evaluator, log=say)
        for i, r in enumerate(runs if base_eval else [], 1):
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

        task_results: dict[str, list[dict[str, Any]]] = {t: [] for t in config.tasks}
        for i, r in enumerate(ft_runs, 1):
            head = f"[fine-tune {i}/{len(ft_runs)}] {r.name}"
            if not r.finished:
                say(f"{head}: not fine-tuned, left out of the tables")
                continue
            tset = task_settings(config, r.task)
            cached = cached_task_result(r, tset)
            if cached is not None or not r.selected:
                if cached is not None:
                    task_results[r.task].append(cached)
                    say(f"{head}: evaluated already, skipped")
                continue
            say(f"{head}: evaluating {', '.join(tset)}")
            t0 = time.perf_counter()
            task_results[r.task].append(evaluate_task_run(r, config, tset, device))
            ctx.evaluated += 1
            say(f"{head}: evaluated in {_fmt_s(time.perf_counter() - t0)}")

        # ---- tables
        written = _write_tables(config, runs, results, say, task_results, ft_runs)
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
            "finetune_runs": task_results,
            "budget": config.budget,
            "tables": {t: w["files"] for t, w in written.items()},
            "elapsed_s": elapsed,
            "evaluator_load_s": ctx.evaluator_load_s,
            "trained": trained,
            "skipped": skipped,
        },
    )
    with open_file(Path(config.out) / "invocations.jsonl", "a") as f:  # no link
        f.write(
            json.dumps(
                {
                    "command": config.command,
                    "tables": list(config.tables),
                    "seeds": list(config.seeds),
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
