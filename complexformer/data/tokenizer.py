"""A small uniform tokenizer wrapper over ``tokenizers`` BPE and ``transformers`` tokenizers.

:class:`Tokenizer` exposes ``encode``, ``encode_batch``, ``decode``, ``vocab_size``,
``eos_token_id``, ``save(dir)`` and ``Tokenizer.load(dir)``, so a training run directory can
keep its tokenizer and generation later needs only that directory.

Two backends:

* ``"bpe"``: a :class:`tokenizers.Tokenizer` (the byte-level BPE of :mod:`.bpe`). Literal
  occurrences of the EOS string (``<|endoftext|>``) inside a text are encoded as ordinary
  bytes, never as the EOS id, so EOS only ever comes from document packing; ``decode`` keeps
  special tokens, so ``decode(encode(s)) == s`` for any string.
* ``"hf"``: any Hugging Face tokenizer loaded with
  ``transformers.AutoTokenizer.from_pretrained(dir_or_name)`` (``transformers`` is optional).
  Texts are encoded without added special tokens (no BOS/CLS). Always load such a tokenizer
  from a directory or hub name: in transformers 5.x ``GPT2TokenizerFast(vocab_file=...,
  merges_file=...)`` silently builds an empty tokenizer.

On disk a saved tokenizer is a directory holding ``complexformer_tokenizer.json`` (backend
kind and EOS token; written first, it marks the directory as the package's), the backend's
own files and ``manifest.json`` (the sha256 of every file, written last). :meth:`Tokenizer.load`
checks a directory with the marker against its manifest: a missing manifest, a changed file
or a tokenizer file the manifest does not list is an error that names it, unless
``verify=False``. A directory without the marker (a Hugging Face tokenizer, a bare
``tokenizer.json``) loads unchecked, as written by another tool.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as _TkTokenizer

from ..runtime import require
from ..storage import (
    MANIFEST,
    NO_VERIFY_HINT,
    TOKENIZER_FILES,
    require_local_or_hub,
    verify_manifest,
    write_manifest,
)
from .cache import atomic_write, hash_strings

__all__ = ["EOT_TOKEN", "META_FILE", "Tokenizer", "import_transformers", "load_tokenizer"]

EOT_TOKEN = "<|endoftext|>"
META_FILE = "complexformer_tokenizer.json"
_BPE_FILE = "tokenizer.json"
_KINDS = ("bpe", "hf")


def import_transformers() -> Any:
    """Import the optional ``transformers`` package (ImportError with the install command)."""
    return require("transformers", "hf", "Hugging Face tokenizers")


class Tokenizer:
    """Uniform tokenizer: ``encode``/``decode``, ``vocab_size``, ``eos_token_id``, save/load.

    Build one with :meth:`from_tokenizers`, :meth:`from_pretrained` or :meth:`load` rather than
    calling the constructor.

    Args:
        backend: a ``tokenizers.Tokenizer`` (kind ``"bpe"``) or a ``transformers`` tokenizer
            (kind ``"hf"``).
        kind: ``"bpe"`` or ``"hf"``.
        eos_token: the end-of-text token string; it must be in the vocabulary.

    Raises:
        ValueError: an unknown kind, or an EOS token missing from the vocabulary.
    """

    def __init__(self, backend: Any, kind: str, eos_token: str) -> None:
        if kind not in _KINDS:
            raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {_KINDS}")
        self.backend, self.kind, self.eos_token = backend, kind, eos_token
        if kind == "bpe":
            # Literal "<|endoftext|>" in a text is encoded as bytes, not as EOS.
            backend.encode_special_tokens = True
            eos_id = backend.token_to_id(eos_token)
        else:
            eos_id = backend.convert_tokens_to_ids(eos_token)
            if eos_id is not None and eos_id == getattr(backend, "unk_token_id", None):
                eos_id = None
        if eos_id is None:
            raise ValueError(f"EOS token {eos_token!r} is not in the tokenizer's vocabulary")
        self._eos_id = int(eos_id)
        self._fingerprint: str | None = None

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_tokenizers(cls, tokenizer: Any, eos_token: str = EOT_TOKEN) -> Tokenizer:
        """Wrap a ``tokenizers.Tokenizer`` (e.g. a trained byte-level BPE).

        Args:
            tokenizer: the ``tokenizers.Tokenizer``.
            eos_token: its end-of-text token.
        """
        return cls(tokenizer, "bpe", eos_token)

    @classmethod
    def from_pretrained(
        cls, name_or_dir: str | os.PathLike[str], eos_token: str | None = None, **kwargs: Any
    ) -> Tokenizer:
        """Load a Hugging Face tokenizer with ``transformers.AutoTokenizer.from_pretrained``.

        Args:
            name_or_dir: a local directory or a hub name (e.g. ``"gpt2"``).
            eos_token: the EOS token to use; default the tokenizer's own ``eos_token``, or,
                for an encoder's tokenizer without one (BERT's WordPiece), its ``sep_token``
                (``[SEP]``, which BERT puts at the end of a segment; the CmplxBERT MLM packs
                its documents with it). If it is not in the vocabulary it is added as a special
                token.
            **kwargs: passed to ``AutoTokenizer.from_pretrained``.

        Raises:
            ImportError: ``transformers`` is not installed.
            ValueError: the tokenizer has neither an EOS nor a SEP token and none was given.
        """
        transformers = import_transformers()
        tok = transformers.AutoTokenizer.from_pretrained(str(name_or_dir), **kwargs)
        if eos_token is None:
            eos_token = tok.eos_token if tok.eos_token is not None else tok.sep_token
            if eos_token is None:
                raise ValueError(
                    f"tokenizer {str(name_or_dir)!r} defines no eos_token (nor a sep_token); "
                    "pass eos_token=..."
                )
        elif eos_token not in tok.get_vocab():
            tok.add_special_tokens({"eos_token": eos_token})
        return cls(tok, "hf", str(eos_token))

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, verify: bool = True) -> Tokenizer:
        """Load a tokenizer saved with :meth:`save`.

        A directory with ``complexformer_tokenizer.json`` or a ``manifest.json`` is checked
        against its manifest first (see the module's docstring). A directory with neither is
        accepted unchecked, as another tool wrote it: with a ``tokenizer_config.json`` it is
        loaded through ``transformers``, else a bare ``tokenizer.json`` is loaded as BPE with
        EOS ``<|endoftext|>``.

        Args:
            directory: the tokenizer directory.
            verify: check the files against the manifest (False: load them unchecked).

        Raises:
            FileNotFoundError: the directory does not exist or holds no tokenizer.
            ManifestError: (``verify``) the package's tokenizer without a manifest, a file
                that does not match it or that it does not list (the file is named).
            ValueError: a damaged ``complexformer_tokenizer.json``.
        """
        d = Path(directory)
        if not d.is_dir():
            raise FileNotFoundError(f"tokenizer directory {str(d)!r} does not exist")
        meta_path = d / META_FILE
        if verify and (meta_path.is_file() or (d / MANIFEST).is_file()):
            verify_manifest(d, covers=TOKENIZER_FILES)
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValueError(
                    f"{meta_path} is corrupted (not valid JSON: {e}); {NO_VERIFY_HINT}"
                ) from None
            if not isinstance(meta, dict):
                raise ValueError(f"{meta_path} is corrupted (not a JSON object)")
            kind, eos = meta.get("kind"), meta.get("eos_token", EOT_TOKEN)
        elif (d / "tokenizer_config.json").is_file():
            kind, eos = "hf", None
        elif (d / _BPE_FILE).is_file():
            kind, eos = "bpe", EOT_TOKEN
        else:
            raise FileNotFoundError(
                f"no tokenizer in {str(d)!r}: expected {META_FILE}, tokenizer_config.json or "
                f"{_BPE_FILE}"
            )
        if kind == "bpe":
            return cls.from_tokenizers(_TkTokenizer.from_file(str(d / _BPE_FILE)), eos)
        if kind == "hf":
            return cls.from_pretrained(d, eos_token=eos)
        raise ValueError(f"{meta_path}: unknown tokenizer kind {kind!r}; expected {_KINDS}")

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Save to a directory (created if needed) loadable with :meth:`load`.

        The marker ``complexformer_tokenizer.json`` is written first and ``manifest.json``
        (every file of the directory) last, each file atomically: a save cut short leaves a
        directory that :meth:`load` refuses, never one it reads half-written. Give it a
        directory of its own (callers build it in :func:`~complexformer.storage.atomic_dir`,
        so that the previous tokenizer stays complete until the new one replaces it).

        Args:
            directory: the target directory.

        Returns:
            The directory path.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = {"format": 1, "kind": self.kind, "eos_token": self.eos_token}
        with atomic_write(d / META_FILE, "w") as f:
            json.dump(meta, f, indent=2)
        if self.kind == "bpe":
            with atomic_write(d / _BPE_FILE, "w") as f:
                f.write(self.backend.to_str())
        else:
            self.backend.save_pretrained(str(d))
        files = [
            p.name
            for p in d.iterdir()
            if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
        ]
        write_manifest(d, files, kind="tokenizer")
        return d

    # -- API ------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of token ids, special tokens included (ids are in ``[0, vocab_size)``)."""
        if self.kind == "bpe":
            return int(self.backend.get_vocab_size(with_added_tokens=True))
        return len(self.backend)

    @property
    def eos_token_id(self) -> int:
        """Id of the end-of-text token appended after every document."""
        return self._eos_id

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without any added special token.

        Args:
            text: the text.

        Returns:
            The ids.
        """
        if self.kind == "bpe":
            return self.backend.encode(text, add_special_tokens=False).ids
        return list(self.backend.encode(text, add_special_tokens=False))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of several texts at once (parallel in the Rust backend).

        Args:
            texts: the texts.

        Returns:
            One id list per text.
        """
        texts = list(texts)
        if not texts:
            return []
        if self.kind == "bpe":
            fn = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
            return [e.ids for e in fn(texts, add_special_tokens=False)]
        return [list(ids) for ids in self.backend(texts, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids; special tokens (EOS) are kept as their strings.

        Args:
            ids: token ids (a list, or anything with ``tolist()`` such as a tensor).

        Returns:
            The decoded text.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        ids = [int(i) for i in ids]
        if self.kind == "bpe":
            return self.backend.decode(ids, skip_special_tokens=False)
        return self.backend.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    @property
    def fingerprint(self) -> str:
        """A hex digest of the full tokenizer definition (vocabulary, merges, EOS)."""
        if self._fingerprint is None:
            if self.kind == "bpe":
                definition = self.backend.to_str()
            elif getattr(self.backend, "backend_tokenizer", None) is not None:
                # Truncation and padding are settings of a call, not of the tokenizer:
                # transformers resets them whenever it encodes (texts are encoded without
                # either), so they are left out and the digest is the same before and after.
                rust = _TkTokenizer.from_str(self.backend.backend_tokenizer.to_str())
                rust.no_truncation()
                rust.no_padding()
                definition = rust.to_str()
            else:
                vocab = sorted(self.backend.get_vocab().items(), key=lambda kv: kv[1])
                definition = type(self.backend).__name__ + json.dumps(vocab)
            digest = hashlib.blake2b(definition.encode("utf-8"), digest_size=16).hexdigest()
            self._fingerprint = hash_strings(self.kind, self.eos_token, digest)
        return self._fingerprint

    def __repr__(self) -> str:
        return (
            f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size}, "
            f"eos={self.eos_token!r}:{self.eos_token_id})"
        )


def load_tokenizer(name_or_dir: str | os.PathLike[str]) -> Tokenizer:
    """Load a tokenizer from a directory saved by :meth:`Tokenizer.save` or from ``transformers``.

    Args:
        name_or_dir: a directory (with ``complexformer_tokenizer.json``, a Hugging Face
            tokenizer directory, or a bare ``tokenizer.json``) or a Hugging Face hub name.

    Returns:
        The tokenizer.

    Raises:
        ImportError: a hub name or HF directory without ``transformers`` installed.
        FileNotFoundError: a local path (``./x``, ``/x``, ``~/x``) that does not exist.
    """
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return Tokenizer.load(path)
    require_local_or_hub(name_or_dir, "tokenizer")
    return Tokenizer.from_pretrained(str(name_or_dir))
