"""Datasets of the offline lm-evaluation-harness tasks, read from local JSONL files.

lm-evaluation-harness (EleutherAI) loads this file by path from the task YAML beside it
(``custom_dataset: !function local_data.ppl_documents``) and calls the function with the
task's metadata (``--metadata`` on its command line, ``metadata=`` of ``TaskManager``), so it
imports nothing from complexformer and runs wherever the YAML files are copied.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["mc_questions", "ppl_documents", "read_jsonl"]

HERE = Path(__file__).resolve().parent
PPL_SAMPLE = HERE / "ppl_sample.jsonl"
MC_QUESTIONS = HERE / "mc_questions.jsonl"


def read_jsonl(path: str | Path, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of a JSONL file, each with ``fields`` (other keys are kept).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line that is not a JSON object with the fields (its number is named).
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"task data file {p} not found")
    rows = []
    for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}:{i} is not valid JSON: {e}") from None
        missing = [f for f in fields if not isinstance(row, dict) or f not in row]
        if missing:
            raise ValueError(f"{p}:{i} lacks the field(s) {', '.join(missing)}")
        rows.append(row)
    if not rows:
        raise ValueError(f"{p} holds no rows")
    return rows


def _dataset(rows: list[dict[str, Any]]) -> Any:
    import datasets

    return datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)})


def ppl_documents(ppl_file: str | None = None, **_: Any) -> Any:
    """``{"validation": documents}`` with a ``text`` column (default: the shipped sample)."""
    rows = read_jsonl(ppl_file or PPL_SAMPLE, ("text",))
    return _dataset([{"text": str(r["text"])} for r in rows])


def mc_questions(mc_file: str | None = None, **_: Any) -> Any:
    """``{"validation": questions}`` with ``question``, ``choices`` and ``answer`` (an index)."""
    rows = read_jsonl(mc_file or MC_QUESTIONS, ("question", "choices", "answer"))
    for i, r in enumerate(rows, start=1):
        if not isinstance(r["choices"], list) or not 0 <= int(r["answer"]) < len(r["choices"]):
            raise ValueError(
                f"question {i}: answer must index choices (0 .. {len(r['choices']) - 1}), "
                f"got {r['answer']!r}"
            )
    return _dataset(
        [
            {"question": r["question"], "choices": r["choices"], "answer": int(r["answer"])}
            for r in rows
        ]
    )
