"""The default sample prompt of a run: the start of a validation document of its corpus,
recorded in ``<run>/prompt.txt``."""

from __future__ import annotations

import os

from ..data import load_corpus
from ..data.corpus import document_start
from ..storage import atomic_write_text, is_regular_file, read_text, refuse_link
from ..training.config import TrainConfig
from ..training.rundir import PROMPT_FILE
from .run import find_run_dir

__all__ = ["run_prompt"]


def run_prompt(path: str | os.PathLike) -> str:
    """The default sample prompt of a run: the start of a validation document of its corpus.

    Read from ``<run>/prompt.txt``; the first time, it is taken from the run's corpus
    (``train_config.json``'s ``data`` and ``text_field``) with
    :func:`~complexformer.data.corpus.document_start` and recorded there.

    Args:
        path: a run directory, or a checkpoint or model directory inside one.

    Returns:
        The prompt (non-empty).

    Raises:
        FileNotFoundError: ``path`` belongs to no run directory with a ``train_config.json``
            (then a prompt must be given explicitly).
        SymlinkRefusedError: ``prompt.txt`` or ``train_config.json`` is a symbolic link (it is
            never read or written through).
    """
    run_dir = find_run_dir(path)
    if run_dir is not None:
        refuse_link(run_dir / "train_config.json")
        refuse_link(run_dir / PROMPT_FILE)
    if run_dir is None or not is_regular_file(run_dir / "train_config.json"):
        raise FileNotFoundError(
            f"{path} is not inside a run directory with a train_config.json, so it has no "
            f"default prompt; give one with --prompt or --prompt-file"
        )
    recorded = run_dir / PROMPT_FILE
    if is_regular_file(recorded):
        return read_text(recorded)
    tc = TrainConfig.load(run_dir / "train_config.json")
    prompt = document_start(
        load_corpus(tc.data, text_field=tc.text_field, hf_streaming=tc.hf_streaming)
    )
    try:
        atomic_write_text(recorded, prompt)
    except OSError:  # a read-only run directory: use the prompt without recording it
        pass
    return prompt
