"""What a loaded artifact can do: generate, score a corpus, describe itself, export."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data import load_corpus, load_token_splits
from ..data.splits import CHUNK_CHARS
from ..lm import run_prompt
from ..models.report import format_parameter_report, parameter_report
from ..results import jsonable
from ..retrofit.evaluate import retrofit_generate, retrofit_perplexity, run_data_spec
from ..training import evaluate_perplexity

__all__ = ["Artifact", "complete_text"]

#: What each kind is, in words, for messages that refuse it.
DESCRIPTIONS = {
    "lm-run": "a ComplexFormer run",
    "lm-checkpoint": "a ComplexFormer checkpoint",
    "lm-model": "a ComplexFormer final model",
    "export": "a transformers export of a ComplexFormer model",
    "retrofit": "a retrofit adaptation (CMHA on a pre-trained Hugging Face model)",
    "cmplxbert": "a CmplxBERT directory (a complex BERT: masked LM or classifier)",
    "cmplxbert-hf": (
        "a CmplxBERT saved by transformers' save_pretrained (a Trainer checkpoint or a saved "
        "model; load it with complexformer.hf's AutoModelFor... classes)"
    ),
    "cmplxbert-export": (
        "a CmplxBERT export for transformers (load it with AutoModelFor...from_pretrained(DIR, "
        "trust_remote_code=True))"
    ),
}
#: Kinds that hold a ComplexFormer language model (a :class:`LoadedRun` in ``run``).
LM_KINDS = ("lm-run", "lm-checkpoint", "lm-model", "export")


def complete_text(
    model,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    use_cache: bool = True,
) -> str:
    """The prompt and its continuation by a ComplexFormer LM (end-of-text tokens dropped)."""
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("the prompt encodes to no tokens; give a non-empty prompt")
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    out = model.generate(
        x,
        max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=use_cache,
    )
    new = [t for t in out[0, len(ids) :].tolist() if t != tokenizer.eos_token_id]
    return prompt + tokenizer.decode(new)


@dataclass
class Artifact:
    """A loaded artifact (see :func:`~complexformer.artifacts.load_artifact`).

    Attributes:
        kind: a key of :data:`~complexformer.artifacts.KINDS`.
        path: the folder it was read from.
        run: the language model, its tokenizer and metadata (the LM kinds and exports).
        retrofit: ``(model, tokenizer, RetrofitConfig)`` of a retrofit.
        cmplxbert: ``(model, tokenizer, meta)`` of a CmplxBERT directory.
    """

    kind: str
    path: Path
    run: Any = None
    retrofit: tuple[Any, Any, Any] | None = None
    cmplxbert: tuple[Any, Any, dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def description(self) -> str:
        return f"{self.path} is {DESCRIPTIONS[self.kind]}"

    def refuse(self, purpose: str) -> ValueError:
        """The error for a command this kind cannot serve."""
        return ValueError(f"{purpose}; {self.description}")

    def require_lm(self, purpose: str):
        """The ComplexFormer LM run, or a ValueError naming this kind."""
        if self.run is None:
            raise self.refuse(f"{purpose} needs a ComplexFormer language model")
        return self.run

    @property
    def is_causal_lm(self) -> bool:
        return self.run is not None or self.retrofit is not None

    @property
    def default_data(self) -> str | None:
        """The corpus the artifact records (its training data), or None."""
        if self.run is not None:
            tc = self.run.train_config
            return tc.data if tc is not None else None
        if self.retrofit is not None:
            return run_data_spec(self.path)
        return None

    @property
    def eval_dir(self) -> Path:
        """Where evaluation results go by default: ``<run>/eval``, else ``<path>/eval``."""
        if self.run is not None and self.run.run_dir is not None:
            return Path(self.run.run_dir) / "eval"
        return self.path / "eval"

    # ------------------------------------------------------------------ generation
    def default_prompt(self) -> str:
        """The run's recorded prompt (a ComplexFormer run), else a ValueError."""
        if self.run is not None and self.run.run_dir is not None:
            return run_prompt(self.path)
        raise ValueError(f"{self.description} and records no prompt; pass --prompt")

    def complete(
        self,
        prompt: str,
        max_new_tokens: int = 200,
        temperature: float = 0.8,
        top_p: float = 0.95,
        top_k: int = 0,
        seed: int | None = None,
        use_cache: bool = True,
    ) -> str:
        """The prompt and a sampled continuation (temperature 0: greedy)."""
        if self.run is not None:
            return complete_text(
                self.run.model, self.run.tokenizer, prompt, max_new_tokens, temperature,
                top_p, top_k, seed, use_cache,
            )  # fmt: skip
        if self.retrofit is not None:
            return retrofit_generate(
                self.path, prompt, max_new_tokens, temperature, top_p, top_k, seed,
                use_cache=use_cache, loaded=self.retrofit,
            )  # fmt: skip
        raise self.refuse("generation needs a causal language model")

    # ------------------------------------------------------------------ perplexity
    def perplexity(
        self,
        data: str | None = None,
        split: str = "val",
        batch_size: int | None = None,
        max_blocks: int | None = None,
        log=print,
    ) -> dict[str, Any]:
        """Loss and perplexity on a corpus split.

        Args:
            data: corpus spec; default the one the artifact records (an export records
                none: then ``data`` is required).
            split: ``train``, ``val`` or ``test``.
            batch_size: blocks per forward pass (default 8, a retrofit 4).
            max_blocks: score only the first this many blocks.
            log: message sink.

        Returns:
            ``{"split", "data", "loss", "ppl", "tokens", ...}``.
        """
        if not self.is_causal_lm:
            raise self.refuse("perplexity needs a causal language model")
        spec = data or self.default_data
        if spec is None:
            raise ValueError(f"{self.description} and records no corpus; pass --data")
        if self.retrofit is not None:
            return retrofit_perplexity(
                self.path, spec, split, batch_size or 4, max_blocks, loaded=self.retrofit, log=log
            )
        model, tokenizer = self.run.model, self.run.tokenizer
        corpus = load_corpus(spec, log=log)
        tokens = load_token_splits(corpus, tokenizer, splits=(split,), log=log)[split]
        if len(tokens) == 0:
            raise ValueError(
                f"the {split} split of {spec!r} holds no text: a corpus of few documents is "
                f"cut into chunks of {CHUNK_CHARS // 1024} KiB and needs at least three of "
                "them for train, validation and test; evaluate another --split or use a "
                "larger corpus"
            )
        res = evaluate_perplexity(
            model,
            tokens,
            model.config.max_seq_len - 1,
            batch_size or 8,
            max_blocks=max_blocks,
            device=next(model.parameters()).device,
        )
        return {"split": split, "data": spec, **res}

    # ------------------------------------------------------------------ description
    def info(self) -> dict[str, Any]:
        """Kind, configuration, parameter counts and metadata, as JSON-ready values."""
        out: dict[str, Any] = {"kind": self.kind, "path": str(self.path)}
        if self.run is not None:
            model = self.run.model
            out.update(
                config=model.config.to_dict(),
                parameters=parameter_report(model),
                meta=jsonable(self.run.metadata()),
            )
        elif self.extra:  # a CmplxBERT in transformers' format, described from its files
            out.update(self.extra)
        elif self.retrofit is not None:
            model, _, cfg = self.retrofit
            total = sum(p.numel() for p in model.parameters())
            trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
            out.update(
                config=cfg.to_dict(),
                parameters={"total": total, "adaptation": trainable},
                meta={"base": cfg.base, "data": self.default_data},
            )
        else:
            model, _, meta = self.cmplxbert
            seen: dict[int, Any] = {id(p): p for p in model.parameters()}
            real = sum(p.numel() * (2 if p.is_complex() else 1) for p in seen.values())
            trainable = sum(
                p.numel() * (2 if p.is_complex() else 1) for p in seen.values() if p.requires_grad
            )
            out.update(
                config={k: v for k, v in meta.items() if k not in ("format",)},
                parameters={"total_real": real, "trainable_real": trainable},
                meta={"base": meta.get("base"), "task": meta.get("task")},
            )
        return out

    def describe(self) -> str:
        """A human-readable :meth:`info` (what ``complexformer info`` prints)."""
        info = self.info()
        lines = [f"{self.kind}: {self.path.resolve()}"]
        for key, value in info["meta"].items():
            if isinstance(value, (int, float, str)):
                lines.append(f"{key}: {value}")
        lines.append("\nconfig:")
        for key, value in info["config"].items():
            lines.append(f"  {key:<16}{json.dumps(value) if isinstance(value, dict) else value}")
        if self.run is not None:
            model, tok = self.run.model, self.run.tokenizer
            cfg = model.config
            if tok is not None:
                lines.append(f"\ntokenizer: vocab {tok.vocab_size}, eos id {tok.eos_token_id}")
            lines.append("\n" + format_parameter_report(model))
            per = model.scheme.describe_adaptation(cfg.n_head, cfg.head_dim)
            if per is not None:  # a scheme with learned adaptation (cmha, cmha_shared)
                lines.append(f"adaptation: delta and b per layer ({per}) x {cfg.n_layer} layers")
                for i, block in enumerate(model.blocks):
                    d, b = (p.detach() for p in model.scheme.adaptation(block.attn))
                    lines.append(
                        f"  layer {i}: |delta| mean {d.abs().mean():.4f} max "
                        f"{d.abs().max():.4f}; b mean {b.mean():+.4f} std {b.std():.4f}"
                    )
        else:
            lines.append("\nparameters:")
            lines += [f"  {k:<16}{v:,}" for k, v in info["parameters"].items()]
        return "\n".join(lines)
