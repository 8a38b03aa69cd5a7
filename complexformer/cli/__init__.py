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
from importlib.metadata import entry_points
from pathlib import Path

from ..runtime import cpu_settings, missing_extra, require
from .options import (
    add_base,
    add_device,
    add_model,
    add_run_dir,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
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
true/false, null), else as a string.
"""


# ---------------------------------------------------------------------- subcommands
def cmd_train(args: argparse.Namespace) -> int:
    from ..artifacts import load_artifact
    from ..lm import load_run, run_prompt, train
    from ..models.config import GPTConfig, preset_config
    from ..models.sampling import check_sampling_args
    from ..training import TrainConfig

    if args.sample_tokens:  # refuse a bad sampling setting before training, not after
        check_sampling_args(args.temperature, args.top_p, 0)
    kw = build_configs(
        args, {"model": GPTConfig, "train": TrainConfig}, exclude=("base", "preset", "prompt")
    )
    if args.base is not None:  # continued training: the base model's shapes
        init = load_run(args.base, require_tokenizer=False, verify=args.verify)
        model_cfg = init.model_config.replace(**kw["model"])
        kw["train"]["init_from"] = args.base
    else:
        model_cfg = preset_config(args.preset, **kw["model"])
    train_cfg = TrainConfig(**kw["train"])
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
    p.add_argument(
        "--data",
        default=None,
        help="corpus spec, as train takes it: stdlib (default), shakespeare, text:GLOB or "
        "hf:NAME[:CONFIG]",
    )
    p.add_argument("--out", required=True, help="the folder to write (new or empty)")
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer directory or Hugging Face name (default: the byte-level BPE trained "
        "on the train split, as train does)",
    )
    p.add_argument(
        "--vocab-size", type=int, default=None, help="vocabulary of the trained BPE (default 8192)"
    )
    p.add_argument(
        "--text-field", default=None, help="the JSONL field / dataset column (default text)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes that tokenize in parallel (default: the usable cores); the output "
        "is the same for any number",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace a prepared corpus already in --out"
    )
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
        out = export_run(args.model, args.out, device=args.device, verify=args.verify)
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
        default="tiny",
        help=f"named model configuration: {', '.join(PRESETS)} (listed below; default tiny)",
    )
    t.add_argument(
        "--data",
        default=None,
        help="corpus spec: stdlib (this Python's standard library, the default), "
        "text:GLOB (local .txt/.jsonl files), hf:NAME[:CONFIG] (Hugging Face "
        "datasets, online) or prepared:DIR (a folder written by complexformer prepare)",
    )
    t.add_argument("--out", dest="out_dir", required=True, help="run directory")
    add_base(
        t,
        "continued training: start from this ComplexFormer run, checkpoint or model (its "
        "weights, tokenizer and config; fresh optimizer and schedule; --preset is ignored)",
    )
    add_verify(t)
    t.add_argument(
        "--seq-len",
        dest="max_seq_len",
        type=int,
        default=None,
        help="context and training length in tokens (default: the preset's)",
    )
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
    add_device(t, default=None)
    add_threads(t, dest="num_threads")
    t.add_argument("--bf16", action="store_true", help="bf16 autocast (phases stay fp32)")
    t.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    add_shard(t)
    t.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log to TensorBoard (needs the tensorboard extra)",
    )
    add_set(t, (GPTConfig, TrainConfig))
    add_run_dir(t)
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
    i.add_argument("--json", action="store_true", help="print JSON")
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
    x.add_argument(
        "--out",
        required=True,
        help="directory to write (an earlier export there is replaced; any other non-empty "
        "directory is refused)",
    )
    x.add_argument(
        "--device", default="cpu", help="device to load the model on while exporting (cpu)"
    )
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
_warned: set[str] = set()


def add_command_providers(sub) -> None:
    """Call every provider of :data:`COMMANDS_GROUP` on ``sub``, in the order of their
    names. A provider that fails to load or to add its parsers is left out with one warning on
    stderr naming its entry point (once per process), and the library's commands go on."""
    for ep in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            ep.load()(sub)
        except Exception as e:  # noqa: BLE001 - any failure of a provider leaves it out
            if ep.name not in _warned:
                _warned.add(ep.name)
                print(
                    f"complexformer: warning: the commands of entry point {ep.name!r} "
                    f"({ep.value}) are left out: {type(e).__name__}: {e}",
                    file=sys.stderr,
                )


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
        if isinstance(e, ImportError):  # an optional package: name the extra that installs it
            msg = missing_extra(e, f"`complexformer {args.command}`") or msg
        print(f"complexformer {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; resume with --resume", file=sys.stderr)
        return 130
