"""Diversity and repetition of generated text: Dist-n and Rep-n.

Both metrics work on **whitespace words**: ``text.split()`` (Python's split on runs of
whitespace; punctuation stays attached to its word, case is kept). Words are used rather than
a model's tokens so that the numbers do not depend on which tokenizer a model was trained with,
and two models with different vocabularies stay comparable.

* Dist-n (Li et al., "A Diversity-Promoting Objective Function for Neural Conversation
  Models", NAACL 2016): over *all* generations together,
  ``Dist-n = |distinct n-grams| / |n-grams|``, where the n-grams of each generation are
  counted separately (none spans two generations) and "distinct" is taken over the union.
  Li et al. divide by the number of generated words for every n; we divide by the number of
  n-grams (the variant most implementations use), so Dist-n is a proportion in [0, 1].
* Rep-n (seq-rep-n of Welleck et al., "Neural Text Generation with Unlikelihood Training",
  ICLR 2020; used as Rep-4 by the ComplexFormer paper, which cites Holtzman et al., "The
  Curious Case of Neural Text Degeneration", ICLR 2020): for one generation
  ``rep-n = 1 - |distinct n-grams| / |n-grams|``, the share of its n-grams that repeat an
  earlier n-gram of the same generation; Rep-n is its mean over the generations that have at
  least one n-gram (fewer than n words: left out).

When no generation has an n-gram the metric is undefined and returned as NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["distinct_n", "ngrams", "repetition_n", "sequence_repetition", "words"]


def words(text: str) -> list[str]:
    """The whitespace words of ``text`` (``text.split()``), the unit of Dist-n and Rep-n."""
    return text.split()


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """All contiguous n-grams of a token sequence, in order (``len - n + 1`` of them).

    Args:
        tokens: the tokens (e.g. :func:`words` of a text).
        n: the n-gram order, >= 1.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n-gram order must be >= 1, got {n}")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _tokenize(texts: Iterable[str | Sequence[str]]) -> list[Sequence[str]]:
    return [words(t) if isinstance(t, str) else t for t in texts]


def distinct_n(texts: Iterable[str | Sequence[str]], n: int) -> float:
    """Dist-n (Li et al., "A Diversity-Promoting Objective Function for Neural Conversation
    Models", 2016): distinct n-grams over all n-grams, pooled over all generations.

    Args:
        texts: the generations; a string is split into whitespace words, a sequence of
            strings is used as its tokens.
        n: the n-gram order (1 and 2 in the paper).

    Returns:
        ``|union of the n-gram sets| / sum of the n-gram counts``, in [0, 1]; NaN when there
        is no n-gram at all.
    """
    seen: set[tuple[str, ...]] = set()
    total = 0
    for toks in _tokenize(texts):
        grams = ngrams(toks, n)
        seen.update(grams)
        total += len(grams)
    return len(seen) / total if total else math.nan


def sequence_repetition(text: str | Sequence[str], n: int = 4) -> float:
    """seq-rep-n of one generation (Welleck et al., "Neural Text Generation with Unlikelihood
    Training", 2020): ``1 - |distinct n-grams| / |n-grams|``.

    Args:
        text: one generation (a string is split into whitespace words).
        n: the n-gram order.

    Returns:
        The repeated share of its n-grams in [0, 1); NaN if it has fewer than ``n`` tokens.
    """
    toks = words(text) if isinstance(text, str) else text
    grams = ngrams(toks, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else math.nan


def repetition_n(texts: Iterable[str | Sequence[str]], n: int = 4) -> float:
    """Rep-n: the mean of :func:`sequence_repetition` over the generations that have at least
    one n-gram (Welleck et al. 2020; Rep-4 in Holtzman et al., "The Curious Case of Neural Text
    Degeneration", 2020, as used by the ComplexFormer paper).

    Args:
        texts: the generations.
        n: the n-gram order (4 in the paper).

    Returns:
        The mean repeated share in [0, 1); NaN when no generation has ``n`` tokens.
    """
    reps = [r for r in (sequence_repetition(t, n) for t in _tokenize(texts)) if not math.isnan(r)]
    return sum(reps) / len(reps) if reps else math.nan
