"""The ``complexformer`` command line: train, prepare, generate, evaluate, info, export,
retrofit and the library's CmplxBERT commands (cbert-complexify, cbert-predict), then the
subcommands of every provider in the ``complexformer.commands`` entry-point group (the lab's
reproduce, cbert-finetune, cbert-study, cbert-start and cbert-embeddings); docs/cli.md lists
every option.

Every subcommand explains its options with ``--help``. Bad input (an unknown preset or config
key, a missing file, a damaged checkpoint) ends with a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..runtime import cpu_settings, missing_extra, require, use_entry_points
from .options import (
    add_base,
    add_device,
    add_fields,
    add_json,
    add_model,
    add_out,
    add_overwrite,
    add_prompt,
    add_run_dir,
    add_sampling,
    add_set,
    add_shard,
    add_shared,
    add_threads,
    add_verify,
    build_configs,
    config_choice,
)

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
true/false, null), else as a string. --config FILE reads the same fields from a TOML file
(and `preset = "NAME"`); the options given and --set win over it.
"""


# ---------------------------------------------------------------------- subcommands
def train_configs(args: argparse.Namespace):
    """The model and training configs of ``complexformer train`` from its parsed options:
    the preset (or the ``--base`` run's config), then ``--config``, the options and ``--set``.

    Returns:
        ``(GPTConfig, TrainConfig)``.
    """
    from ..lm import load_run
    from ..models.config import GPTConfig, preset_config
    from ..training import TrainConfig

    kw = build_configs(
        args, {"model": GPTConfig, "train": TrainConfig}, exclude=("base", "preset", "prompt")
    )
    if args.base is not None:  # continued training: the base model's shapes
        init = load_run(args.base, require_tokenizer=False, verify=args.verify)
        model_cfg = init.model_config.replace(**kw["model"])
        kw["train"]["init_from"] = args.base
    else:
        model_cfg = preset_config(config_choice(args, "preset", "tiny"), **kw["model"])
    return model_cfg, TrainConfig(**kw["train"])


def cmd_train(args: argparse.Namespace) -> int:
    from ..artifacts import load_artifact
    from ..lm import run_prompt, train
    from ..models.sampling import check_sampling_args

    if args.sample_tokens:  # refuse a bad sampling setting before training, not after
        check_sampling_args(args.temperature, args.top_p, 0)
    model_cfg, train_cfg = train_configs(args)
    summary = train(
        model_cfg,
        train_cfg,
        resume=args.resume,
        overwrite=args.overwrite,
        verify_base=args.verify,
    )
    if summary is None:  # a non-zero rank of a distributed run
        return 0
    default_prompt = run_prompt(args.out_dir)  # recorded in the run for `generate`
    if args.sample_tokens > 0:
        prompt = args.prompt if args.prompt is not None else default_prompt
        print(f"\nsample (temperature {args.temperature}, top_p {args.top_p}):")
        run = load_artifact(args.out_dir)
        print(
            run.complete(
                prompt, args.sample_tokens, args.temperature, args.top_p, 0, args.seed or 0
            )
        )
    val = summary.get("val_ppl")
    print(f"\nvalidation perplexity: {val:.2f}" if val is not None else "")
    print(f"run directory: {Path(summary.get('run_dir', args.out_dir)).resolve()}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from ..data.prepare import PrepareConfig, prepare_corpus

    cfg = PrepareConfig(**build_configs(args, {"prepare": PrepareConfig})["prepare"])
    prepare_corpus(
        cfg.data,
        args.out,
        tokenizer=cfg.tokenizer,
        vocab_size=cfg.vocab_size,
        text_field=cfg.text_field,
        workers=cfg.workers,
        shard_tokens=cfg.shard_tokens,
        sample_bytes=cfg.tokenizer_sample_bytes,
        cache_dir=cfg.cache_dir,
        hf_streaming=cfg.hf_streaming,
        overwrite=args.overwrite,
        log=print,
    )
    return 0


def _add_prepare_parser(sub, fmt) -> None:
    from ..data.prepare import PrepareConfig

    p = sub.add_parser(
        "prepare",
        help="tokenize a corpus once into a folder that train reads as prepared:DIR",
        description="Tokenize every split of a corpus once, on several processes, into --out: "
        "the tokenizer, memory-mapped token shards, index.json and manifest.json. Train on it "
        "with --data prepared:DIR; the source is not read again.",
        epilog="examples:\n"
        "  complexformer prepare --data text:corpus/**/*.jsonl --out data/corpus\n"
        "  complexformer train --preset tiny --data prepared:data/corpus --out runs/big\n",
        formatter_class=fmt,
    )
    add_fields(p, PrepareConfig, "data")
    add_out(p, "the folder to write (new or empty)")
    add_fields(p, PrepareConfig, "tokenizer", "vocab_size", "text_field", "workers")
    add_overwrite(p, "replace a prepared corpus already in --out")
    add_set(p, (PrepareConfig,))
    p.set_defaults(func=cmd_prepare)


def cmd_generate(args: argparse.Namespace) -> int:
    from ..artifacts import load_artifact

    prompt = args.prompt
    if args.prompt_file is not None:
        path = Path(args.prompt_file)
        if not path.is_file():
            raise FileNotFoundError(f"prompt file {path} not found")
        prompt = path.read_text(encoding="utf-8")
    with cpu_settings(args.threads):
        artifact = load_artifact(args.model, verify=args.verify)
        if prompt is None:
            prompt = artifact.default_prompt()
        sampling = (args.max_new_tokens, args.temperature, args.top_p, args.top_k)
        for i in range(args.num_samples):
            seed = None if args.seed is None else args.seed + i
            text = artifact.complete(prompt, *sampling, seed, use_cache=not args.no_cache)
            if args.num_samples > 1:
                print(f"----- sample {i + 1}")
            print(text)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from ..artifacts import load_artifact

    with cpu_settings(args.threads):
        artifact = load_artifact(args.model, verify=args.verify)
        print(json.dumps(artifact.info(), indent=2) if args.json else artifact.describe())
    return 0


def _export_cmplxbert(args: argparse.Namespace) -> int:
    require("transformers", "hf", "complexformer export")
    from ..cmplxbert.loading import is_cmplxbert_dir
    from ..hf.export_cmplxbert import export_cmplxbert

    src = Path(args.model)
    src = src if is_cmplxbert_dir(src) else src / "model"
    with cpu_settings(args.threads):
        out = export_cmplxbert(src, args.out, verify=args.verify)
    print(f"exported {args.model} to {Path(out).resolve()}")
    print(
        "load it with: import complexformer.hf; complexformer.hf.register_auto_classes(); "
        "AutoModelFor...from_pretrained(DIR), or without complexformer: "
        "AutoModelFor...from_pretrained(DIR, trust_remote_code=True)"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..artifacts import detect_kind
    from ..training.dist import resolve_device

    kind = detect_kind(args.model)
    if kind == "cmplxbert":
        return _export_cmplxbert(args)
    if kind in ("cmplxbert-hf", "cmplxbert-export"):
        raise ValueError(
            f"export takes a CmplxBERT directory (cbert-finetune's model/, save_cmplxbert); "
            f"{args.model} is already in transformers' format: "
            + (
                "it loads with AutoModelFor...from_pretrained(DIR, trust_remote_code=True)"
                if kind == "cmplxbert-export"
                else "load it with complexformer.hf.register_auto_classes() and "
                "AutoModelFor...from_pretrained(DIR), then model.cmplxbert is the CmplxBert "
                "that save_cmplxbert writes as a CmplxBERT directory"
            )
        )
    if kind not in ("lm-run", "lm-checkpoint", "lm-model", "export"):
        from ..artifacts.artifact import DESCRIPTIONS

        raise ValueError(
            f"export writes ComplexFormer language models for transformers; {args.model} is "
            f"{DESCRIPTIONS[kind]}"
            + (
                ", which transformers loads through its base model and "
                "complexformer.retrofit.load_adaptation"
                if kind == "retrofit"
                else ""
            )
        )
    require("transformers", "hf", "an export for transformers")
    from ..hf.export import export_run

    with cpu_settings(args.threads):
        device = resolve_device(args.device)
        out = export_run(args.model, args.out, device=device, verify=args.verify)
    print(f"exported {args.model} to {Path(out).resolve()}")
    print(
        "load it with: import complexformer.hf; complexformer.hf.register_auto_classes(); "
        "AutoModelForCausalLM.from_pretrained(DIR), or without complexformer: "
        "AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)"
    )
    return 0


# ---------------------------------------------------------------------- parser
def _add_train_parser(sub, fmt) -> None:
    from ..attention.registry import describe_schemes
    from ..models.config import PRESETS, GPTConfig, describe_presets
    from ..training import TrainConfig

    t = sub.add_parser(
        "train",
        help="train a language model on a corpus",
        description="Train a language model; "
        "checkpoints, metrics.jsonl, loss.png, the tokenizer and the final model go to --out.",
        epilog=f"{_EPILOG_TRAIN}\npresets (--preset NAME):\n{describe_presets()}\n\n"
        f"positional schemes (--set pos_scheme=NAME):\n{describe_schemes()}\n",
        formatter_class=fmt,
    )
    t.add_argument(
        "--preset",
        default=None,
        help=f"named model configuration: {', '.join(PRESETS)} (listed below; default tiny)",
    )
    add_fields(t, TrainConfig, "data")
    add_out(t, "run directory", dest="out_dir")
    add_base(
        t,
        "continued training: start from this ComplexFormer run, checkpoint or model (its "
        "weights, tokenizer and config; fresh optimizer and schedule; --preset is ignored)",
    )
    add_verify(t)
    add_fields(
        t,
        GPTConfig,
        "max_seq_len",
        flags={"max_seq_len": "--seq-len"},
        defaults={"max_seq_len": "the preset's"},
    )
    add_fields(t, TrainConfig, "max_steps", "batch_size", "lr", "eval_every", "save_every", "seed")
    add_fields(t, TrainConfig, "tokenizer", "vocab_size")
    add_device(t, default=None)
    add_threads(t, dest="num_threads")
    add_fields(t, TrainConfig, "bf16", "compile")
    add_shard(t)
    add_fields(t, TrainConfig, "tensorboard")
    add_set(t, (GPTConfig, TrainConfig), choices=("preset",))
    add_run_dir(t)
    t.add_argument(
        "--sample-tokens",
        type=int,
        default=120,
        help="tokens to sample from the trained model at the end (0: none)",
    )
    add_prompt(
        t,
        "prompt of the final sample (default: the start of a validation document of the "
        "corpus, recorded as <out>/prompt.txt)",
    )
    add_sampling(t)
    t.set_defaults(func=cmd_train)


_MODEL_HELP = (
    "the model to read: a ComplexFormer run, checkpoint or final model, a transformers "
    "export, or a retrofit run or adaptation"
)


def _add_generate_parser(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="sample a continuation",
        description="Continue a prompt with a trained model (a ComplexFormer run, checkpoint, "
        "final model or export, or a retrofit run or adaptation).",
    )
    add_model(g, _MODEL_HELP)
    add_verify(g)
    src = g.add_mutually_exclusive_group()
    add_prompt(
        src,
        "prompt text (default: the run's prompt.txt, the start of a validation document "
        "of its corpus)",
    )
    src.add_argument("--prompt-file", help="file whose content is the prompt")
    add_shared(g, "max_new_tokens", 200)
    add_sampling(g)
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0: all)")
    add_shared(g, "seed", help="seed of sampling, for reproducible samples (sample i: seed + i)")
    add_shared(g, "num_samples", 1)
    g.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute the whole sequence each step instead of using the KV cache",
    )
    add_threads(g)
    g.set_defaults(func=cmd_generate)


def _add_info_export_parsers(sub) -> None:
    i = sub.add_parser(
        "info",
        help="what an artifact is: config and parameter counts",
        description="Show an artifact's kind, configuration and parameter counts: a "
        "ComplexFormer model (with CMHA's adaptation parameters and values), a retrofit "
        "adaptation or a CmplxBERT directory.",
    )
    add_model(i, _MODEL_HELP + ", or a CmplxBERT directory")
    add_verify(i)
    add_json(i)
    add_threads(i)
    i.set_defaults(func=cmd_info)

    x = sub.add_parser(
        "export",
        help="write a model directory for transformers (AutoModelFor..., pipeline)",
        description="Export a ComplexFormer run or model, or a CmplxBERT directory, as a "
        "transformers model directory: config.json with an auto_map, model.safetensors, the "
        "self-contained modeling code (for trust_remote_code=True without complexformer), "
        "the tokenizer and a sha256 manifest. Needs the hf extra. A language model's export "
        "also loads back with --model DIR. See docs/huggingface.md and docs/cmplxbert.md.",
    )
    add_model(x, "the ComplexFormer run, checkpoint or final model, or the CmplxBERT directory")
    add_verify(x)
    add_out(
        x,
        "directory to write (an earlier export there is replaced; any other non-empty "
        "directory is refused)",
    )
    add_device(x, default="cpu", help="device to load the model on while exporting (cpu)")
    add_threads(x)
    x.set_defaults(func=cmd_export)


def build_parser() -> argparse.ArgumentParser:
    """The ``complexformer`` parser with every subcommand."""
    from ..cmplxbert.cli import add_cbert_parsers
    from ..evaluation.cli import add_evaluate_parser
    from ..retrofit.cli import add_retrofit_parser

    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="complexformer",
        description="Train, sample and evaluate ComplexFormer (CMHA) language models and their "
        "baselines (RoPE, learned, sinusoidal, ALiBi, NoPE); convert pre-trained RoPE models "
        "to CMHA (retrofit) and BERTs to CmplxBERT (the cbert-* commands). docs/cli.md lists "
        "every option.",
        formatter_class=fmt,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_train_parser(sub, fmt)
    _add_prepare_parser(sub, fmt)
    _add_generate_parser(sub)
    add_evaluate_parser(sub)
    _add_info_export_parsers(sub)
    add_retrofit_parser(sub)
    add_cbert_parsers(sub)
    add_command_providers(sub)
    return p


#: The entry-point group whose providers add subcommands that live outside the library:
#: each is a function ``add_parsers(sub)`` given the subparsers of the ``complexformer``
#: parser (the lab's is ``complexformer_lab.cli:add_parsers``, declared in pyproject.toml).
COMMANDS_GROUP = "complexformer.commands"


def add_command_providers(sub) -> None:
    """Call every provider of :data:`COMMANDS_GROUP` on ``sub``, in the order of their
    names. A provider that fails to load or to add its parsers is left out with one warning on
    stderr naming its entry point (once per process,
    :func:`~complexformer.runtime.use_entry_points`), and the library's commands go on."""
    use_entry_points(COMMANDS_GROUP, lambda ep: ep.load()(sub))


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``complexformer`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    sub = _subparser(parser, args.command) or parser
    if unknown:  # reported by the subcommand, which names itself
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.func(args)
    except (ValueError, OSError, KeyError, ImportError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        msg = getattr(e, "cli_message", msg)  # an error that knows the command line's flags
        if isinstance(e, OSError) and e.filename is not None and e.strerror:
            msg = f"{e.filename}: {e.strerror}"  # not "[Errno 2] ...: 'x'"
        if isinstance(e, ImportError):  # an optional package: name the extra that installs it
            msg = missing_extra(e, f"`complexformer {args.command}`") or msg
        print(f"complexformer {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; resume with --resume", file=sys.stderr)
        return 130
