"""``complexformer evaluate``: perplexity on a corpus split, and (``--suite``) the evaluation
suites of :mod:`complexformer.evaluation`."""

from __future__ import annotations

import argparse
import json

__all__ = ["add_evaluate_parser", "cmd_evaluate"]


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..data import load_corpus, load_token_splits
    from ..training import evaluate_perplexity, load_run

    run = load_run(args.ckpt)
    model, tokenizer = run.model, run.tokenizer
    corpus = load_corpus(args.data, log=print)
    tokens = load_token_splits(corpus, tokenizer, splits=(args.split,))[args.split]
    block = model.config.max_seq_len - 1
    res = evaluate_perplexity(
        model, tokens, block, args.batch_size, max_blocks=args.max_blocks,
        device=next(model.parameters()).device,
    )
    res = {"split": args.split, "data": args.data, **res}
    print(json.dumps(res, indent=2) if args.json else
          f"{args.data} [{args.split}]: loss {res['loss']:.4f}  perplexity {res['ppl']:.2f}  "
          f"({res['tokens']:,} tokens)")
    return 0


def add_evaluate_parser(sub) -> argparse.ArgumentParser:
    """Register the ``evaluate`` subcommand on the subparsers object ``sub``."""
    e = sub.add_parser("evaluate", help="perplexity on a corpus split",
                       description="Perplexity of a trained model on a split of a corpus, over "
                       "consecutive non-overlapping blocks of max_seq_len tokens.")
    e.add_argument("--ckpt", required=True, help="run, checkpoint or saved model directory")
    e.add_argument("--data", default="stdlib", help="corpus spec (as for train; default stdlib)")
    e.add_argument("--split", default="val", choices=("val", "test"), help="split (default val)")
    e.add_argument("--batch-size", type=int, default=8, help="blocks per forward pass")
    e.add_argument("--max-blocks", type=int, default=None, help="evaluate at most N blocks")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.set_defaults(func=cmd_evaluate)
    return e
