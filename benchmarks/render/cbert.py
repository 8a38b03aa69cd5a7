"""The ``cbert`` section: CmplxBERT (complex LoRA adapters) vs the real BERT
(``benchmarks.cbert``)."""

from __future__ import annotations

from typing import Any

from complexformer.results import markdown_table

from ._format import fmt_num, fmt_ratio
from .targets import target_lines

LABELS = {
    "bert": "HF BERT (real)",
    "cmplx_modulus": "CmplxBERT, modulus score",
    "cmplx_real": "CmplxBERT, real score",
    "bert_full_ft": "HF BERT, full fine-tuning",
}
HEADERS = ("what", "model", "shape", "time (ms)", "peak MiB", "vs BERT", "CPU time vs BERT")


def rows(records: list[dict]) -> list[list[str]]:
    """Forward rows (wall and CPU time vs BERT), then training-step memory rows."""
    out = []
    for r in records:
        shape = f"B={r['B']}, T={r['T']}"
        if r["kind"] == "forward":
            out.append(
                [
                    "forward (eval)",
                    LABELS[r["model"]],
                    shape,
                    fmt_num(r["median_ms"], 1),
                    "-",
                    fmt_ratio(r["ratio_vs_bert"]),
                    fmt_ratio(r["cpu_ratio_vs_bert"]),
                ]
            )
        else:
            label = LABELS.get(r["model"], r["model"])
            if r["model"] == "cmplx_modulus":
                label = "CmplxBERT, adapters only"
            out.append(
                [
                    f"train step fwd+bwd (MLM head on {r['head']} tokens)",
                    label,
                    shape,
                    fmt_num(r["step_median_ms"], 0),
                    fmt_num(r["peak_mib"], 1),
                    f"time {fmt_ratio(r['time_vs_bert'])}, memory {fmt_ratio(r['memory_vs_bert'])}",
                    "-",
                ]
            )
    return out


def render(payload: dict[str, Any], raw: str) -> str:
    """The markdown of the section (without its markers); ``raw`` is the JSON file shown."""
    env, cfg, recs = payload["environment"], payload["config"], payload["records"]
    cmd = "python -m benchmarks.cbert" + (f" {cfg['argv']}" if cfg["argv"] else "")
    lines = [
        "## CmplxBERT (complex LoRA adapters) vs the real BERT",
        "",
        f"Measured {env['date']} on `{env['cpu_model']}` ({env['torch_threads']} torch "
        f"threads), torch {env['torch']}. Command: `{cmd}`. Model: {payload['model_source']}; "
        f"`complexify(model, ComplexLoRAConfig(r={cfg['rank']}))`. Forward: eval, no grad, "
        "all-ones attention mask, timed round-robin (median of "
        f"{cfg['repeats']} wall-clock times; the target is on these). CPU time vs BERT: the "
        "ratio of the medians of the same calls' CPU time (`time.thread_time`), which "
        "other processes on a shared machine disturb far less than wall-clock time. "
        "Training step: forward + backward of the MLM loss of "
        "`BertForMaskedLM` (15% masked), CmplxBERT with the paper's modulus score and "
        "head (adapters, complex biases and LayerNorms trainable) vs full fine-tuning of "
        "the real model, with the MLM head on every token (the loss of "
        "`BertForMaskedLM(labels=...)`) and on the labelled tokens only (how CmplxBERT's "
        "MLM training runs, `return_logits=False`; the real model's head on the same rows); "
        "peak = bytes allocated during the step over what was live before (torch profiler "
        f"on CPU), time = median of {cfg.get('train_repeats', 1)} interleaved steps. "
        f"Raw data: `{raw}`.",
        "",
        markdown_table(HEADERS, rows(recs), align="lllrrrr"),
        "",
        "Targets:",
        "",
        *target_lines(payload),
    ]
    if payload["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in payload["notes"]]
    return "\n".join(lines)
