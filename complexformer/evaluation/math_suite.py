"""The ``math`` suite: final-answer accuracy on GSM8K, MATH or a local JSONL of problems.

Data (Cobbe et al., "Training Verifiers to Solve Math Word Problems", 2021 — GSM8K; Hendrycks
et al., "Measuring Mathematical Problem Solving With the MATH Dataset", NeurIPS 2021 — MATH),
as in the ComplexFormer paper (Shao et al. 2025, §4, Table 3: "Metric: Accuracy (final
answer)"):

* ``gsm8k``: ``datasets.load_dataset("openai/gsm8k", "main")``; the reference is the text
  after ``####`` in ``answer``.
* ``math``: ``EleutherAI/hendrycks_math`` (its seven subject configurations, concatenated),
  else ``hendrycks/competition_math``; the reference is the last ``\\boxed{...}`` of
  ``solution``.
* a local ``.jsonl`` file: one JSON object per line with ``question`` (or ``problem``) and
  ``answer`` (or ``solution``); the reference is the text after ``####`` if there is one, else
  the last ``\\boxed{...}`` if there is one, else the whole (stripped) answer.

Answers of the model: the text after ``####`` if present, else the last ``\\boxed{...}``, else
the number after "answer is", else the last number in the output (:func:`extract_answer`).

Equality (:func:`math_equal`): both sides go through :func:`normalize_answer`; when both then
parse as numbers (integers, decimals, ``a/b``, ``\\frac{a}{b}``, with a sign) they are compared
as exact rationals, so ``3/4 == \\frac{3}{4} == \\dfrac{3}{4} == 0.75`` and ``1,000 == 1000.00``
(but ``0.33 != 1/3``); otherwise the normalised strings must be identical. A missing answer
(None) is never equal to anything, not even to another missing answer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..config import ConfigBase
from ..results import markdown_table
from ..runtime import require
from .suite import (
    BATCH_SIZE,
    MAX_NEW_TOKENS,
    MAX_PROBLEMS,
    NUM_FEWSHOT,
    PROBLEMS,
    SEED,
    SPLIT,
    TEMPERATURE,
    TOP_P,
    EvalRun,
    Suite,
    model_info,
    register_suite,
)

__all__ = [
    "MATH_SUBJECTS",
    "MathSuite",
    "MathSuiteConfig",
    "extract_answer",
    "extract_boxed",
    "extract_gsm8k_answer",
    "load_math_problems",
    "math_equal",
    "normalize_answer",
    "parse_number",
    "run_math_suite",
]

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

# A number: sign, thousands groups or digits, decimals, optional "/denominator"; or ".5".
_NUMBER = re.compile(
    r"[-−]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|[-−]?\.\d+"
)
_ANSWER_IS = re.compile(r"answer\s+is\s*:?\s*\$?\s*([-−]?[\d.,/]*\d)", re.IGNORECASE)
_UNITS = {
    "dollar",
    "dollars",
    "cent",
    "cents",
    "usd",
    "mm",
    "cm",
    "m",
    "km",
    "meter",
    "meters",
    "metre",
    "metres",
    "inch",
    "inches",
    "in",
    "foot",
    "feet",
    "ft",
    "yard",
    "yards",
    "mile",
    "miles",
    "mph",
    "kmh",
    "second",
    "seconds",
    "sec",
    "secs",
    "s",
    "minute",
    "minutes",
    "min",
    "mins",
    "hour",
    "hours",
    "hr",
    "hrs",
    "h",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "g",
    "kg",
    "gram",
    "grams",
    "pound",
    "pounds",
    "lb",
    "lbs",
    "ounce",
    "ounces",
    "oz",
    "l",
    "ml",
    "liter",
    "liters",
    "litre",
    "litres",
    "gallon",
    "gallons",
    "degree",
    "degrees",
    "unit",
    "units",
    "point",
    "points",
    "percent",
    "sq",
}
_TEXT_COMMANDS = ("\\textbf", "\\textrm", "\\text", "\\mathrm", "\\mathbf", "\\mbox")


# ------------------------------------------------------------------------ extraction
def _braced(text: str, i: int) -> tuple[str, int] | None:
    """Content of the brace group opening at ``text[i] == "{"`` and the index after it."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
    return None


def extract_boxed(text: str | None) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) of a text, nested braces
    included, as in the MATH solutions (Hendrycks et al., "Measuring Mathematical Problem
    Solving With the MATH Dataset", 2021).

    Args:
        text: a solution or model output.

    Returns:
        The content (``"\\frac{1}{2}"`` for ``"\\boxed{\\frac{1}{2}}"``; ``"5"`` for
        ``"\\boxed 5"``); None if there is no box or its braces are unbalanced.
    """
    if not text:
        return None
    best, name = -1, ""
    for cmd in ("\\boxed", "\\fbox"):
        k = text.rfind(cmd)
        if k > best:
            best, name = k, cmd
    if best < 0:
        return None
    i = best + len(name)
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        found = _braced(text, i)
        return found[0].strip() if found else None
    m = re.match(r"[^\s$]+", text[i:])  # "\boxed 5$"
    return m.group(0) if m and i > best + len(name) else None


def _last_number(text: str) -> str | None:
    found = _NUMBER.findall(text)
    return found[-1] if found else None


def extract_gsm8k_answer(text: str | None) -> str | None:
    """The final answer of a GSM8K solution (Cobbe et al., "Training Verifiers to Solve Math
    Word Problems", 2021): after the last ``####`` (references end with ``#### n``), the number
    that starts the rest of the line, else that whole line; without ``####`` (free-form model
    outputs), the last number in the text.

    Args:
        text: a reference solution or a model output.

    Returns:
        The raw answer string (e.g. ``"1,000"``, ``"-3"``), or None when there is none.
    """
    if not text:
        return None
    if "####" in text:
        tail = text.split("####")[-1].strip().splitlines()
        answer = tail[0].strip() if tail else ""
        lead = _NUMBER.match(answer.lstrip("$ "))
        if lead:  # "#### 18. Question: ..." -> "18"
            return lead.group(0)
        if answer:
            return answer
        text = text.rsplit("####", 1)[0]
    return _last_number(text)


def extract_answer(text: str | None) -> str | None:
    """The final answer of a model output, whatever the dataset: the ``####`` answer, else the
    last ``\\boxed{}``, else the number after "the answer is", else the last number.

    Args:
        text: the generated solution.

    Returns:
        The raw answer string, or None when the output contains no answer.
    """
    if not text:
        return None
    if "####" in text:
        answer = extract_gsm8k_answer(text)
        if answer is not None:
            return answer
    boxed = extract_boxed(text)
    if boxed:
        return boxed
    found = _ANSWER_IS.findall(text)
    if found:
        return found[-1]
    return _last_number(text)


# ----------------------------------------------------------------------- normalisation
def _unwrap(s: str, cmd: str) -> str:
    """Replace every ``cmd{content}`` by ``content``."""
    while True:
        k = s.find(cmd + "{")
        if k < 0:
            return s
        found = _braced(s, k + len(cmd))
        if found is None:
            return s
        s = s[:k] + found[0] + s[found[1] :]


def _strip_units(s: str) -> str:
    m = re.fullmatch(
        r"(?P<num>[-+]?[\d.,/]*\d)(?P<sep>\s*)(?P<unit>[a-zA-Z][a-zA-Z .]*?)"
        r"(?:\^\{?\d\}?)?\.?",
        s,
    )
    if not m:
        return s
    first = m.group("unit").split()[0].lower() if m.group("unit").split() else ""
    return m.group("num") if (m.group("sep") or first.rstrip(".") in _UNITS) else s


def normalize_answer(answer: str | None) -> str | None:
    """Normalise a final answer for comparison (in the spirit of the MATH grader's
    ``strip_string``, Hendrycks et al. 2021).

    Removes: ``$`` and ``\\$``, ``\\left``/``\\right``, LaTeX spacing (``\\!``, ``\\,``,
    ``\\;``, ``\\:``, ``~``), degrees (``^\\circ``, ``°``), percent signs (``\\%``, ``%``),
    thousands separators (``1,000`` → ``1000``), a leading ``+``, a leading ``x =``, trailing
    periods, all whitespace, and trailing units (``5 dollars``, ``12cm``, ``3 \\text{ m}^2``).
    Unwraps ``\\boxed{}``, ``\\text{}``/``\\mathrm{}``/``\\mbox{}``; maps ``\\dfrac``/``\\tfrac``
    to ``\\frac`` and ``\\frac12`` to ``\\frac{1}{2}``, ``\\sqrt2`` to ``\\sqrt{2}``; turns the
    Unicode minus into ``-``; lower-cases answers without LaTeX commands.

    Args:
        answer: a raw answer string (or None).

    Returns:
        The normalised string, or None for None / an answer that normalises to nothing.
    """
    if answer is None:
        return None
    s = str(answer).strip()
    if "\\boxed" in s or "\\fbox" in s:
        s = extract_boxed(s) or s
    s = s.replace("\n", " ").replace("−", "-")
    s = s.replace("\\$", "").replace("$", "")
    for cmd in _TEXT_COMMANDS:
        s = _unwrap(s, cmd)
    s = s.replace("\\left", "").replace("\\right", "")
    for space in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~"):
        s = s.replace(space, " ")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s).replace("°", "")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"^[a-zA-Z]\s*=\s*", "", s)
    s = _strip_units(s.strip())
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\sqrt\s*(\w)", r"\\sqrt{\1}", s)
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if s.startswith("+"):
        s = s[1:]
    if "\\" not in s:
        s = s.lower()
    return s or None


_PLAIN = r"\d+(?:\.\d+)?|\.\d+"


def parse_number(s: str | None) -> Fraction | None:
    """The exact value of a normalised numeric answer: ``12``, ``-0.75``, ``.5``, ``3/4``,
    ``-\\frac{3}{4}``, ``\\frac{-3}{4}``; None for anything else.

    Args:
        s: a string from :func:`normalize_answer`.
    """
    if not s:
        return None
    m = re.fullmatch(rf"([-+]?)({_PLAIN})", s)
    if m:
        return Fraction(m.group(2)) * (-1 if m.group(1) == "-" else 1)
    m = re.fullmatch(
        rf"([-+]?)(?:({_PLAIN})/({_PLAIN})|\\frac\{{([-+]?(?:{_PLAIN}))\}}"
        rf"\{{([-+]?(?:{_PLAIN}))\}})",
        s,
    )
    if not m:
        return None
    num, den = (m.group(2), m.group(3)) if m.group(2) is not None else (m.group(4), m.group(5))
    if Fraction(den) == 0:
        return None
    return Fraction(num) / Fraction(den) * (-1 if m.group(1) == "-" else 1)


def math_equal(prediction: str | None, reference: str | None) -> bool:
    """Whether a predicted final answer equals the reference (see the module docstring):
    numeric comparison (exact rationals) when both normalised answers are numbers, else
    equality of the normalised strings; None on either side is never equal.

    Args:
        prediction: the extracted answer of the model (raw or normalised).
        reference: the reference answer (raw or normalised).
    """
    a, b = normalize_answer(prediction), normalize_answer(reference)
    if a is None or b is None:
        return False
    x, y = parse_number(a), parse_number(b)
    if x is not None and y is not None:
        return x == y
    return a == b


# ------------------------------------------------------------------------------ data
def _reference_of(answer: str) -> str | None:
    if "####" in answer:
        return extract_gsm8k_answer(answer)
    if "\\boxed" in answer or "\\fbox" in answer:
        return extract_boxed(answer)
    return answer.strip() or None


def _rows_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON: {e}") from None
        q = obj.get("question", obj.get("problem"))
        a = obj.get("answer", obj.get("solution"))
        if q is None or a is None:
            raise ValueError(
                f"{path}:{n}: expected fields question (or problem) and answer "
                f"(or solution), got {sorted(obj)}"
            )
        rows.append({"question": str(q), "answer": str(a)})
    return rows


def _rows_hub(data: str, split: str) -> list[dict[str, Any]]:
    datasets = require("datasets", "hf", "the gsm8k/math suites")
    if data == "gsm8k":
        ds = datasets.load_dataset("openai/gsm8k", "main", split=split)
        return [{"question": r["question"], "answer": r["answer"]} for r in ds]
    try:
        parts = [
            datasets.load_dataset("EleutherAI/hendrycks_math", s, split=split)
            for s in MATH_SUBJECTS
        ]
        rows = [r for p in parts for r in p]
    except Exception:  # noqa: BLE001 - fall back to the older single-config copy
        rows = list(datasets.load_dataset("hendrycks/competition_math", split=split))
    return [{"question": r["problem"], "answer": r["solution"]} for r in rows]


def load_math_problems(data: str, split: str = "test") -> list[dict[str, Any]]:
    """Load math problems with their reference answers.

    Args:
        data: ``"gsm8k"`` (Cobbe et al. 2021), ``"math"`` (Hendrycks et al. 2021) or the path
            of a local JSONL file (fields ``question``/``problem`` and ``answer``/``solution``).
        split: the dataset split for hub datasets (ignored for a local file).

    Returns:
        ``[{"id", "question", "answer", "reference"}]`` in dataset order; ``answer`` is the
        full reference text, ``reference`` the extracted final answer (None if none).

    Raises:
        ValueError: an unknown name that is not a file, or a malformed JSONL line.
    """
    path = Path(data).expanduser()
    if path.is_file():
        rows = _rows_jsonl(path)
    elif data in ("gsm8k", "math"):
        rows = _rows_hub(data, split)
    else:
        raise ValueError(
            f"math data {data!r}: expected 'gsm8k', 'math' or an existing .jsonl "
            "file with question/answer fields"
        )
    return [{"id": i, **r, "reference": _reference_of(r["answer"])} for i, r in enumerate(rows)]


# ----------------------------------------------------------------------------- suite
@dataclass
class MathSuiteConfig(ConfigBase):
    """Settings of the math suite.

    Attributes:
        data: ``"gsm8k"``, ``"math"`` or a local JSONL path (see :func:`load_math_problems`).
        split: dataset split (hub datasets; few-shot examples come from ``"train"``).
        max_problems: evaluate the first N problems (None: all).
        max_new_tokens: generated tokens per problem.
        temperature: 0 is greedy decoding (the default); > 0 samples (with ``top_p``).
        top_p: nucleus mass when sampling.
        prompt_template: the prompt of one problem; ``{question}`` is replaced.
        num_fewshot: worked examples put before each prompt (``template + " " + solution``):
            the first k problems of the ``train`` split for hub datasets, the first k lines of a
            local file (which are then not evaluated).
        stop: the output is cut at the first of these strings before the answer is extracted.
        seed: seed of the sampling (irrelevant for greedy decoding).
        batch_size: problems whose prompts have the same token length are generated together.
        prepend_eos: give the model ``[EOS] + prompt`` (a document start, as in training).
        progress: show a tqdm bar.
    """

    data: str = "gsm8k"
    split: str = "test"
    max_problems: int | None = None
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    prompt_template: str = "Question: {question}\nAnswer:"
    num_fewshot: int = 0
    stop: tuple[str, ...] = ("\nQuestion:", "\n\n\n")
    seed: int = 0
    batch_size: int = 8
    prepend_eos: bool = True
    progress: bool = True

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range field."""
        if self.max_problems is not None and self.max_problems < 1:
            raise ValueError(f"max_problems must be >= 1 or None, got {self.max_problems}")
        for name in ("max_new_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_fewshot < 0:
            raise ValueError(f"num_fewshot must be >= 0, got {self.num_fewshot}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if "{question}" not in self.prompt_template:
            raise ValueError("prompt_template must contain {question}")


def _shot_text(problem: dict[str, Any], template: str) -> str:
    solution = re.sub(r"<<[^<>]*>>", "", problem["answer"]).strip()  # GSM8K calculator notes
    return template.format(question=problem["question"]) + " " + solution + "\n\n"


def _cut(text: str, stops: tuple[str, ...]) -> str:
    cuts = [text.find(s) for s in stops if s and s in text]
    return text[: min(cuts)] if cuts else text


@torch.no_grad()
def _generate_all(
    model: Any, tokenizer: Any, prompts: list[list[int]], config: MathSuiteConfig
) -> list[list[int]]:
    """Generate for every prompt; prompts of equal length are batched (no padding needed)."""

    device = next(model.parameters()).device
    eos = tokenizer.eos_token_id
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    batches = [
        ix[k : k + config.batch_size]
        for _, ix in sorted(groups.items())
        for k in range(0, len(ix), config.batch_size)
    ]
    out: list[list[int]] = [[] for _ in prompts]
    bar = tqdm(total=len(prompts), desc="math: generate", disable=not config.progress)
    for b, ix in enumerate(batches):
        x = torch.tensor([prompts[i] for i in ix], dtype=torch.long, device=device)
        y = model.generate(
            x,
            config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=config.seed + b,
            eos_token_id=eos,
        )
        for i, row in zip(ix, y[:, x.shape[1] :].tolist(), strict=True):
            out[i] = row[: row.index(eos)] if eos in row else row
        bar.update(len(ix))
    bar.close()
    return out


def _markdown(payload: dict[str, Any], n_rows: int = 10) -> str:
    m, c = payload["metrics"], payload["config"]
    rows = [
        ["accuracy", f"{100 * m['accuracy']:.2f}%"],
        ["correct", m["correct"]],
        ["problems", m["total"]],
        ["no answer extracted", m["no_answer"]],
        ["truncated prompts", m["truncated_prompts"]],
    ]

    def short(s: Any, n: int = 60) -> str:
        s = "" if s is None else str(s).replace("\n", " ").replace("|", "\\|")
        return s if len(s) <= n else s[: n - 1] + "…"

    probs = [
        [
            p["id"],
            short(p["question"]),
            short(p["reference"], 20),
            short(p["prediction"], 20),
            "yes" if p["correct"] else "no",
        ]
        for p in payload["problems"][:n_rows]
    ]
    return "\n".join(
        [
            "# Math reasoning",
            "",
            f"Data `{c['data']}` [{c['split']}], {m['total']} problems, {c['num_fewshot']}-shot, "
            f"{c['max_new_tokens']} new tokens, temperature {c['temperature']}.",
            "",
            markdown_table(["metric", "value"], rows, align="lr"),
            "",
            f"## First {len(probs)} problems",
            "",
            markdown_table(["id", "question", "reference", "prediction", "correct"], probs),
        ]
    )


def run_math_suite(
    model: Any,
    tokenizer: Any,
    config: MathSuiteConfig | None = None,
    out_dir: str | None = None,
    *,
    problems: list[dict[str, Any]] | None = None,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Run the math suite (final-answer accuracy) and write ``math.json`` and ``math.md``.

    The math-reasoning protocol of Shao et al. 2025 (ComplexFormer, Table 3) on GSM8K (Cobbe
    et al. 2021) or MATH (Hendrycks et al. 2021): generate a solution per problem (greedy by
    default), extract its final answer (:func:`extract_answer`) and compare it with the
    reference (:func:`math_equal`).

    Args:
        model: a :class:`~complexformer.models.ComplexFormerLM` (anything with ``generate``).
        tokenizer: its tokenizer (``encode``, ``decode``, ``eos_token_id``).
        config: the settings (default :class:`MathSuiteConfig`).
        out_dir: where to write the report files; None writes nothing.
        problems: problems already loaded (as from :func:`load_math_problems`), instead of
            ``config.data``.
        log: called with progress messages (e.g. ``print``).

    Returns:
        The payload written to ``math.json``: ``suite``, ``config``, ``model``, ``metrics``
        (``accuracy``, ``correct``, ``total``, ``no_answer``, ``skipped_no_reference``,
        ``truncated_prompts``), ``timing`` and ``problems`` (per problem: ``id``,
        ``question``, ``reference``, ``output``, ``prediction``, ``correct``).

    Raises:
        ValueError: a bad config value or no problem with a reference answer.
    """
    suite = MathSuite(config, log, problems=problems)
    return suite.run(EvalRun(model, tokenizer), out_dir)


@register_suite
class MathSuite(Suite):
    """The math suite (see :func:`run_math_suite`)."""

    name = "math"
    position = 30
    description = "final-answer accuracy on GSM8K, MATH or a JSONL file"
    config_class = MathSuiteConfig
    options = (
        PROBLEMS.bind("data"),
        SPLIT,
        MAX_PROBLEMS,
        MAX_NEW_TOKENS,
        TEMPERATURE,
        TOP_P,
        NUM_FEWSHOT,
        SEED,
        BATCH_SIZE,
    )

    def __init__(self, config=None, log=None, *, problems: list[dict[str, Any]] | None = None):
        super().__init__(config, log)
        self.problems = problems

    def load_data(self, run) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
        """(few-shot examples, problems with a reference, problems skipped without one)."""
        config = self.config
        problems = self.problems
        if problems is None:
            problems = load_math_problems(config.data, config.split)
        shots: list[dict[str, Any]] = []
        if config.num_fewshot:
            if Path(config.data).expanduser().is_file():
                shots, problems = problems[: config.num_fewshot], problems[config.num_fewshot :]
            else:
                shots = load_math_problems(config.data, "train")[: config.num_fewshot]
        skipped = sum(p["reference"] is None for p in problems)
        problems = [p for p in problems if p["reference"] is not None]
        if config.max_problems is not None:
            problems = problems[: config.max_problems]
        if not problems:
            raise ValueError(f"math data {config.data!r}: no problem with a reference answer")
        if skipped:
            self.say(f"math: skipped {skipped} problems without an extractable reference answer")
        return shots, problems, skipped

    def compute(self, run, data) -> dict[str, Any]:
        config, model, tokenizer = self.config, run.model, run.tokenizer
        shots, problems, skipped = data
        prefix = "".join(_shot_text(s, config.prompt_template) for s in shots)
        lead = [tokenizer.eos_token_id] if config.prepend_eos else []
        limit = getattr(getattr(model, "config", None), "max_seq_len", None)
        keep = limit - config.max_new_tokens if limit else None
        prompts, truncated = [], 0
        for p in problems:
            text = prefix + config.prompt_template.format(question=p["question"])
            ids = lead + tokenizer.encode(text)
            if keep is not None and keep >= 1 and len(ids) > keep:
                ids, truncated = ids[len(ids) - keep :], truncated + 1
            prompts.append(ids)
        t0 = time.perf_counter()
        outputs = _generate_all(model, tokenizer, prompts, config)
        t_gen = time.perf_counter() - t0

        rows = []
        for p, new in zip(problems, outputs, strict=True):
            text = _cut(tokenizer.decode(new), config.stop)
            pred = extract_answer(text)
            rows.append(
                {
                    "id": p["id"],
                    "question": p["question"],
                    "reference": p["reference"],
                    "output": text,
                    "prediction": pred,
                    "correct": math_equal(pred, p["reference"]),
                }
            )
        correct = sum(r["correct"] for r in rows)
        metrics = {
            "accuracy": correct / len(rows),
            "correct": correct,
            "total": len(rows),
            "no_answer": sum(r["prediction"] is None for r in rows),
            "skipped_no_reference": skipped,
            "truncated_prompts": truncated,
        }
        return {
            "model": model_info(model),
            "metrics": metrics,
            "timing": {"generate_s": t_gen},
            "problems": rows,
        }

    def markdown(self, payload: dict[str, Any]) -> str:
        return _markdown(payload)

    def summary(self, payload: dict[str, Any]) -> str:
        m = payload["metrics"]
        return f"math: accuracy {100 * m['accuracy']:.2f}% ({m['correct']}/{m['total']})"
