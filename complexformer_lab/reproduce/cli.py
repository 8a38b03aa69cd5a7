"""``complexformer reproduce``: rerun the ComplexFormer paper's comparisons (Shao et al. 2025,
Tables 1-4, and a length-extrapolation table) at a chosen scale, resumably.

Register it with :func:`add_reproduce_parser` on the subparsers of the ``complexformer``
command line.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import fields

from complexformer.cli.options import (
    add_device,
    add_fields,
    add_out,
    add_seeds,
    add_set,
    add_shard,
    add_threads,
    build_configs,
    config_choice,
)

from ..configs import lab_configs
from .variants import SCALES, describe_scales, get_scale

__all__ = ["add_reproduce_parser", "cmd_reproduce"]

_EPILOG = """\
examples:
  complexformer reproduce --table 1 4 --scale tiny --seeds 0 1 2 --out runs/repro-tiny
  complexformer reproduce --table 1 --scale tiny --dry-run          # the plan, no training
  complexformer reproduce --table 2 3 --scale tiny --out runs/repro-tiny  # fine-tune
  complexformer reproduce --table 1 --scale paper --dry-run   # 45 epochs: steps, GPU-hours
  complexformer reproduce --table extrapolation --scale tiny --out runs/repro-tiny  # reuses
  complexformer reproduce --table 1 4 --scale paper --out runs/repro-paper \\
      --device cuda --bf16
  torchrun --nproc_per_node 8 -m complexformer.cli reproduce --table 1 --scale paper \\
      --out runs/repro-paper --only cmha/seed0          # train one run on 8 GPUs
  complexformer reproduce --table 1 --scale paper --out runs/repro-paper   # then evaluate
  complexformer reproduce --table ladder --scale tiny --dry-run   # the ladder's plan
  complexformer reproduce --table ladder --scale tiny --data shakespeare --threads 1 \\
      --out runs/ladder-tiny                      # one corpus per process, side by side

Tables: 1 (learned, sinusoidal, gpt2, rope, cmha_shared, cmha), 2 and 3 (the Table-1 variants
fine-tuned on code / math at lr 2e-5: HumanEval/MBPP pass@k, GSM8K/MATH accuracy), 4 (cmha,
cmha_pclrot, cmha_shared, cmha_fixed, cmha_nopcl, cmha_ropeinit, rope; with Pass@1 and Acc.
of their fine-tuned runs), extrapolation (the Table-1 variants at 1, 2, 4, 8 x T), ladder
(rope, cmha_nopcl, cmha at 4 sizes on stdlib and shakespeare; with --scale paper the GPU
rungs on WikiText-103 up to the paper preset).
Runs live in OUT/runs/<variant>/seed<k> and are shared by the tables; a finished run
(summary.json) is not retrained, an interrupted one resumes from its checkpoint, and finished
evaluations are not repeated. Under torchrun the runs are trained data-parallel and nothing is
evaluated; run the command again in one process for the tables. A --config FILE may name the
scale (scale = "small") and set GPTConfig and TrainConfig fields, as --set does. See
docs/reproduce.md.

scales (--scale NAME; complexformer_lab/configs/scales.toml):
"""

_LADDERS = "ladders (--table ladder --scale NAME; complexformer_lab/configs/ladders.toml):"

#: ReproduceConfig fields whose options are left None when not given (add_fields).
_FIELDS = ("tables", "scale", "data", "evaluator", "bf16", "train_only", "only",
           "code_benchmarks", "math_benchmarks")  # fmt: skip


def resolved(args: argparse.Namespace) -> argparse.Namespace:
    """The options with the scale chosen (``--scale``, else the ``--config`` file's ``scale``,
    else tiny) and ReproduceConfig's defaults where an option declared by its field was not
    given."""
    from .plan import ReproduceConfig

    values = vars(args).copy()
    for f in fields(ReproduceConfig):
        if f.name in _FIELDS and values.get(f.name) is None:
            values[f.name] = f.default
    values["scale"] = config_choice(args, "scale", str(values["scale"]))
    return argparse.Namespace(**values)


def _command(args: argparse.Namespace, out: str) -> str:
    """The command line that reproduces these tables (printed above them)."""
    parts = ["complexformer", "reproduce"]
    parts += ["--table", *args.tables]
    parts += ["--scale", args.scale, "--seeds", *map(str, args.seeds), "--out", out]
    if args.config is not None:
        parts += ["--config", args.config]
    if args.set:
        parts += ["--set", *args.set]
    for flag in ("data", "evaluator", "threads", "max_steps"):
        value = getattr(args, flag)
        if value is not None:
            parts += [f"--{flag.replace('_', '-')}", str(value)]
    for flag, values in (("--code-problems", args.code_benchmarks),
                         ("--math-problems", args.math_benchmarks)):  # fmt: skip
        if values:
            parts += [flag, *map(str, values)]
    if args.device != "auto":
        parts += ["--device", args.device]
    if args.bf16:
        parts.append("--bf16")
    if args.shard:
        parts.append("--shard")
    return " ".join(shlex.quote(p) for p in parts)


def scale_changes(args: argparse.Namespace) -> dict[str, dict]:
    """The GPTConfig (``model``) and TrainConfig (``train``) fields set by the ``--config``
    file, ``--max-steps`` and ``--set``, in that order of precedence."""
    from complexformer.models.config import GPTConfig
    from complexformer.training import TrainConfig

    return build_configs(
        argparse.Namespace(
            set=args.set, max_steps=args.max_steps, config=args.config, _config_choices=("scale",)
        ),
        {"model": GPTConfig, "train": TrainConfig},
    )


def scale_of(args: argparse.Namespace):
    """The scale of ``--scale`` changed by :func:`scale_changes`: TrainConfig fields change
    its ``train`` entries, GPTConfig fields its models (every variant alike)."""
    kw = scale_changes(args)
    scale = get_scale(config_choice(args, "scale", "tiny"), **kw["train"])
    if kw["model"]:
        scale = scale.replace(
            model={**scale.model, **kw["model"]},
            gpt2_model={**scale.gpt2_model, **kw["model"]},
        )
    return scale


def cmd_ladder(args: argparse.Namespace) -> int:
    """``reproduce --table ladder``: the compute ladder of :mod:`.ladder`."""
    from .ladder import LadderConfig, format_ladder_plan, run_ladder

    if len(args.tables) > 1:
        raise SystemExit("reproduce: --table ladder runs alone (its runs are not the tables')")
    unused = [
        flag
        for flag, value in (
            ("--evaluator", args.evaluator),
            ("--max-steps", args.max_steps),
            ("--set", args.set),
            ("--config", args.config is not None and any(scale_changes(args).values())),
            ("--code-problems", args.code_benchmarks),
            ("--math-problems", args.math_benchmarks),
        )
        if value
    ]
    if unused:
        raise SystemExit(
            f"reproduce --table ladder does not use {', '.join(unused)} (its rungs, token rule "
            "and evaluation are fixed by --scale; see docs/RESULTS.md)"
        )
    out = args.out or f"runs/ladder-{args.scale}"
    parts = ["complexformer", "reproduce", "--table", "ladder", "--scale", args.scale]
    parts += ["--seeds", *map(str, args.seeds), "--out", out]
    if args.data:
        parts += ["--data", args.data]
    if args.only:
        parts += ["--only", *args.only]
    config = LadderConfig(
        out=out,
        scale=args.scale,
        seeds=tuple(args.seeds),
        data=args.data,
        only=tuple(args.only),
        threads=args.threads,
        device=args.device,
        bf16=args.bf16,
        shard=bool(args.shard),
        train_only=args.train_only,
        command=" ".join(shlex.quote(p) for p in parts),
    )
    if args.dry_run:
        print(format_ladder_plan(config))
        return 0
    run_ladder(config)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run ``complexformer reproduce`` from parsed arguments."""
    args = resolved(args)
    if "ladder" in args.tables:
        return cmd_ladder(args)
    from .runner import ReproduceConfig, format_plan, reproduce, resolve_budget

    scale = scale_of(args)
    out = args.out or f"runs/reproduce-{args.scale}"
    config = ReproduceConfig(
        out=out,
        tables=tuple(args.tables),
        scale=scale,
        seeds=tuple(args.seeds),
        data=args.data,
        evaluator=args.evaluator,
        threads=args.threads,
        device=args.device,
        bf16=args.bf16,
        shard=bool(args.shard),
        train_only=args.train_only,
        only=tuple(args.only),
        command=_command(args, out),
        code_benchmarks=tuple(args.code_benchmarks),
        math_benchmarks=tuple(args.math_benchmarks),
    )
    if args.dry_run:
        print(format_plan(resolve_budget(config, count=False, log=print)))
        return 0
    reproduce(config)
    return 0


def add_reproduce_parser(sub) -> argparse.ArgumentParser:
    """Register the ``reproduce`` subcommand on the subparsers object ``sub``."""
    from complexformer.models.config import GPTConfig
    from complexformer.training import TrainConfig

    from .plan import ReproduceConfig

    r = sub.add_parser(
        "reproduce",
        help="rerun the paper's Tables 1-4 (and extrapolation) at a scale",
        description="Train every variant of the ComplexFormer paper's tables on identical "
        "data, tokens and budget, for several seeds; evaluate each run (val/test perplexity, "
        "gen-PPL, Dist-1/2, Rep-4, optionally extrapolation); write markdown/JSON tables "
        "(mean ± std over seeds, paired comparison with RoPE) and loss plots to --out. "
        "Resumable: finished runs and evaluations are skipped.",
        epilog=f"{_EPILOG}{describe_scales()}\n\n{_LADDERS}\n"
        f"{lab_configs('ladders.toml', 'ladder scale').describe()}\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fields(
        r,
        ReproduceConfig,
        "tables",
        flags={"tables": "--table"},
        choices={"tables": ("1", "2", "3", "4", "extrapolation", "ladder")},
    )
    add_fields(r, ReproduceConfig, "scale", choices={"scale": tuple(SCALES)})
    add_seeds(r, (0, 1, 2), "seeds to run, one run per variant and seed")
    add_fields(r, ReproduceConfig, "data")
    add_out(r, "output directory (default runs/reproduce-SCALE)", required=False, default=None)
    add_threads(r)
    add_fields(r, ReproduceConfig, "evaluator")
    add_device(r, help="device for training and evaluation (default auto: CUDA if available)")
    add_fields(r, ReproduceConfig, "bf16")
    add_shard(r)
    add_fields(
        r,
        TrainConfig,
        "max_steps",
        defaults={"max_steps": "the scale's (every variant alike; for paper, 45 epochs)"},
    )
    add_fields(
        r,
        ReproduceConfig,
        "code_benchmarks",
        "math_benchmarks",
        "only",
        flags={"code_benchmarks": "--code-problems", "math_benchmarks": "--math-problems"},
        metavars={
            "code_benchmarks": "SOURCE",
            "math_benchmarks": "SOURCE",
            "only": "VARIANT[/seedK]",
        },  # fmt: skip
    )
    add_fields(r, ReproduceConfig, "train_only")
    add_set(r, (GPTConfig, TrainConfig), choices=("scale",))
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (variants, seeds, configs, run directories and which "
        "are done) and exit",
    )
    r.set_defaults(func=cmd_reproduce)
    return r
