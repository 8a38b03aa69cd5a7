"""The ``complexformer`` command line: train, generate, evaluate, info, export, retrofit,
complexify, finetune, analyze-embeddings, reproduce.

Every subcommand explains its options with ``--help``. Bad input (an unknown preset or config
key, a missing file, a damaged checkpoint) ends with a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._config import parse_overrides, unknown_key_error
from ._report import jsonable

_EPILOG_TRAIN = """\
examples:
  complexformer train --preset tiny --data stdlib --out runs/cmha --max-steps 600
  complexformer train --preset tiny --out runs/rope --set pos_scheme=rope
  complexformer train --preset paper --data hf:Salesforce/wikitext:wikitext-103-raw-v1 \\
      --tokenizer gpt2 --out runs/paper --set lr=1e-4 --set batch_size=8 --bf16
  torchrun --nproc_per_node 2 -m complexformer.cli train --preset tiny --out runs/ddp
  complexformer train --out runs/cmha --resume          # continue from the last checkpoint

--set KEY=VALUE overrides any field of the model config (GPTConfig: pos_scheme, n_layer,
d_model, n_head, d_ff, dropout, max_seq_len, omega_schedule, rope_base, norm,
tie_embeddings, delta_init, pcl, pcl_epsilon, pcl_tau, pcl_target, pcl_reduce, ...) or of
the training config (TrainConfig: lr,
batch_size, grad_accum, warmup_frac, min_lr_ratio, weight_decay, grad_clip, eval_every,
eval_blocks, save_every, keep_last, ...). VALUE is read as JSON when it parses (numbers,
true/false, null), else as a string.
"""


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Route overrides to the model config or the training config; unknown keys raise."""
    from .models.config import GPTConfig
    from .training import TrainConfig

    model_keys, train_keys = set(GPTConfig.field_names()), set(TrainConfig.field_names())
    model_over, train_over = {}, {}
    for key, value in overrides.items():
        if key in model_keys:
            model_over[key] = value
        elif key in train_keys:
            train_over[key] = value
        else:
            raise unknown_key_error(key, sorted(model_keys | train_keys), "config key")
    return model_over, train_over


# ---------------------------------------------------------------------- subcommands
def cmd_train(args: argparse.Namespace) -> int:
    from .models.config import preset_config
    from .models.sampling import check_sampling_args
    from .training import TrainConfig, load_run, train
    from .training.run import run_prompt

    if args.sample_tokens:  # refuse a bad sampling setting before training, not after
        check_sampling_args(args.temperature, args.top_p, 0)
    model_over, train_over = split_overrides(parse_overrides(args.set))
    flags = {
        "data": args.data,
        "tokenizer": args.tokenizer,
        "vocab_size": args.vocab_size,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "eval_every": args.eval_every,
        "save_every": args.save_every,
        "seed": args.seed,
        "device": args.device,
        "num_threads": args.threads,
    }
    train_kw = {k: v for k, v in flags.items() if v is not None}
    for name in ("bf16", "compile", "tensorboard"):
        if getattr(args, name):
            train_kw[name] = True
    train_kw.update(train_over)
    if args.init_from is not None:  # continued training: the init model's shapes
        init = load_run(args.init_from, require_tokenizer=False)
        model_cfg = init.model_config.replace(**model_over) if model_over else init.model_config
        train_kw["init_from"] = args.init_from
    else:
        model_cfg = preset_config(args.preset, **model_over)
    train_cfg = TrainConfig(out_dir=args.out, **train_kw)
    summary = train(model_cfg, train_cfg, resume=args.resume, overwrite=args.overwrite)
    if summary is None:  # a non-zero rank of a distributed run
        return 0
    default_prompt = run_prompt(args.out)  # recorded in the run for `generate`
    if args.sample_tokens > 0:
        run = load_run(args.out)
        prompt = args.prompt if args.prompt is not None else default_prompt
        print(f"\nsample (temperature {args.temperature}, top_p {args.top_p}):")
        print(
            _complete(
                run.model,
                run.tokenizer,
                prompt,
                args.sample_tokens,
                args.temperature,
                args.top_p,
                0,
                args.seed or 0,
            )
        )
    val = summary.get("val_ppl")
    print(f"\nvalidation perplexity: {val:.2f}" if val is not None else "")
    print(f"run directory: {Path(summary.get('run_dir', args.out)).resolve()}")
    return 0


def _complete(
    model,
    tokenizer,
    prompt: str,
    n: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    use_cache: bool = True,
) -> str:
    import torch

    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("the prompt encodes to no tokens; give a non-empty prompt")
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    out = model.generate(
        x,
        n,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=use_cache,
    )
    new = [t for t in out[0, len(ids) :].tolist() if t != tokenizer.eos_token_id]
    return prompt + tokenizer.decode(new)


def cmd_generate(args: argparse.Namespace) -> int:
    from .training import load_run
    from .training.run import run_prompt

    if args.prompt_file is not None:
        path = Path(args.prompt_file)
        if not path.is_file():
            raise FileNotFoundError(f"prompt file {path} not found")
        prompt = path.read_text(encoding="utf-8")
    elif args.prompt is not None:
        prompt = args.prompt
    else:
        prompt = run_prompt(args.ckpt)
    from .retrofit.evaluate import is_retrofit

    sampling = (args.max_new_tokens, args.temperature, args.top_p, args.top_k)
    if is_retrofit(args.ckpt):
        from .retrofit.evaluate import retrofit_generate
        from .retrofit.io import load_adaptation

        loaded = load_adaptation(args.ckpt)

        def complete(seed):
            return retrofit_generate(
                args.ckpt, prompt, *sampling, seed, use_cache=not args.no_cache, loaded=loaded
            )
    else:
        run = load_run(args.ckpt)

        def complete(seed):
            return _complete(
                run.model, run.tokenizer, prompt, *sampling, seed, use_cache=not args.no_cache
            )

    for i in range(args.num_samples):
        text = complete(None if args.seed is None else args.seed + i)
        if args.num_samples > 1:
            print(f"----- sample {i + 1}")
        print(text)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .models.report import format_parameter_report, parameter_report
    from .training import load_run

    run = load_run(args.ckpt)
    model, tokenizer, meta = run.model, run.tokenizer, run.metadata()
    cfg = model.config
    if args.json:
        print(
            json.dumps(
                {
                    "config": cfg.to_dict(),
                    "parameters": parameter_report(model),
                    "meta": jsonable(meta),
                },
                indent=2,
            )
        )
        return 0
    print(f"checkpoint: {Path(args.ckpt).resolve()}")
    for key, value in meta.items():
        if isinstance(value, (int, float, str)):
            print(f"{key}: {value}")
    print("\nmodel config:")
    for key, value in cfg.to_dict().items():
        print(f"  {key:<16}{value}")
    print(f"\ntokenizer: vocab {tokenizer.vocab_size}, eos id {tokenizer.eos_token_id}")
    print("\n" + format_parameter_report(model))
    per = model.scheme.describe_adaptation(cfg.n_head, cfg.head_dim)
    if per is not None:  # a scheme with learned adaptation (cmha, cmha_shared)
        print(f"adaptation: delta and b per layer ({per}) x {cfg.n_layer} layers")
        for i, block in enumerate(model.blocks):
            d, b = (p.detach() for p in model.scheme.adaptation(block.attn))
            print(
                f"  layer {i}: |delta| mean {d.abs().mean():.4f} max {d.abs().max():.4f}; "
                f"b mean {b.mean():+.4f} std {b.std():.4f}"
            )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate``: the suites of :mod:`complexformer.evaluation`, or the perplexity of a
    retrofit adaptation (:mod:`complexformer.retrofit`) when ``--ckpt`` is one."""
    from .retrofit.evaluate import is_retrofit, retrofit_perplexity

    if not any(is_retrofit(c) for c in args.ckpt):
        from .evaluation.cli import cmd_evaluate as evaluate_runs

        return evaluate_runs(args)

    suites = list(dict.fromkeys(args.suite or ["ppl"]))
    if suites != ["ppl"] or len(args.ckpt) > 1:
        raise ValueError(
            f"a retrofit adaptation is evaluated by --suite ppl with one --ckpt; got suites "
            f"{suites} and {len(args.ckpt)} --ckpt"
        )
    res = retrofit_perplexity(
        args.ckpt[0], args.data, args.split or "val", args.batch_size or 4, args.max_blocks
    )
    print(
        json.dumps(res, indent=2)
        if args.json
        else f"{res['data']} [{res['split']}]: loss {res['loss']:.4f}  perplexity "
        f"{res['ppl']:.2f}  ({res['tokens']:,} tokens)"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ._optional import require

    require("transformers", "hf", "complexformer export")
    from .hf.export import export_run

    out = export_run(args.ckpt, args.out, device=args.device)
    print(f"exported {args.ckpt} to {Path(out).resolve()}")
    print(
        "load it with: import complexformer; AutoModelForCausalLM.from_pretrained(DIR), or "
        "without complexformer: AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)"
    )
    return 0


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from .attention.registry import describe_schemes
    from .cmplxbert.cli import add_cbert_parsers
    from .evaluation.cli import add_evaluate_parser
    from .reproduce.cli import add_reproduce_parser
    from .retrofit.cli import add_retrofit_parser

    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="complexformer",
        description="Train, sample and evaluate ComplexFormer (CMHA) language models and their "
        "baselines (RoPE, learned, sinusoidal, ALiBi, NoPE).",
        formatter_class=fmt,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser(
        "train",
        help="train a model on a corpus",
        description="Train a language model; "
        "checkpoints, metrics.jsonl, loss.png, the tokenizer and the final model go to --out.",
        epilog=f"{_EPILOG_TRAIN}\npositional schemes (--set pos_scheme=NAME):\n"
        f"{describe_schemes()}\n",
        formatter_class=fmt,
    )
    t.add_argument(
        "--preset",
        default="tiny",
        help="model preset: tiny (CPU-sized), paper (ComplexFormer Appendix A: 8 "
        "layers, d_model 512, 8 heads, d_ff 1024) or gpt2 (GPT-2 small, learned "
        "positions). Default: tiny",
    )
    t.add_argument(
        "--data",
        default=None,
        help="corpus spec: stdlib (this Python's standard library, the default), "
        "text:GLOB (local .txt/.jsonl files) or hf:NAME[:CONFIG] (Hugging Face "
        "datasets, online)",
    )
    t.add_argument("--out", required=True, help="run directory")
    t.add_argument("--max-steps", type=int, default=None, help="optimizer updates (default 2000)")
    t.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="global batch in sequences per update (default 32)",
    )
    t.add_argument("--lr", type=float, default=None, help="peak learning rate (default 1e-3)")
    t.add_argument(
        "--eval-every", type=int, default=None, help="validate every N steps (default 200)"
    )
    t.add_argument(
        "--save-every", type=int, default=None, help="checkpoint every N steps (default 500)"
    )
    t.add_argument("--seed", type=int, default=None, help="seed of init, data and dropout")
    t.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer directory or Hugging Face name (default: a byte-level BPE "
        "trained on the train split and cached by content hash)",
    )
    t.add_argument(
        "--vocab-size", type=int, default=None, help="vocabulary of the trained BPE (default 8192)"
    )
    t.add_argument(
        "--device",
        default=None,
        choices=("auto", "cpu", "cuda"),
        help="training device (default auto: CUDA when available)",
    )
    t.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    t.add_argument("--bf16", action="store_true", help="bf16 autocast (phases stay fp32)")
    t.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    t.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log to TensorBoard (needs the tensorboard extra)",
    )
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any model or training config field (repeatable)",
    )
    t.add_argument(
        "--init-from",
        default=None,
        metavar="RUN",
        help="continued training: start from this run's weights and tokenizer "
        "(fresh optimizer and schedule; --preset is ignored, its config is used)",
    )
    t.add_argument(
        "--resume", action="store_true", help="continue from the newest good checkpoint in --out"
    )
    t.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh even if --out already holds a run (its checkpoints are replaced)",
    )
    t.add_argument(
        "--sample-tokens",
        type=int,
        default=120,
        help="tokens to sample from the trained model at the end (0: none)",
    )
    t.add_argument(
        "--prompt",
        default=None,
        help="prompt of the final sample (default: the start of a validation document of the "
        "corpus, recorded as <out>/prompt.txt)",
    )
    t.add_argument("--temperature", type=float, default=0.8, help="temperature of the sample")
    t.add_argument("--top-p", type=float, default=0.95, help="nucleus mass of the sample")
    t.set_defaults(func=cmd_train)

    g = sub.add_parser(
        "generate",
        help="sample a continuation",
        description="Continue a prompt with a trained model.",
    )
    g.add_argument(
        "--ckpt", required=True, help="run directory, checkpoint directory or saved model directory"
    )
    src = g.add_mutually_exclusive_group()
    src.add_argument(
        "--prompt",
        help="prompt text (default: the run's prompt.txt, the start of a validation document "
        "of its corpus)",
    )
    src.add_argument("--prompt-file", help="file whose content is the prompt")
    g.add_argument("--max-new-tokens", type=int, default=200, help="tokens to add (default 200)")
    g.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        help="softmax temperature, >= 0; 0 is greedy (default 0.8)",
    )
    g.add_argument(
        "--top-p", type=float, default=0.95, help="nucleus sampling mass in (0, 1] (default 0.95)"
    )
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0: all)")
    g.add_argument("--seed", type=int, default=None, help="seed for reproducible samples")
    g.add_argument("--num-samples", type=int, default=1, help="number of samples (default 1)")
    g.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute the whole sequence each step instead of using the KV cache",
    )
    g.set_defaults(func=cmd_generate)

    add_evaluate_parser(sub).set_defaults(func=cmd_evaluate)
    add_cbert_parsers(sub)
    add_reproduce_parser(sub)
    add_retrofit_parser(sub)

    i = sub.add_parser(
        "info",
        help="config and parameter counts",
        description="Show a model's configuration, its parameter counts with "
        "CMHA's adaptation parameters separately, and its adaptation values.",
    )
    i.add_argument("--ckpt", required=True, help="run, checkpoint or saved model directory")
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=cmd_info)

    x = sub.add_parser(
        "export",
        help="write a model directory for transformers (AutoModelForCausalLM, pipeline)",
        description="Export a run as a transformers model directory: config.json with an "
        "auto_map, model.safetensors, the self-contained modeling code (for "
        "trust_remote_code=True without complexformer), the tokenizer as a "
        "PreTrainedTokenizerFast and a sha256 manifest. Needs the hf extra. The directory "
        "also loads back with --ckpt DIR. See docs/huggingface.md.",
    )
    x.add_argument("--ckpt", required=True, help="run, checkpoint or saved model directory")
    x.add_argument(
        "--out",
        required=True,
        help="directory to write (an earlier export there is replaced; any other non-empty "
        "directory is refused)",
    )
    x.add_argument(
        "--device", default="cpu", help="device to load the model on while exporting (cpu)"
    )
    x.set_defaults(func=cmd_export)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``complexformer`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, KeyError, ImportError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"complexformer {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; resume with --resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
