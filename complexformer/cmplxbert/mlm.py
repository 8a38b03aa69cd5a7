"""Continued masked-language-model pre-training of a complexified BERT (Tamburini 2024, sec. 4:
"CmplxBERTLoRA_r" models are pre-trained further with MLM after complexification).

:func:`mask_tokens` is BERT's masking (Devlin et al. 2019, "BERT: Pre-training of Deep
Bidirectional Transformers for Language Understanding", sec. 3.1): 15% of the non-special
tokens are selected; of those 80% become ``[MASK]``, 10% a random token, 10% stay. :class:`MLMTask`
plugs it into the shared training loop (:func:`complexformer.training.train_task`), which
brings checkpoints, exact resume, progress, metrics and torchrun.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from complexformer.data import EvalBlocks, Tokenizer, load_corpus, load_token_splits
from complexformer.data.prepared import PreparedCorpus
from complexformer.runtime import require
from complexformer.storage import atomic_write_text
from complexformer.training.data_start import data_cache_dir, prepare_on_rank0
from complexformer.training.dist import all_reduce_sum
from complexformer.training.task import StepLoss, TrainTask

from .complexify import complexify
from .config import CmplxBertConfig, ComplexLoRAConfig
from .io import trainable_parameter_counts
from .loading import load_hf_bert, resolve_base, save_cmplxbert

__all__ = ["MLMTask", "mask_tokens", "masking_generator"]

_IGNORE = -100


def masking_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU generator seeded from ``(seed, *keys)`` (e.g. step, rank, micro-batch), so the
    masks of an update do not depend on anything but its position: exact resume."""
    mixed = int(seed)
    for k in keys:
        mixed = (mixed * 1_000_003 + int(k) + 1) % (2**63 - 1)
    g = torch.Generator()
    g.manual_seed(mixed)
    return g


def mask_tokens(
    input_ids: Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    generator: torch.Generator | None = None,
    mlm_probability: float = 0.15,
    mask_ratio: float = 0.8,
    random_ratio: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """BERT masking (Devlin et al. 2019, sec. 3.1 and appendix C.2).

    Each non-special position is selected with probability ``mlm_probability``; a selected
    position becomes ``[MASK]`` with probability ``mask_ratio``, a uniformly random token
    id in ``[0, vocab_size)`` with probability ``random_ratio``, and keeps its token otherwise.
    Labels are the original ids at selected positions and -100 elsewhere.

    Args:
        input_ids: (B, T) int64 (on CPU; move the results to the device afterwards).
        mask_token_id: id of ``[MASK]``.
        vocab_size: size of the vocabulary.
        special_ids: ids never selected (``[CLS]``, ``[SEP]``, ``[PAD]``, ...).
        generator: the random source (see :func:`masking_generator`).
        mlm_probability: selection rate (0.15).
        mask_ratio: share of selected positions replaced by ``[MASK]`` (0.8).
        random_ratio: share replaced by a random token (0.1); the rest are unchanged.

    Returns:
        ``(masked_ids, labels)``, both (B, T) int64.
    """
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}")
    if mask_ratio < 0 or random_ratio < 0 or mask_ratio + random_ratio > 1:
        raise ValueError(
            f"mask_ratio and random_ratio must be >= 0 with sum <= 1, got "
            f"{mask_ratio} and {random_ratio}"
        )
    ids = input_ids.clone()
    labels = input_ids.clone()
    special = torch.zeros_like(ids, dtype=torch.bool)
    for s in special_ids:
        special |= ids == int(s)
    u = torch.rand(ids.shape, generator=generator)
    selected = (u < mlm_probability) & ~special
    labels[~selected] = _IGNORE
    v = torch.rand(ids.shape, generator=generator)
    to_mask = selected & (v < mask_ratio)
    to_random = selected & (v >= mask_ratio) & (v < mask_ratio + random_ratio)
    ids[to_mask] = int(mask_token_id)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    ids[to_random] = random_ids[to_random]
    return ids, labels


class MLMTask(TrainTask):
    """Continued MLM pre-training of ``complexify(base, lora_config, model_config)`` on a
    corpus.

    Training sequences are ``[CLS] + block + [SEP]`` for blocks of ``max_len - 2`` consecutive
    tokens of the packed corpus (documents separated by ``[SEP]``; a corpus prepared with the
    base's tokenizer, ``prepared:DIR``, is read as it is, and rank 0 alone tokenizes under
    torchrun, :mod:`complexformer.training.data_start`), masked by
    :func:`mask_tokens` with a generator seeded by (seed, step, rank, micro-batch); in a
    sharded run (``TrainConfig.shard``) the masks are drawn for the whole global micro-batch
    with the generator of rank 0 and each rank keeps its rows, so with ``grad_accum=1`` they
    are the single process's masks whatever the number of ranks.
    Validation masks each rank's blocks with a generator seeded by (seed, rank), so every
    evaluation of a run scores the same masked positions; the reported ``ppl`` is
    ``exp(mean NLL of the masked tokens)``.

    Args:
        base: the real BERT (hub name, local directory, or ``minilm``).
        lora_config: the adapters.
        model_config: the complex model (default :class:`CmplxBertConfig`;
            ``add_mlm_head`` is decided here: a base without MLM head weights gets a new
            head, trained).
        max_len: sequence length in tokens, [CLS] and [SEP] included (<= the model's
            ``max_position_embeddings``).
        mlm_probability: BERT's 0.15.
        base_lr_ratio: the parameters of a new MLM head (a base without one) train at the
            run's lr, every other trainable parameter (adapters, complex biases, LayerNorms,
            the head's adapters) at lr × this (1: one rate, the paper's; see
            docs/cmplxbert.md, "Adapter growth").
    """

    aux_name = None
    #: the encoder calls ``layer.planar`` on its layers, not their ``forward``
    shard_forward_methods = ("planar",)

    def __init__(
        self,
        base: str,
        lora_config: ComplexLoRAConfig,
        model_config: CmplxBertConfig | None = None,
        max_len: int = 128,
        mlm_probability: float = 0.15,
        base_lr_ratio: float = 1.0,
    ) -> None:
        if max_len < 4:
            raise ValueError(f"max_len must be >= 4, got {max_len}")
        self.base = base
        self.base_path = resolve_base(base)
        self.lora_config = lora_config
        self.model_config = CmplxBertConfig() if model_config is None else model_config
        self.max_len = int(max_len)
        self.mlm_probability = float(mlm_probability)
        if not 0 < base_lr_ratio <= 1:
            raise ValueError(f"base_lr_ratio must be in (0, 1], got {base_lr_ratio}")
        self.base_lr_ratio = float(base_lr_ratio)
        self.tokenizer: Tokenizer | None = None
        self.seed = 0
        self.rank = 0
        self.mask_world = 1

    # -- data ------------------------------------------------------------------------------
    def prepare(self, tc, out, resume, dist, log) -> None:
        main = dist.is_main
        mlog = log if main else None
        self.seed, self.rank = tc.seed, dist.rank
        self.mask_world = dist.world_size if tc.shard else 1

        cache_dir = data_cache_dir(tc.cache_dir, out, dist)
        tok = _bert_tokenizer(self.base_path)  # every rank: the base's own files
        hf = tok.backend
        for name in ("cls_token_id", "sep_token_id", "mask_token_id"):
            if getattr(hf, name, None) is None:
                raise ValueError(
                    f"the tokenizer of {self.base!r} has no {name[:-3]}; MLM "
                    "pre-training needs [CLS], [SEP] and [MASK]"
                )

        def load():
            corpus = load_corpus(
                tc.data, text_field=tc.text_field, hf_streaming=tc.hf_streaming, log=mlog
            )
            splits = load_token_splits(
                corpus, tok, ("train", "val"), cache_dir=cache_dir, show_progress=main, log=mlog
            )
            return tok, splits, corpus if isinstance(corpus, PreparedCorpus) else None

        # Rank 0 tokenizes while the others wait on a file in the run folder, not in a
        # collective that could time out (training/data_start.py).
        _, splits = prepare_on_rank0(load, out, dist, tc.data_timeout, tokenizer=tok)
        self.tokenizer = tok
        self.train_tokens, self.val_tokens = splits["train"], splits["val"]
        self.special_ids = sorted({int(i) for i in hf.all_special_ids})

    @property
    def seq_tokens(self) -> int:
        return self.max_len - 2

    def _wrap(self, blocks: Tensor) -> Tensor:
        hf = self.tokenizer.backend
        n = blocks.shape[0]
        cls = torch.full((n, 1), hf.cls_token_id, dtype=torch.long)
        sep = torch.full((n, 1), hf.sep_token_id, dtype=torch.long)
        return torch.cat([cls, blocks.long().cpu(), sep], dim=1)  # (n, max_len)

    def _mask(self, ids: Tensor, g: torch.Generator) -> tuple[Tensor, Tensor]:
        hf = self.tokenizer.backend
        return mask_tokens(
            ids,
            mask_token_id=hf.mask_token_id,
            vocab_size=len(hf),
            special_ids=self.special_ids,
            generator=g,
            mlm_probability=self.mlm_probability,
        )

    # -- model -----------------------------------------------------------------------------
    def config_dict(self) -> dict[str, Any]:
        return {
            "kind": "cmplxbert-mlm",
            "base": self.base,
            "max_len": self.max_len,
            "mlm_probability": self.mlm_probability,
            # both configs under "lora", as runs have recorded them (so runs resume)
            "lora": {**self.lora_config.to_dict(), **self.model_config.to_dict()},
        }

    def build_model(self) -> nn.Module:
        hf, new_head = load_hf_bert(self.base_path, "mlm")
        limit = hf.config.max_position_embeddings
        if self.max_len > limit:
            raise ValueError(
                f"max_len {self.max_len} exceeds the base model's max_position_embeddings {limit}"
            )
        self.new_head = new_head
        model_config = self.model_config.replace(add_mlm_head=new_head)
        return complexify(hf, self.lora_config, model_config).train()

    def lr_scale(self, name: str) -> float:
        """1 for the real weights of a new MLM head (they start random), ``base_lr_ratio``
        for everything else that trains."""
        fresh = getattr(self, "new_head", False) and name.startswith("cls.predictions.")
        return 1.0 if fresh and ".base_layer." in name else self.base_lr_ratio

    def describe(self, model) -> str:
        t, a = trainable_parameter_counts(model)
        head = "new MLM head (trained)" if self.new_head else "pre-trained MLM head"
        c = model.model_config
        return (
            f"model: {model.name} from {self.base} ({head}); attention_score="
            f"{c.attention_score}, head_output={c.head_output}, whiten={c.whiten}\n"
            f"trainable params: {t:,} || all params: {a:,} || trainable%: "
            f"{100.0 * t / max(a, 1):.4f}"
        )

    def write_run_files(self, out: Path, fresh: bool) -> None:
        atomic_write_text(out / "config.json", json.dumps(self.config_dict(), indent=2) + "\n")

    # -- loss and evaluation ---------------------------------------------------------------
    def step_loss(self, model, batch, step, micro) -> StepLoss:
        ids = self._wrap(batch)
        device = batch.device
        if self.mask_world > 1:
            return self._global_step_loss(model, ids, step, micro, device)
        ids, labels = self._mask(ids, masking_generator(self.seed, step, self.rank, micro))
        out = model(ids.to(device), labels=labels.to(device), return_logits=False)
        return StepLoss(out.loss, out.loss)

    def _global_step_loss(self, model, ids: Tensor, step: int, micro: int, device) -> StepLoss:
        """The sharded run's loss: masks drawn for the global micro-batch (this rank keeps its
        rows) and the rank's summed NLL divided by the global count of masked tokens (times
        the world size, as the ranks' losses and gradients are averaged), so that the
        average over ranks is the single process's mean over every masked token."""
        n = ids.shape[0]
        full = ids.new_zeros((n * self.mask_world, ids.shape[1]))
        rows = slice(self.rank * n, (self.rank + 1) * n)
        full[rows] = ids
        full, labels = self._mask(full, masking_generator(self.seed, step, 0, micro))
        ids, labels = full[rows], labels[rows]  # the other rows' tokens are not known here,
        local = int((labels != _IGNORE).sum())  # so the count of masked ones is summed
        total = int(all_reduce_sum(torch.tensor([local], dtype=torch.float64))[0])
        out = model(ids.to(device), labels=labels.to(device), return_logits=False)
        # a rank without masked tokens has a NaN mean (0 / 0) and contributes nothing
        mean = out.loss if local else out.loss.nan_to_num(0.0)
        loss = mean * (self.mask_world * local / total) if total else mean
        return StepLoss(loss, loss)

    def n_val_blocks(self, max_blocks) -> int:
        return EvalBlocks(self.val_tokens, self.seq_tokens - 1, 1, max_blocks=max_blocks).n_blocks

    @torch.no_grad()
    def evaluate(self, model, batch_size, device, bf16, rank, world_size, max_blocks):
        blocks = EvalBlocks(
            self.val_tokens,
            self.seq_tokens - 1,
            batch_size,
            max_blocks=max_blocks,
            rank=rank,
            world_size=world_size,
        )
        if blocks.n_blocks == 0:
            return None
        return mlm_loss(
            model,
            blocks,
            self._wrap,
            self._mask,
            masking_generator(self.seed, 0x5EED, rank),
            device,
        )

    def set_validation_texts(self, texts: list[str]) -> int:
        """Score validation on these documents (packed, each followed by [SEP]) instead of
        the corpus's own validation split; returns their number of tokens."""
        eos = self.tokenizer.eos_token_id
        ids = [i for t in texts for i in [*self.tokenizer.encode(t), eos]]
        self.val_tokens = np.asarray(ids, dtype=np.int64)
        return len(ids)

    def evaluate_unigram(self, batch_size: int, max_blocks: int | None = None) -> dict[str, Any]:
        """The context-free baseline: every masked token predicted by the add-one smoothed
        unigram distribution of the training tokens, on the same validation blocks and
        masked positions as :meth:`evaluate` (one process)."""
        v = len(self.tokenizer.backend)
        counts = np.bincount(np.asarray(self.train_tokens, dtype=np.int64), minlength=v)[:v]
        logp = torch.from_numpy(np.log((counts + 1.0) / (counts.sum() + v)))
        blocks = EvalBlocks(self.val_tokens, self.seq_tokens - 1, batch_size, max_blocks=max_blocks)
        g = masking_generator(self.seed, 0x5EED, 0)
        nll, n = 0.0, 0
        for b in blocks:
            _, labels = self._mask(self._wrap(b), g)
            keep = labels != _IGNORE
            nll -= float(logp[labels[keep]].sum())
            n += int(keep.sum())
        mean = nll / max(n, 1)
        return {"loss": mean, "ppl": math.exp(min(mean, 700.0)), "tokens": n}

    def save_final(self, model, directory: Path) -> None:
        save_cmplxbert(
            model, directory, self.base, self.tokenizer.backend, extra={"max_len": self.max_len}
        )


def mlm_loss(
    model: nn.Module,
    batches,
    wrap: Callable[[Tensor], Tensor],
    mask: Callable[[Tensor, torch.Generator], tuple[Tensor, Tensor]],
    generator: torch.Generator,
    device,
) -> dict[str, Any]:
    """Mean NLL of the masked tokens over ``batches`` (all-reduced under DDP)."""
    was = model.training
    model.eval()
    nll = torch.zeros((), dtype=torch.float64, device=device)
    count = torch.zeros((), dtype=torch.float64, device=device)
    try:
        for b in batches:
            ids, labels = mask(wrap(b), generator)
            logits = model(ids.to(device)).logits  # (n, T, V)
            labels = labels.to(device)
            nll += nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(),
                labels.reshape(-1),
                ignore_index=_IGNORE,
                reduction="sum",
            ).double()
            count += (labels != _IGNORE).sum()
    finally:
        model.train(was)
    tot = all_reduce_sum(torch.stack([nll, count]))
    n = int(round(float(tot[1])))
    mean = float(tot[0]) / max(n, 1)
    return {"loss": mean, "ppl": math.exp(min(mean, 700.0)), "tokens": n}


def _bert_tokenizer(path: str) -> Tokenizer:
    """The base's Hugging Face tokenizer, with ``[SEP]`` (its sep_token) as the separator
    appended after every document of the packed corpus."""
    transformers = require("transformers", "hf", "MLM pre-training")
    kw = {"local_files_only": True} if Path(path).exists() else {}
    hf = transformers.AutoTokenizer.from_pretrained(path, **kw)
    hf.model_max_length = 10**9  # documents are packed then cut into blocks: no length warning
    if hf.sep_token is None:
        raise ValueError(
            f"the tokenizer of {path!r} has no sep_token; MLM pre-training needs "
            "[CLS], [SEP] and [MASK]"
        )
    return Tokenizer(hf, "hf", hf.sep_token)
