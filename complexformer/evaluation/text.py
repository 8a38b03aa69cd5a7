"""The ``text`` suite: generation quality from held-out prompts (gen-PPL, Dist-1/2, Rep-4).

The protocol of the ComplexFormer paper (Shao et al., "ComplexFormer: Disruptively Advancing
Transformer Inference Ability via Head-Specific Complex Vector Attention", 2025, §4, Table 1):
prompts from held-out documents, 256 new tokens by nucleus sampling (Holtzman et al., "The
Curious Case of Neural Text Degeneration", ICLR 2020) with p = 0.9, then

* gen-PPL under an evaluator LM (:mod:`.genppl`; the paper used GPT-2 Large),
* Dist-1 / Dist-2 (Li et al., "A Diversity-Promoting Objective Function for Neural
  Conversation Models", NAACL 2016) and Rep-4 (:mod:`.text_metrics`).

Prompts: the documents of one split of a corpus spec (``stdlib``, ``text:GLOB``, ``hf:...``)
are shuffled with the seed; each document with at least ``prompt_tokens`` tokens (of the
model's tokenizer) gives one prompt, its first ``prompt_tokens`` tokens, until
``num_prompts`` are found. The model reads ``[EOS] + prompt`` (EOS separates documents in
training, so the prompt starts where a document starts); equal prompt lengths let the prompts
be sampled in batches. Generation stops at EOS; the continuation is the text of the new tokens
before the first EOS.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from ..config import ConfigBase
from ..data import load_corpus
from ..results import markdown_table
from .genppl import DEFAULT_EVALUATOR, Evaluator, load_evaluator, score_continuations
from .suite import (
    BATCH_SIZE,
    DATA,
    MAX_NEW_TOKENS,
    SEED,
    SPLIT,
    TEMPERATURE,
    TOP_P,
    EvalRun,
    Suite,
    fmt_number,
    model_info,
    option,
    register_suite,
)
from .text_metrics import distinct_n, repetition_n, sequence_repetition

__all__ = ["TextSuite", "TextSuiteConfig", "run_text_suite", "select_prompts"]


@dataclass
class TextSuiteConfig(ConfigBase):
    """Settings of the text-generation suite.

    Attributes:
        data: corpus spec the prompts come from (``stdlib``, ``text:GLOB``, ``hf:NAME``).
        split: the held-out split (``test``, or ``val``/``train``).
        num_prompts: number of prompts (fewer if the split has fewer long-enough documents).
        prompt_tokens: prompt length in tokens of the model's tokenizer.
        max_new_tokens: tokens to generate per prompt (256 in the paper).
        top_p: nucleus mass (0.9 in the paper).
        temperature: sampling temperature (0: greedy).
        top_k: keep only the k most likely tokens (0: off; the paper uses pure nucleus).
        evaluator: gen-PPL evaluator: ``smollm2`` (offline), ``gpt2-large`` (the paper's), a
            hub name, a local directory or a ``.gguf`` file; None, ``""`` or ``"none"`` skips
            gen-PPL.
        evaluator_batch_size: sequences per evaluator forward pass.
        seed: seeds the prompt choice and the sampling (same seed, same generations).
        batch_size: prompts sampled together.
        prepend_eos: give the model ``[EOS] + prompt`` (a document start, as in training).
        progress: show tqdm progress bars.
    """

    data: str = "stdlib"
    split: str = "test"
    num_prompts: int = 100
    prompt_tokens: int = 64
    max_new_tokens: int = 256
    top_p: float = 0.9
    temperature: float = 1.0
    top_k: int = 0
    evaluator: str | None = DEFAULT_EVALUATOR
    evaluator_batch_size: int = 8
    seed: int = 0
    batch_size: int = 8
    prepend_eos: bool = True
    progress: bool = True

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range field."""
        for name in (
            "num_prompts",
            "prompt_tokens",
            "max_new_tokens",
            "batch_size",
            "evaluator_batch_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")


def select_prompts(
    documents: list[str], tokenizer: Any, num_prompts: int, prompt_tokens: int, seed: int
) -> list[tuple[int, list[int]]]:
    """Choose prompts: shuffle the documents with ``seed``, keep the first ``prompt_tokens``
    tokens of each document that has at least that many, until ``num_prompts`` are found.

    Args:
        documents: the held-out documents.
        tokenizer: the model's tokenizer (``encode``).
        num_prompts: how many prompts to return at most.
        prompt_tokens: tokens per prompt.
        seed: seed of the shuffle.

    Returns:
        ``[(document index, prompt ids)]``, in the shuffled order.
    """
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    chosen: list[tuple[int, list[int]]] = []
    for i in order:
        if len(chosen) == num_prompts:
            break
        ids = tokenizer.encode(documents[i])
        if len(ids) >= prompt_tokens:
            chosen.append((i, list(ids[:prompt_tokens])))
    return chosen


def _split_text(tokenizer: Any, prompt: list[int], new: list[int]) -> tuple[str, str]:
    """Prompt and continuation texts; the continuation is cut from the decoded whole so a
    character whose bytes straddle the boundary is decoded once, in the continuation."""
    prompt_text = tokenizer.decode(prompt)
    full = tokenizer.decode(prompt + new)
    if full.startswith(prompt_text):
        return prompt_text, full[len(prompt_text) :]
    return prompt_text, tokenizer.decode(new)


@torch.no_grad()
def _generate(
    model: Any, tokenizer: Any, prompts: list[list[int]], config: TextSuiteConfig
) -> list[tuple[list[int], bool]]:

    device = next(model.parameters()).device
    eos = tokenizer.eos_token_id
    lead = [eos] if config.prepend_eos else []
    out: list[tuple[list[int], bool]] = []
    starts = range(0, len(prompts), config.batch_size)
    for b, s in enumerate(tqdm(starts, desc="text: generate", disable=not config.progress)):
        batch = [lead + p for p in prompts[s : s + config.batch_size]]
        x = torch.tensor(batch, dtype=torch.long, device=device)
        y = model.generate(
            x,
            config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            seed=config.seed + b,
            eos_token_id=eos,
        )
        for row in y[:, x.shape[1] :].tolist():
            stop = row.index(eos) if eos in row else len(row)
            out.append((row[:stop], stop < len(row)))
    return out


def _markdown(payload: dict[str, Any], n_examples: int = 3) -> str:
    m, c = payload["metrics"], payload["config"]
    ev = payload["evaluator"]
    rows = [
        ["gen-PPL (pooled, headline)", fmt_number(m["gen_ppl"], 2)],
        ["gen-PPL (mean of per-sample)", fmt_number(m["gen_ppl_mean_per_sample"], 2)],
        ["Dist-1", fmt_number(m["dist_1"])],
        ["Dist-2", fmt_number(m["dist_2"])],
        ["Rep-4", fmt_number(m["rep_4"])],
        ["prompts", m["num_prompts"]],
        ["mean new tokens", fmt_number(m["mean_new_tokens"], 1)],
        ["stopped at EOS", m["stopped_at_eos"]],
        ["evaluator tokens scored", m["evaluator_tokens"]],
    ]
    lines = [
        "# Text generation quality",
        "",
        f"Prompts: {m['num_prompts']} documents of `{c['data']}` [{c['split']}], first "
        f"{c['prompt_tokens']} tokens; {c['max_new_tokens']} new tokens, top-p {c['top_p']}, "
        f"temperature {c['temperature']}, seed {c['seed']}. Evaluator: "
        f"{'none' if ev is None else '`' + str(ev['spec']) + '`'}.",
        "",
        markdown_table(["metric", "value"], rows, align="lr"),
        "",
        "gen-PPL: exp(mean NLL over all continuation tokens, evaluator tokens, prompt as "
        "context). Dist-n: distinct / all n-grams of whitespace words over all generations. "
        "Rep-4: mean over generations of 1 - distinct / all 4-grams. Samples: prompt, then "
        "⟦continuation⟧.",
    ]
    for g in payload["generations"][:n_examples]:
        sample = g["prompt"] + "⟦" + g["continuation"] + "⟧"
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", sample)), default=0))
        lines += ["", f"## Sample (document {g['document']})", "", fence + "text", sample, fence]
    return "\n".join(lines)


def run_text_suite(
    model: Any,
    tokenizer: Any,
    config: TextSuiteConfig | None = None,
    out_dir: str | None = None,
    *,
    evaluator: Evaluator | None = None,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Run the text-generation suite and write ``text.json`` and ``text.md``.

    The generation-quality protocol of Shao et al. 2025 (ComplexFormer, Table 1): nucleus
    sampling from held-out prompts, scored by gen-PPL under an evaluator LM, Dist-1/2 (Li et
    al. 2016) and Rep-4 (Welleck et al. 2020, "Neural Text Generation with Unlikelihood
    Training"; Holtzman et al. 2020).

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM` (anything with ``generate``).
        tokenizer: its tokenizer (``encode``, ``decode``, ``eos_token_id``).
        config: the settings (default :class:`TextSuiteConfig`).
        out_dir: where to write the report files; None writes nothing.
        evaluator: an already loaded evaluator (else ``config.evaluator`` is loaded).
        log: called with progress messages (e.g. ``print``).

    Returns:
        The payload written to ``text.json``: ``suite``, ``config``, ``model``, ``data``,
        ``evaluator``, ``metrics`` (``gen_ppl``, ``gen_ppl_mean_per_sample``, ``dist_1``,
        ``dist_2``, ``rep_4``, ``num_prompts``, ``mean_new_tokens``, ``stopped_at_eos``,
        ``evaluator_tokens``, ``scored``, ``truncated_prompts``), ``timing`` and
        ``generations`` (per prompt: document index, prompt and continuation texts, token
        counts, its Rep-4 and evaluator NLL/PPL).

    Raises:
        ValueError: a bad config value, or no document of the split has ``prompt_tokens``
            tokens.
    """

    suite = TextSuite(config, log, evaluator=evaluator)
    return suite.run(EvalRun(model, tokenizer), out_dir)


@register_suite
class TextSuite(Suite):
    """The text-generation suite (see :func:`run_text_suite`)."""

    name = "text"
    position = 10
    description = "gen-PPL, Dist-1/2 and Rep-4 of continuations of held-out prompts"
    config_class = TextSuiteConfig
    options = (
        DATA,
        SPLIT,
        option("--num-prompts", metavar="N"),
        option("--prompt-tokens", metavar="N"),
        MAX_NEW_TOKENS,
        TOP_P,
        TEMPERATURE,
        option("--evaluator", metavar="LM"),
        SEED,
        BATCH_SIZE,
    )

    def __init__(self, config=None, log=None, *, evaluator: Evaluator | None = None) -> None:
        super().__init__(config, log)
        self.evaluator = evaluator

    def load_data(self, run) -> tuple[Any, list, list]:
        config = self.config
        corpus = load_corpus(config.data)
        documents = list(corpus.documents(config.split))
        chosen = select_prompts(
            documents, run.tokenizer, config.num_prompts, config.prompt_tokens, config.seed
        )
        if not chosen:
            raise ValueError(
                f"no document of {config.data!r} [{config.split}] has {config.prompt_tokens} "
                f"tokens ({len(documents)} documents); lower prompt_tokens or use another split"
            )
        if len(chosen) < config.num_prompts:
            self.say(
                f"text: only {len(chosen)} of {len(documents)} documents have "
                f"{config.prompt_tokens} tokens; using {len(chosen)} prompts"
            )
        return corpus, documents, chosen

    def compute(self, run, data) -> dict[str, Any]:
        config, say = self.config, self.say
        model, tokenizer = run.model, run.tokenizer
        corpus, documents, chosen = data
        prompts = [ids for _, ids in chosen]
        t0 = time.perf_counter()
        outputs = _generate(model, tokenizer, prompts, config)
        t_gen = time.perf_counter() - t0
        texts = [
            _split_text(tokenizer, p, new) for p, (new, _) in zip(prompts, outputs, strict=True)
        ]
        continuations = [c for _, c in texts]

        evaluator = self.evaluator
        ev_spec = config.evaluator
        use_ev = evaluator is not None or (ev_spec or "none").strip().lower() != "none"
        scores: dict[str, Any] | None = None
        t1 = time.perf_counter()
        if use_ev:
            if evaluator is None:
                say(f"text: loading evaluator {ev_spec}")
                evaluator = load_evaluator(str(ev_spec), device=next(model.parameters()).device)
            scores = score_continuations(
                evaluator,
                [p for p, _ in texts],
                continuations,
                batch_size=config.evaluator_batch_size,
                progress=config.progress,
            )
        t_score = time.perf_counter() - t1

        generations = []
        for k, ((doc, ids), (new, stopped), (ptext, ctext)) in enumerate(
            zip(chosen, outputs, texts, strict=True)
        ):
            s = scores["samples"][k] if scores else {}
            generations.append(
                {
                    "document": doc,
                    "prompt": ptext,
                    "continuation": ctext,
                    "prompt_tokens": len(ids),
                    "new_tokens": len(new),
                    "stopped_at_eos": stopped,
                    "words": len(ctext.split()),
                    "rep_4": sequence_repetition(ctext, 4),
                    "evaluator_tokens": s.get("tokens"),
                    "nll": s.get("nll"),
                    "ppl": s.get("ppl"),
                    "prompt_truncated": s.get("prompt_truncated"),
                }
            )
        nan = math.nan
        metrics = {
            "gen_ppl": scores["gen_ppl"] if scores else nan,
            "gen_ppl_mean_per_sample": scores["mean_sample_ppl"] if scores else nan,
            "dist_1": distinct_n(continuations, 1),
            "dist_2": distinct_n(continuations, 2),
            "rep_4": repetition_n(continuations, 4),
            "num_prompts": len(prompts),
            "mean_new_tokens": sum(len(n) for n, _ in outputs) / len(outputs),
            "stopped_at_eos": sum(s for _, s in outputs),
            "evaluator_tokens": scores["tokens"] if scores else 0,
            "scored": scores["scored"] if scores else 0,
            "truncated_prompts": scores["truncated_prompts"] if scores else 0,
        }
        self.evaluator = evaluator
        return {
            "model": model_info(model),
            "data": {"spec": corpus.spec, "split": config.split, "documents": len(documents)},
            "evaluator": evaluator.describe() if evaluator is not None else None,
            "metrics": metrics,
            "timing": {"generate_s": t_gen, "score_s": t_score},
            "generations": generations,
        }

    def markdown(self, payload: dict[str, Any]) -> str:
        return _markdown(payload)

    def summary(self, payload: dict[str, Any]) -> str:
        metrics = payload["metrics"]
        keys = ("gen_ppl", "dist_1", "dist_2", "rep_4")
        return "text: " + ", ".join(f"{k} {fmt_number(metrics[k])}" for k in keys)
