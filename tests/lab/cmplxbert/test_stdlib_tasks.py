"""The offline pair and token tasks built from the standard library."""

from __future__ import annotations

import io
import tokenize

import pytest

from complexformer.cmplxbert.labelled import load_classification_task
from complexformer_lab.cmplxbert.docstrings import build_docstring_dataset
from complexformer_lab.cmplxbert.stdlib_tasks import (
    CODE_TAGS,
    _line_tags,
    build_code_tags,
    build_docstring_pairs,
)


def _tags(line: str) -> list[tuple[str, str]]:
    toks = [
        t
        for t in tokenize.generate_tokens(io.StringIO(line + "\n").readline)
        if t.type not in (tokenize.NEWLINE, tokenize.ENDMARKER)
    ]
    words, tags = _line_tags(toks)
    return list(zip(words, tags, strict=True))


def test_code_tags_follow_the_role_of_each_name():
    assert _tags("def run(self, x=1):") == [
        ("def", "KW"), ("run", "DEF"), ("(", "O"), ("self", "NAME"), (",", "O"),
        ("x", "NAME"), ("=", "O"), ("1", "NUM"), (")", "O"), (":", "O"),
    ]  # fmt: skip
    assert _tags("y = os.path.join(a, 'b')") == [
        ("y", "NAME"), ("=", "O"), ("os", "NAME"), (".", "O"), ("path", "ATTR"),
        (".", "O"), ("join", "CALL"), ("(", "O"), ("a", "NAME"), (",", "O"),
        ("'b'", "STR"), (")", "O"),
    ]  # fmt: skip
    assert _tags("class Box(Base):")[1] == ("Box", "CLASS")
    assert _tags("match = None")[0] == ("match", "KW")  # a soft keyword, by the rule


def test_the_builtin_tasks_are_deterministic_split_and_not_degenerate():
    names, splits = build_code_tags(caps=(300, 50, 50))
    assert names == list(CODE_TAGS)
    assert [len(splits[s][0]) for s in ("train", "validation", "test")] == [300, 50, 50]
    again = build_code_tags(caps=(300, 50, 50))[1]
    assert again == splits
    for words, tags in zip(*splits["train"], strict=True):
        assert 4 <= len(words) == len(tags) <= 40
        assert all(w and not any(c.isspace() for c in w) for w in words)
    seen = {t for tags in splits["train"][1] for t in tags}
    assert len(seen) >= 8  # every role occurs
    names, pairs = build_docstring_pairs()
    assert names == ["different", "same"]
    test_docs = [e.text.split() for e in build_docstring_dataset().splits["test"]]
    halves = {" ".join(w[: len(w) // 2]) for w in test_docs} | {
        " ".join(w[len(w) // 2 :]) for w in test_docs
    }
    for (first, second), same in zip(*pairs["test"], strict=True):
        assert first in halves and second in halves  # the docstring task's file split holds
        if same:
            assert " ".join([first, second]).split() in test_docs
    share = sum(pairs["train"][1]) / len(pairs["train"][1])
    assert 0.4 < share < 0.6


def test_builtin_tasks_load_by_name_with_their_type():
    task = load_classification_task("docstring-pairs", task_type="pair")
    assert task.task_type == "pair" and task.num_labels == 2
    with pytest.raises(ValueError, match="'code-tags' is a token task, not 'sequence'"):
        load_classification_task("code-tags")
