"""Math answers: extraction, normalisation, equality, and the math suite end to end."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import torch
from torch.testing import assert_close

from complexformer.evaluation.math_suite import (
    MathSuiteConfig,
    extract_answer,
    extract_boxed,
    extract_gsm8k_answer,
    load_math_problems,
    math_equal,
    normalize_answer,
    parse_number,
    run_math_suite,
)


# ------------------------------------------------------------------------ extraction
def test_gsm8k_reference_and_free_form_outputs():
    ref = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nShe sold 48+24 = 72.\n#### 1,000"
    assert extract_gsm8k_answer(ref) == "1,000"
    assert extract_gsm8k_answer("#### -3\n\nQuestion: next") == "-3"
    assert extract_gsm8k_answer("#### $18. Question: next") == "18"
    assert extract_gsm8k_answer("#### \\frac{1}{2}") == "\\frac{1}{2}"
    # no ####: the last number, sign and decimals kept, trailing period dropped
    assert extract_gsm8k_answer("He had 5 apples, lost 12 and owes -7.5.") == "-7.5"
    assert extract_gsm8k_answer("It costs $1,250 in total") == "1,250"
    assert extract_gsm8k_answer("Half of it: 3/4") == "3/4"
    assert extract_gsm8k_answer("no digits at all") is None
    assert extract_gsm8k_answer("") is None and extract_gsm8k_answer(None) is None
    # "####" with nothing after it falls back to the last number before it
    assert extract_gsm8k_answer("so 42\n####") == "42"


def test_boxed_with_nested_braces():
    assert extract_boxed(r"so $\boxed{\frac{1}{2}}$.") == r"\frac{1}{2}"
    assert extract_boxed(r"\boxed{1} then \boxed{\sqrt{\frac{a}{b}}}") == r"\sqrt{\frac{a}{b}}"
    assert extract_boxed(r"\fbox{7}") == "7"
    assert extract_boxed(r"$\boxed 5$") == "5"
    assert extract_boxed(r"\boxed{\frac{1}{2}") is None  # unbalanced
    assert extract_boxed("nothing boxed") is None


def test_extract_answer_priority():
    assert extract_answer(r"3 + 4 = 7 #### 7 \boxed{9}") == "7"
    assert extract_answer(r"We get 3 and \boxed{\dfrac{3}{4}} at last 10") == r"\dfrac{3}{4}"
    assert extract_answer("so the answer is $18. Then 20 more") == "18"
    assert extract_answer("3 apples and 4 pears make 7.") == "7"
    assert extract_answer("I do not know.") is None


# --------------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("1,000", "1000"),
        ("1,000,000", "1000000"),
        ("−5", "-5"),
        ("+5", "5"),
        ("$5.00", "5.00"),
        ("\\$18", "18"),
        ("18 dollars", "18"),
        ("12cm", "12"),
        ("3\\text{ cm}^2", "3"),
        ("50\\%", "50"),
        ("90^\\circ", "90"),
        ("x = 3", "3"),
        ("\\dfrac{3}{4}", "\\frac{3}{4}"),
        ("\\frac12", "\\frac{1}{2}"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\sqrt2", "\\sqrt{2}"),
        ("4\\!\\,000", "4000"),
        ("Yes.", "yes"),
        ("   ", None),
        (None, None),
    ],
)
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_parse_number_exact_values():
    assert parse_number("0.75") == Fraction(3, 4)
    assert parse_number("-3/4") == Fraction(-3, 4)
    assert parse_number("\\frac{3}{4}") == Fraction(3, 4)
    assert parse_number("-\\frac{3}{4}") == Fraction(-3, 4)
    assert parse_number("\\frac{-3}{4}") == Fraction(-3, 4)
    assert parse_number(".5") == Fraction(1, 2)
    assert parse_number("1/0") is None
    assert parse_number("\\sqrt{2}") is None and parse_number("x") is None


@pytest.mark.parametrize(
    ("pred", "ref", "equal"),
    [
        ("3/4", "\\frac{3}{4}", True),
        ("\\dfrac{3}{4}", "\\frac{3}{4}", True),
        ("0.75", "\\frac{3}{4}", True),
        ("0.33", "\\frac{1}{3}", False),  # exact rationals, no tolerance
        ("1000", "1,000", True),
        ("$5.00", "5", True),
        ("5 dollars", "5", True),
        ("-5", "5", False),
        ("−5", "-5", True),
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("\\sqrt{2}", "\\sqrt2", True),
        ("(1,2)", "\\left(1, 2\\right)", True),
        ("x+1", "x+2", False),
        (None, "5", False),
        ("5", None, False),
        (None, None, False),  # a missing answer is never correct
        ("", "", False),
    ],
)
def test_math_equal(pred, ref, equal):
    assert math_equal(pred, ref) is equal


# ----------------------------------------------------------------------------- suite
PROBLEMS = [
    {"question": "What is 2 + 3?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"},
    {"question": "What is half of one?", "answer": "It is $\\boxed{\\frac{1}{2}}$."},
    {"problem": "How many grams in a kilogram?", "solution": "1,000"},
]


@pytest.fixture()
def jsonl(tmp_path):
    path = tmp_path / "math.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PROBLEMS) + "\n", encoding="utf-8")
    return path


def test_load_local_jsonl(jsonl, tmp_path):
    probs = load_math_problems(str(jsonl))
    assert [p["reference"] for p in probs] == ["5", "\\frac{1}{2}", "1,000"]
    assert probs[2]["question"] == "How many grams in a kilogram?"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q": 1}\n')
    with pytest.raises(ValueError, match="question"):
        load_math_problems(str(bad))
    with pytest.raises(ValueError, match="gsm8k"):
        load_math_problems("no-such-dataset")


@pytest.fixture(scope="module")
def run(tiny_run):
    from complexformer.lm import load_run

    return load_run(tiny_run)


def test_math_suite_on_the_tiny_model(run, jsonl, tmp_path):
    cfg = MathSuiteConfig(data=str(jsonl), max_new_tokens=8, batch_size=2, progress=False)
    res = run_math_suite(run.model, run.tokenizer, cfg, tmp_path)
    m, rows = res["metrics"], res["problems"]
    assert m["total"] == len(rows) == 3
    assert 0.0 <= m["accuracy"] <= 1.0
    assert_close(m["accuracy"], sum(r["correct"] for r in rows) / 3)
    for r in rows:
        assert r["correct"] == math_equal(r["prediction"], r["reference"])
        assert r["prediction"] == extract_answer(r["output"])
    on_disk = json.loads((tmp_path / "math.json").read_text())
    assert on_disk["metrics"] == m and on_disk["config"]["max_new_tokens"] == 8
    assert "accuracy" in (tmp_path / "math.md").read_text()
    again = run_math_suite(run.model, run.tokenizer, cfg)  # greedy: deterministic
    assert [r["output"] for r in again["problems"]] == [r["output"] for r in rows]


class ScriptedLM(torch.nn.Module):
    """Answers each question with a fixed text: checks the pipeline around generation."""

    def __init__(self, tokenizer, answers: dict[str, str]):
        super().__init__()
        self.tok, self.answers = tokenizer, answers
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def generate(self, x, max_new_tokens, **_):
        rows = []
        for ids in x.tolist():
            prompt = self.tok.decode(ids)
            q = max(self.answers, key=prompt.rfind)  # the question asked last
            new = self.tok.encode(self.answers[q])[:max_new_tokens]
            rows.append(ids + new + [self.tok.eos_token_id] * (max_new_tokens - len(new)))
        return torch.tensor(rows)


def test_math_suite_scores_hand_checked_answers(run, jsonl, tmp_path):
    answers = {
        "2 + 3": " 2 plus 3 is 5.\n#### 5\nQuestion: what next?",  # correct; cut at stop
        "half": " Half is $\\boxed{\\dfrac{1}{2}}$",  # correct: \dfrac == \frac
        "kilogram": " I do not know.",  # no answer: wrong
    }
    model = ScriptedLM(run.tokenizer, answers)
    cfg = MathSuiteConfig(data=str(jsonl), max_new_tokens=40, progress=False)
    res = run_math_suite(model, run.tokenizer, cfg, tmp_path)
    rows = res["problems"]
    assert [r["prediction"] for r in rows] == ["5", "\\dfrac{1}{2}", None]
    assert [r["correct"] for r in rows] == [True, True, False]
    assert "Question:" not in rows[0]["output"]
    assert_close(res["metrics"]["accuracy"], 2 / 3)
    assert res["metrics"]["no_answer"] == 1 and res["metrics"]["correct"] == 2

    # one-shot: the first line becomes the worked example and is not evaluated
    shot = run_math_suite(
        model,
        run.tokenizer,
        MathSuiteConfig(data=str(jsonl), max_new_tokens=40, num_fewshot=1, progress=False),
    )
    assert [r["id"] for r in shot["problems"]] == [1, 2]
    assert_close(shot["metrics"]["accuracy"], 1 / 2)


def test_math_config_is_checked():
    with pytest.raises(ValueError, match="question"):
        MathSuiteConfig(prompt_template="Q:").validate()
    with pytest.raises(ValueError, match="max_problems"):
        MathSuiteConfig(max_problems=0).validate()
