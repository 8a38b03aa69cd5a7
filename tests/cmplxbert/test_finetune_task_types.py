"""Fine-tuning beyond single texts: sentence pairs and token tagging (the task types of the
UINAUIL benchmark in Tamburini 2024), from local JSONL / CSV files, with their metrics:
entity F1 against seqeval and the alignment of word tags to sub-words (the three model kinds
end to end: tests/lab/cmplxbert/test_finetune_comparison.py)."""

from __future__ import annotations

import csv
import json
import random

import pytest

from complexformer.cmplxbert.labelled import load_classification_task
from complexformer.cmplxbert.metrics import bio_entities, entity_f1, token_metrics
from tests.cmplxbert.lora_testlib import save_tiny_bert_dir

pytest.importorskip("transformers")


WORDS = "the cat sat on a mat in paris with anna and bob near rome today".split()
ENTITIES = {"paris": "LOC", "rome": "LOC", "anna": "PER", "bob": "PER"}


def _sentence(rng: random.Random) -> tuple[list[str], list[str]]:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
    tags, prev = [], None
    for w in words:
        kind = ENTITIES.get(w)
        tags.append("O" if kind is None else ("I-" if prev == kind else "B-") + kind)
        prev = kind
    return words, tags


def _bio_jsonl(path, n: int = 120):
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            words, tags = _sentence(rng)
            f.write(json.dumps({"tokens": words, "tags": tags}) + "\n")
    return path


def _pairs_csv(path, n: int = 120):
    """The label says whether the second text names anna: only a model that reads the pair
    can learn it."""
    rng = random.Random(1)
    others = [w for w in WORDS if w != "anna"]
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "text_pair", "label"])
        for i in range(n):
            a = " ".join(rng.choice(WORDS) for _ in range(6))
            b = [rng.choice(others) for _ in range(6)]
            if i % 2 == 0:
                b[rng.randrange(6)] = "anna"
            w.writerow([a, " ".join(b), "anna" if i % 2 == 0 else "none"])
    return path


def test_entity_f1_equals_seqeval():
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = random.Random(5)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    true = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(50)]
    pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in true]
    assert entity_f1(true, pred) == pytest.approx(seqeval.f1_score(true, pred), abs=1e-12)
    assert bio_entities(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == {
        ("PER", 0, 2),
        ("PER", 2, 3),
        ("LOC", 4, 5),
    }
    names = ["B-X", "I-X", "O"]
    m = token_metrics([[0, 1, 2]], [[0, 2, 2]], names)
    assert m["accuracy"] == pytest.approx(2 / 3) and m["entity_f1"] == 0.0
    assert "entity_f1" not in token_metrics([[0, 1]], [[0, 1]], ["NOUN", "VERB"])


def test_token_and_pair_files_load_with_their_fields(tmp_path):
    tok = load_classification_task(
        str(_bio_jsonl(tmp_path / "ner.jsonl")), "tokens", "tags", "token"
    )
    assert tok.task_type == "token" and tok.labels == ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]
    words, tags = tok.splits["train"][0][0], tok.splits["train"][1][0]
    assert len(words) == len(tags) and all(isinstance(t, int) for t in tags)
    pair = load_classification_task(str(_pairs_csv(tmp_path / "p.csv")), task_type="pair")
    assert pair.labels == ["anna", "none"] and len(pair.splits["test"][0][0]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"tokens": ["a", "b"], "tags": ["O"]}) + "\n")
    with pytest.raises(ValueError, match="2 words and 1 tags"):
        load_classification_task(str(bad), "tokens", "tags", "token")
    with pytest.raises(ValueError, match="lacks the field 'text_pair'"):
        load_classification_task(str(_bio_jsonl(tmp_path / "x.jsonl")), "tokens", "tags", "pair")
    with pytest.raises(ValueError, match="task_type 'words'"):
        load_classification_task("docstrings", task_type="words")


def test_word_tags_go_to_the_first_sub_word(tmp_path):
    from transformers import AutoTokenizer

    from complexformer.cmplxbert.finetune import _word_labels

    tok = AutoTokenizer.from_pretrained(str(save_tiny_bert_dir(tmp_path / "bert")))
    enc = tok([["tokenization", "in", "paris"]], is_split_into_words=True)
    pieces = tok.convert_ids_to_tokens(enc["input_ids"][0])
    labels = _word_labels(enc, 0, [3, 0, 1])
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and len(pieces) > 5  # sub-words
    firsts = [i for i, p in enumerate(pieces) if labels[i] != -100]
    assert [labels[i] for i in firsts] == [3, 0, 1]
    assert all(not pieces[i].startswith("##") for i in firsts)
    assert sum(x != -100 for x in labels) == 3
