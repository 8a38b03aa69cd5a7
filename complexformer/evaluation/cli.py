"""``complexformer evaluate``: the evaluation suites on any artifact the package writes.

The parser is built from the suite registry (:data:`~complexformer.evaluation.suite.SUITES`):
every suite declares its options (:class:`~complexformer.evaluation.suite.Option`), those that
several suites read are shown once, and ``--suite`` offers the registered names. The command
loads each ``--model`` once with :func:`~complexformer.artifacts.load_artifact`; a suite that
needs a ComplexFormer language model refuses another kind by name, and ``ppl`` scores any
causal language model. Every suite writes ``<suite>.json`` and ``<suite>.md`` into ``--out``
(default: the model's ``eval`` folder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..cli.options import (
    add_json,
    add_model,
    add_out,
    add_set,
    add_threads,
    add_verify,
    route_overrides,
)

__all__ = [
    "LM_EVAL_TASKS_DIR",
    "add_evaluate_parser",
    "cmd_evaluate",
    "out_dir",
    "register_suites",
]

#: The offline lm-evaluation-harness tasks shipped with the package (its ``--include_path``).
LM_EVAL_TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"
#: Artifact kinds that are causal language models without being ComplexFormer models.
_OTHER_CAUSAL_LMS = ("retrofit",)

_EPILOG = """\
examples:
  complexformer evaluate --model runs/cmha                          # validation perplexity
  complexformer evaluate --model exports/cmha --data stdlib         # an export names its data
  complexformer evaluate --model runs/cmha --suite text --evaluator smollm2 --num-prompts 50
  complexformer evaluate --model runs/cmha --suite text --evaluator gpt2-large  # the paper
  complexformer evaluate --model runs/code --suite code --num-samples 100 --k 1 10 100
  complexformer evaluate --model runs/math --suite math --problems gsm8k
  complexformer evaluate --suite extrapolation --model runs/rope runs/cmha runs/alibi \\
      --multipliers 1 2 4 8 16 --out eval/extrapolation
  complexformer evaluate --model runs/cmha --suite heads --prompt "def parse(text):"
  complexformer evaluate --model runs/cmha --suite lm-eval          # offline: ppl + mc tasks
  complexformer evaluate --model runs/cmha --suite lm-eval --tasks hellaswag  # needs network
  complexformer evaluate --lm-eval-tasks-path    # for lm_eval ... --include_path "$(...)"

Lists are written with spaces (--k 1 10 100). Options of suites that do not run are ignored.
See docs/evaluation_*.md and docs/huggingface.md.
"""


# ---------------------------------------------------------------------- the registry
def register_suites() -> dict[str, Any]:
    """Import the suite modules (registering them), add the suites of the entry-point group
    ``complexformer.suites`` (the lab's ``heads``) and return the registry.

    The lm-eval suite is registered where its module imports (it needs no optional
    dependency to be declared; running it needs the ``hf`` and ``lmeval`` extras).
    """
    from . import code_suite, extrapolation, lmeval, math_suite, ppl, text  # noqa: F401
    from .suite import SUITES, load_suite_entry_points

    load_suite_entry_points()

    return dict(sorted(SUITES.items(), key=lambda kv: (kv[1].position, kv[0])))


def _summary(cls: Any) -> str:
    doc = (cls.__doc__ or "").strip().splitlines()
    return cls.description or (doc[0].rstrip(".") if doc else cls.name)


# ---------------------------------------------------------------------- results
def out_dir(out: str | None, artifacts: list[Any]) -> Path:
    """``--out``, else the model's ``eval`` folder (``<run>/eval`` for a run, checkpoint or
    final model of a run; ``<model>/eval`` for another artifact); with several models
    ``./eval``."""
    if out:
        return Path(out)
    if len(artifacts) == 1:
        return Path(artifacts[0].eval_dir)
    return Path("eval")


def _check_artifact(suite: Any, artifact: Any) -> None:
    """Refuse, before any work, a kind the suite cannot score or a missing corpus."""
    if suite.name != "ppl":
        try:
            artifact.require_lm(f"suite {suite.name}")
        except ValueError as e:
            if artifact.kind in _OTHER_CAUSAL_LMS:
                raise ValueError(f"{e}; its perplexity is --suite ppl") from None
            raise
    if (
        suite.reads_corpus()
        and getattr(suite.config, "data", None) is None
        and artifact.default_data is None
    ):
        raise ValueError(
            f"{artifact.path} ({artifact.kind}) records no corpus to evaluate on; pass --data "
            f"(suite {suite.name})"
        )


def suite_overrides(args: argparse.Namespace, classes: list[Any]) -> dict[str, dict[str, Any]]:
    """``--set`` per suite: ``KEY=VALUE`` sets the field in every chosen suite whose config
    has it, ``SUITE.KEY=VALUE`` in that suite only; a key no chosen suite has is refused."""
    fields = {c.name: set(c.config_class.field_names()) for c in classes}
    return route_overrides(
        getattr(args, "set", None) or [],
        fields,
        "suite in --set (not chosen by --suite)",
        f"field of the {'/'.join(fields)} config",
        shared=True,
    )


def _run_suite(
    cls: Any, args: argparse.Namespace, artifacts: list[Any], overrides: dict[str, Any]
) -> None:
    config = cls.config_from_args(args)
    if overrides:
        config = config.replace(**overrides)
    out = out_dir(args.out, artifacts)
    if cls.many_runs:
        suite = cls(config, print, names=[str(p) for p in args.model])
        payload = suite.run(artifacts, out)
    else:
        suite = cls(config, print)
        _check_artifact(suite, artifacts[0])
        payload = suite.run(artifacts[0], out)
    md = out / f"{cls.name}.md"
    if not args.json and md.is_file():
        print(f"\n{md.read_text(encoding='utf-8')}")
    print(f"{cls.name}: results in {out.resolve()}")
    if args.json:
        summary = payload.get("metrics", payload.get("summary", {}))
        print(json.dumps(summary, indent=2, default=str))


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run the suites of ``--suite`` (default ``ppl``) on the artifacts of ``--model``."""
    from ..artifacts import load_artifact
    from ..runtime import cpu_settings
    from .suite import get_suite

    register_suites()
    classes = [get_suite(name) for name in dict.fromkeys(args.suite or ["ppl"])]
    if len(args.model) > 1:
        single = [c.name for c in classes if not c.many_runs]
        if single:
            raise ValueError(
                f"several --model are compared only by --suite extrapolation; got "
                f"{len(args.model)} models for suites {', '.join(single)}"
            )
    overrides = suite_overrides(args, classes)
    with cpu_settings(args.threads or None):
        artifacts = [load_artifact(path, verify=args.verify) for path in args.model]
        for cls in classes:
            _run_suite(cls, args, artifacts, overrides[cls.name])
    return 0


# ---------------------------------------------------------------------- the parser
class _PrintTasksPath(argparse.Action):
    """``--lm-eval-tasks-path``: print the shipped tasks' folder and exit."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(LM_EVAL_TASKS_DIR)
        parser.exit()


def add_evaluate_parser(sub) -> argparse.ArgumentParser:
    """Register the ``evaluate`` subcommand on the subparsers object ``sub``; its options are
    those the registered suites declare."""
    suites = register_suites()
    listing = "\n".join(f"  {name:<14}{_summary(cls)}" for name, cls in suites.items())
    e = sub.add_parser(
        "evaluate",
        help="perplexity and the evaluation suites",
        description="Evaluate a model: a ComplexFormer run, checkpoint, final model or export "
        "(every suite),\nor a retrofit adaptation (ppl). Each suite writes JSON and a markdown "
        "table to --out and is\nreproducible with --seed.\n\nsuites:\n" + listing,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model(
        e,
        "the model(s) to evaluate: run, checkpoint, final model, export or retrofit "
        "(several only for --suite extrapolation)",
        many=True,
    )
    add_verify(e)
    e.add_argument(
        "--suite",
        nargs="+",
        action="extend",
        choices=list(suites),
        default=None,
        metavar="SUITE",
        help=f"suites to run: {', '.join(suites)} (default ppl)",
    )
    add_out(
        e,
        required=False,
        default=None,
        metavar="DIR",
        help="results folder (default: the model's eval/ folder, RUN/eval for a run or its "
        "checkpoints, EXPORT/eval for an export; ./eval with several --model)",
    )
    add_threads(e)
    add_json(e, "print the metrics as JSON")
    add_set(
        e,
        (),
        config_file=False,
        help="override any field of the chosen suites' configs, also those without an option "
        "(SUITE.KEY=VALUE for one suite; VALUE read as JSON when it parses)",
    )
    e.add_argument(
        "--lm-eval-tasks-path",
        action=_PrintTasksPath,
        help="print the folder of the shipped lm-evaluation-harness tasks (lm_eval's "
        "--include_path) and exit",
    )

    readers: dict[str, dict[str, Any]] = {}  # flag -> suite -> its option of that flag
    for name, cls in suites.items():
        for opt in cls.options:
            readers.setdefault(opt.flag, {})[name] = opt
    configs = {name: cls.config_class for name, cls in suites.items()}
    for flag, opts in readers.items():
        if len({(o.help, repr(o.settings)) for o in opts.values()}) > 1:
            raise ValueError(f"suites declare {flag} with two meanings: {', '.join(opts)}")
    g = e.add_argument_group("options several suites read")
    for opts in readers.values():
        if len(opts) > 1:
            next(iter(opts.values())).add_to(g, opts, configs)
    for name, cls in suites.items():
        mine = [opt for opt in cls.options if len(readers[opt.flag]) == 1]
        if mine:
            g = e.add_argument_group(name, _summary(cls))
            for opt in mine:
                opt.add_to(g, {name: opt}, configs)
    e.set_defaults(func=cmd_evaluate)
    return e
