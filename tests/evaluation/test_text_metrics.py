"""Dist-n and Rep-n on hand-worked examples."""

from __future__ import annotations

import math

import pytest
from torch.testing import assert_close

from complexformer.evaluation.text_metrics import (
    distinct_n,
    ngrams,
    repetition_n,
    sequence_repetition,
    words,
)

GENS = ["the cat sat on the mat", "the cat ran"]


def test_words_split_on_any_whitespace_and_keep_punctuation():
    assert words(" a\tb\n  c. ") == ["a", "b", "c."]
    assert ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]
    assert ngrams(["a"], 2) == []
    with pytest.raises(ValueError, match="n-gram order"):
        ngrams(["a"], 0)


def test_dist_1_pools_all_generations():
    # unigrams: 6 + 3 = 9; distinct: the cat sat on mat ran = 6
    assert_close(distinct_n(GENS, 1), 6 / 9)


def test_dist_2_does_not_cross_generation_boundaries():
    # bigrams: (the cat)(cat sat)(sat on)(on the)(the mat) + (the cat)(cat ran) = 7;
    # distinct 6 ("the cat" twice); no bigram (mat, the) between the two generations
    assert_close(distinct_n(GENS, 2), 6 / 7)
    # tokens can be given directly
    assert_close(distinct_n([["x", "y", "x", "y"]], 2), 2 / 3)


def test_dist_case_and_punctuation_are_kept():
    assert_close(distinct_n(["Cat cat cat."], 1), 3 / 3)


def test_rep_4_per_generation_and_mean():
    periodic = "a b c d a b c d a"  # 4-grams abcd bcda cdab dabc abcd bcda: 4 distinct of 6
    assert_close(sequence_repetition(periodic, 4), 1 - 4 / 6)
    fresh = "one two three four five"  # 2 four-grams, both distinct
    assert_close(sequence_repetition(fresh, 4), 0.0)
    assert math.isnan(sequence_repetition("too short", 4))
    # the short generation is left out of the mean: (1/3 + 0) / 2
    assert_close(repetition_n([periodic, fresh, "too short"], 4), 1 / 6)


def test_rep_of_a_constant_generation():
    # 7 words "w": 4 four-grams, all equal -> 1 - 1/4
    assert_close(repetition_n(["w w w w w w w"], 4), 3 / 4)


def test_empty_inputs_are_nan():
    assert math.isnan(distinct_n([], 1))
    assert math.isnan(distinct_n(["", "a"], 2))
    assert math.isnan(repetition_n(["a b c"], 4))
