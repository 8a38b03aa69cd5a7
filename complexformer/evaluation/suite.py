"""The skeleton every evaluation suite follows: load the run -> its data -> compute -> report.

A suite is a :class:`Suite` subclass registered by name with :func:`register_suite`. It names
its config class (a :class:`~complexformer._config.ConfigBase` dataclass) and the command-line
options that fill it, and implements :meth:`Suite.load_data`, :meth:`Suite.compute` and
:meth:`Suite.markdown`; :meth:`Suite.run` does the rest the same way for every suite (the run
loaded from a path when one is given, ``<name>.json`` and ``<name>.md`` written atomically,
extra files such as plots listed in the payload, a one-line summary logged).
``complexformer evaluate --suite NAME`` finds the suite in :data:`SUITES`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from .._config import ConfigBase, unknown_key_error
from .._report import write_report
from ..training import load_run

__all__ = [
    "SUITES",
    "EvalRun",
    "Suite",
    "data_spec",
    "fmt_number",
    "get_suite",
    "model_info",
    "register_suite",
]


@dataclass
class EvalRun:
    """A model to evaluate with what the suites read from a run (a
    :class:`~complexformer.training.LoadedRun` has the same attributes)."""

    model: nn.Module
    tokenizer: Any = None
    train_config: Any = None
    run_dir: Path | None = None
    step: int | None = None


def model_info(model: nn.Module) -> dict[str, Any]:
    """``pos_scheme``, ``max_seq_len`` and the parameter count, for a report."""
    cfg = getattr(model, "config", None)
    return {
        "pos_scheme": getattr(cfg, "pos_scheme", None),
        "max_seq_len": getattr(cfg, "max_seq_len", None),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def data_spec(configured: str | None, run: Any, what: str) -> str:
    """The corpus to evaluate on: the configured spec, else the run's training corpus.

    Raises:
        ValueError: neither is known (``what`` names the config field to set).
    """
    if configured is not None:
        return configured
    train_config = getattr(run, "train_config", None)
    if train_config is None:
        where = getattr(run, "run_dir", None) or "the model"
        raise ValueError(
            f"{where} has no training config to take the data spec from; set {what} (--data)"
        )
    return train_config.data


def fmt_number(x: float | None, digits: int = 4, style: str = "f", missing: str = "n/a") -> str:
    """``x`` with ``digits`` digits (``style`` ``"f"`` or ``"g"``); None and NaN as ``missing``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    return f"{x:.{digits}{style}}"


class Suite:
    """Load the run -> its data -> compute -> report.

    Class attributes:
        name: the suite's name (``--suite NAME``, ``NAME.json``, ``NAME.md``).
        config_class: its config dataclass.
        options: command-line destination -> config field, for the options this suite reads.
        many_runs: the suite compares several runs: ``run`` takes a list, and
            :meth:`compute` loads them one at a time with :meth:`load` (so only one model is
            in memory at once).
        lists_files: the payload lists the files written (``payload["files"]``).

    Args:
        config: the settings (the config class's defaults when None); validated here.
        log: called with progress messages (e.g. ``print``).
    """

    name: ClassVar[str]
    config_class: ClassVar[type[ConfigBase]]
    options: ClassVar[dict[str, str]] = {}
    many_runs: ClassVar[bool] = False
    lists_files: ClassVar[bool] = False

    def __init__(
        self, config: ConfigBase | None = None, log: Callable[[str], Any] | None = None
    ) -> None:
        self.config = config if config is not None else self.config_class()
        validate = getattr(self.config, "validate", None)
        if validate is not None:
            validate()
        self.say: Callable[[str], Any] = log or (lambda _msg: None)

    # ---------------------------------------------------------------- the four stages
    def load(self, run: Any) -> Any:
        """A path is loaded with :func:`~complexformer.training.load_run`; else ``run``."""
        if hasattr(run, "model"):
            return run
        return load_run(run, device=getattr(self.config, "device", "cpu"))

    def load_data(self, run: Any) -> Any:
        """The data the suite scores (None when :meth:`compute` needs none)."""
        return None

    def compute(self, run: Any, data: Any) -> dict[str, Any]:
        """The payload (without ``suite`` and ``config``, which :meth:`run` adds first)."""
        raise NotImplementedError

    def write_files(self, payload: dict[str, Any], out: Path) -> dict[str, str]:
        """Extra files (plots, arrays) into ``out``; returns name -> path."""
        return {}

    def markdown(self, payload: dict[str, Any]) -> str:
        """The markdown report."""
        raise NotImplementedError

    def summary(self, payload: dict[str, Any]) -> str | None:
        """A one-line summary to log, or None."""
        return None

    # ----------------------------------------------------------------------- the whole
    def run(self, run: Any, out_dir: str | os.PathLike | None = None) -> dict[str, Any]:
        """Run the suite on ``run`` (a path, a loaded run, or a list of them when
        :attr:`many_runs`) and write ``<name>.json`` / ``<name>.md`` into ``out_dir``."""
        if not self.many_runs:
            run = self.load(run)
        data = self.load_data(run)
        body = self.compute(run, data)
        payload: dict[str, Any] = {"suite": self.name, "config": asdict(self.config), **body}
        if self.lists_files:
            payload["files"] = {}
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            files = self.write_files(payload, out)
            if self.lists_files:
                payload["files"] = {
                    **files,
                    "json": str(out / f"{self.name}.json"),
                    "markdown": str(out / f"{self.name}.md"),
                }
            write_report(out, self.name, payload, self.markdown(payload))
        line = self.summary(payload)
        if line:
            self.say(line)
        return payload


SUITES: dict[str, type[Suite]] = {}


def register_suite(cls: type[Suite]) -> type[Suite]:
    """Register a suite class under ``cls.name`` (usable as a class decorator)."""
    if cls.name in SUITES and SUITES[cls.name] is not cls:
        raise ValueError(f"evaluation suite {cls.name!r} is already registered")
    SUITES[cls.name] = cls
    return cls


def get_suite(name: str) -> type[Suite]:
    """The suite registered as ``name``; an unknown name lists the known ones."""
    try:
        return SUITES[name]
    except KeyError:
        raise unknown_key_error(name, list(SUITES), "evaluation suite") from None
