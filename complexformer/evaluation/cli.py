"""``complexformer evaluate``: perplexity on a corpus split (the default), and with ``--suite``
the evaluation suites of :mod:`complexformer.evaluation` (text, code, math, extrapolation,
heads, lm-eval). Every suite writes ``<suite>.json`` and ``<suite>.md`` into ``--out``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["SUITES", "add_evaluate_parser", "cmd_evaluate"]

SUITES = ("ppl", "text", "code", "math", "extrapolation", "heads", "lm-eval")

_EPILOG = """\
examples:
  complexformer evaluate --ckpt runs/cmha                          # validation perplexity
  complexformer evaluate --ckpt runs/cmha --suite text --evaluator smollm2 --num-prompts 50
  complexformer evaluate --ckpt runs/cmha --suite text --evaluator gpt2-large   # the paper
  complexformer evaluate --ckpt runs/code --suite code --num-samples 100 --k 1,10,100
  complexformer evaluate --ckpt runs/math --suite math --math-data gsm8k
  complexformer evaluate --suite extrapolation --ckpt runs/rope --ckpt runs/cmha \\
      --ckpt runs/alibi --multipliers 1,2,4,8,16
  complexformer evaluate --ckpt runs/cmha --suite heads --prompt "def parse(text):"
  complexformer evaluate --ckpt runs/cmha --suite lm-eval          # offline: ppl + mc tasks
  complexformer evaluate --ckpt runs/cmha --suite lm-eval --tasks hellaswag arc_easy  # online

Suites: ppl (perplexity of --split), text (gen-PPL, Dist-1/2, Rep-4 of continuations of
held-out prompts), code (pass@k in a sandbox), math (final-answer accuracy), extrapolation
(perplexity at 1..16x the training length, one line per --ckpt), heads (CMHA's delta and b,
semantic vs positional share of the scores, attention maps), lm-eval (EleutherAI's
lm-evaluation-harness on the run exported for transformers: the shipped offline tasks
complexformer_ppl and complexformer_mc, or any harness task). Options of other suites are
ignored. See docs/evaluation_*.md and docs/huggingface.md.
"""


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _kwargs(args: argparse.Namespace, mapping: dict[str, str]) -> dict[str, Any]:
    """Config fields from the options that were given (None: keep the config's default)."""
    return {
        field: getattr(args, dest)
        for dest, field in mapping.items()
        if getattr(args, dest, None) is not None
    }


def _out_dir(args: argparse.Namespace, run) -> Path:
    """``--out``, else ``RUN/eval`` (``./eval`` without a run directory, e.g. several runs)."""
    if args.out:
        return Path(args.out)
    base = run.run_dir if run is not None and run.run_dir is not None else Path(".")
    return Path(base) / "eval"


def _ppl(args, run) -> dict[str, Any]:
    from ..data import load_corpus, load_token_splits
    from ..data.splits import CHUNK_CHARS
    from ..training import evaluate_perplexity

    model, tokenizer = run.model, run.tokenizer
    spec = args.data or (run.train_config.data if run.train_config is not None else "stdlib")
    corpus = load_corpus(spec, log=print)
    split = args.split or "val"
    tokens = load_token_splits(corpus, tokenizer, splits=(split,))[split]
    if len(tokens) == 0:
        raise ValueError(
            f"the {split} split of {spec!r} holds no text: a corpus of few documents is cut "
            f"into chunks of {CHUNK_CHARS // 1024} KiB and needs at least three of them for "
            "train, validation and test; evaluate another --split or use a larger corpus"
        )
    res = evaluate_perplexity(
        model,
        tokens,
        model.config.max_seq_len - 1,
        args.batch_size or 8,
        max_blocks=args.max_blocks,
        device=next(model.parameters()).device,
    )
    res = {"split": split, "data": spec, **res}
    print(
        json.dumps(res, indent=2)
        if args.json
        else f"{res['data']} [{split}]: loss {res['loss']:.4f}  perplexity {res['ppl']:.2f}  "
        f"({res['tokens']:,} tokens)"
    )
    return res


def _suite(name: str, args: argparse.Namespace, runs: list) -> dict[str, Any]:
    """Run the registered suite ``name`` with the config built from its options."""
    from . import code, extrapolation, heads, math, text  # noqa: F401  (registers the suites)
    from .suite import get_suite

    if name == "lm-eval":  # needs transformers (the export), so registered only when asked
        from .._optional import require

        require("transformers", "hf", "the lm-eval suite")
        from . import lmeval  # noqa: F401

    cls = get_suite(name)
    config = cls.config_class(**_kwargs(args, cls.options))
    if cls.many_runs:
        suite = cls(config, print, names=[str(c) for c in args.ckpt])
        return suite.run(runs, _out_dir(args, None))
    return cls(config, print).run(runs[0], _out_dir(args, runs[0]))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .._runtime import cpu_settings
    from ..training import load_run

    suites = list(dict.fromkeys(args.suite or ["ppl"]))
    if len(args.ckpt) > 1 and suites != ["extrapolation"]:
        raise ValueError(
            f"several --ckpt are compared only by --suite extrapolation; got "
            f"{len(args.ckpt)} checkpoints for suites {suites}"
        )
    with cpu_settings(args.threads or None):
        runs = [load_run(c) for c in args.ckpt]
        for suite in suites:
            res = _ppl(args, runs[0]) if suite == "ppl" else _suite(suite, args, runs)
            if suite != "ppl":
                out = _out_dir(args, None if suite == "extrapolation" else runs[0])
                md = out / f"{suite}.md"
                if md.is_file():
                    print(f"\n{md.read_text(encoding='utf-8')}")
                print(f"{suite}: results in {out.resolve()}")
                if args.json:
                    summary = res.get("metrics", res.get("summary", {}))
                    print(json.dumps(summary, indent=2, default=str))
    return 0


def add_evaluate_parser(sub) -> argparse.ArgumentParser:
    """Register the ``evaluate`` subcommand on the subparsers object ``sub``."""
    e = sub.add_parser(
        "evaluate",
        help="perplexity and the evaluation suites",
        description="Evaluate trained models. Without --suite: perplexity on a corpus split, "
        "over consecutive non-overlapping blocks of max_seq_len tokens. With --suite: the "
        "paper's protocols (text, code, math), length extrapolation and head analysis; each "
        "writes JSON and a markdown table to --out and is reproducible with --seed.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument(
        "--ckpt",
        required=True,
        action="append",
        help="run, checkpoint or saved model directory (repeat for extrapolation)",
    )
    e.add_argument(
        "--suite", nargs="+", choices=SUITES, default=None, help="suites to run (default ppl)"
    )
    e.add_argument(
        "--out", default=None, help="results folder (default RUN/eval; ./eval for extrapolation)"
    )
    e.add_argument(
        "--data",
        default=None,
        help="corpus spec of prompts / blocks (default: the run's training corpus for ppl, "
        "extrapolation and heads; stdlib for text)",
    )
    e.add_argument(
        "--split",
        default=None,
        choices=("train", "val", "test"),
        help="split (ppl, extrapolation, heads: val; text: test)",
    )
    e.add_argument("--batch-size", type=int, default=None, help="sequences per forward pass")
    e.add_argument("--seed", type=int, default=None, help="seed (default 0)")
    e.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    g = e.add_argument_group("ppl")
    g.add_argument("--max-blocks", type=int, default=None, help="evaluate at most N blocks")
    g = e.add_argument_group("generation (text, code, math)")
    g.add_argument(
        "--max-new-tokens", type=int, default=None, help="new tokens per sample (default 256)"
    )
    g.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (text 1.0, code 0.8, math 0 = greedy)",
    )
    g.add_argument(
        "--top-p", type=float, default=None, help="nucleus mass (text 0.9, code 0.95, math 1.0)"
    )
    g = e.add_argument_group("text")
    g.add_argument("--num-prompts", type=int, default=None, help="prompts (default 100)")
    g.add_argument(
        "--prompt-tokens", type=int, default=None, help="prompt length in model tokens (default 64)"
    )
    g.add_argument(
        "--evaluator",
        default=None,
        help="gen-PPL evaluator: smollm2 (offline, default), a Hugging Face causal "
        "LM name (gpt2-large: the paper) or directory, a .gguf file, or 'none'",
    )
    g = e.add_argument_group("code")
    g.add_argument(
        "--problems",
        default=None,
        help="humaneval (offline, default), mbpp, or a HumanEval-format JSONL file",
    )
    g.add_argument("--num-samples", type=int, default=None, help="samples per problem (100)")
    g.add_argument("--k", default=None, help="pass@k values, e.g. 1,10,100 (k <= n)")
    g.add_argument("--timeout", type=float, default=None, help="seconds per program (3.0)")
    g.add_argument("--workers", type=int, default=None, help="parallel sandboxes (default 2)")
    g.add_argument(
        "--unsafe-python-guard-only",
        action="store_true",
        help="run completions even without bubblewrap, behind the Python guard alone (unsafe: "
        "a hostile completion can escape it; printed and recorded in the report)",
    )
    g.add_argument(
        "--max-problems", type=int, default=None, help="use the first N problems (code, math)"
    )
    g = e.add_argument_group("math")
    g.add_argument(
        "--math-data",
        default=None,
        help="gsm8k (default), math, or a local JSONL with question/answer",
    )
    g.add_argument(
        "--num-fewshot",
        type=int,
        default=None,
        help="worked examples in the prompt (math, lm-eval)",
    )
    g = e.add_argument_group("extrapolation")
    g.add_argument(
        "--multipliers",
        type=_ints,
        default=None,
        help="context lengths as multiples of the training length (1,2,4,8,16)",
    )
    g.add_argument(
        "--max-tokens", type=int, default=None, help="tokens scored at every length (default 16384)"
    )
    g.add_argument(
        "--protocol",
        default=None,
        choices=("blocks", "last_window"),
        help="blocks: the same tokens cut into blocks of each length (default); "
        "last_window: the same final T-1 tokens with growing context",
    )
    g = e.add_argument_group("heads")
    g.add_argument("--prompt", default=None, help="prompt whose attention maps are drawn")
    g.add_argument("--num-blocks", type=int, default=None, help="blocks of real data (8)")
    g.add_argument("--layers", type=_ints, default=None, help="layers to draw, e.g. 0,1")
    g = e.add_argument_group("lm-eval")
    g.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="lm-evaluation-harness tasks: complexformer_ppl (held-out documents of --split "
        "of --data) and complexformer_mc (shipped, offline; the default), or any harness "
        "task such as hellaswag, gsm8k (online)",
    )
    g.add_argument(
        "--max-documents",
        type=int,
        default=None,
        help="documents of the split scored by complexformer_ppl (default 200)",
    )
    g.add_argument(
        "--limit", type=int, default=None, help="at most N documents per harness task (all)"
    )
    e.set_defaults(func=cmd_evaluate)
    return e
