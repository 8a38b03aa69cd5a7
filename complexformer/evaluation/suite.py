"""The skeleton every evaluation suite follows: load the run -> its data -> compute -> report.

A suite is a :class:`Suite` subclass registered by name with :func:`register_suite`. It names
its config class (a :class:`~complexformer.config.ConfigBase` dataclass) and declares the
command-line options that fill it (:class:`Option`: a flag, its argparse settings and the
config field it binds), and implements :meth:`Suite.load_data`, :meth:`Suite.compute` and
:meth:`Suite.markdown`; :meth:`Suite.run` does the rest the same way for every suite (the run
loaded from a path when one is given, ``<name>.json`` and ``<name>.md`` written atomically,
extra files such as plots listed in the payload, a one-line summary logged).
``complexformer evaluate`` builds its parser from the options of the suites in :data:`SUITES`
and finds ``--suite NAME`` there; a suite of another package (the lab's ``heads``) is a
:class:`Suite` subclass named in the entry-point group :data:`SUITES_GROUP`
(:func:`load_suite_entry_points`). Options that several suites read (``--data``, ``--split``,
``--seed``, the sampling settings) are declared once here and listed by each suite.
"""

from __future__ import annotations

import argparse
import math
import os
import typing
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from ..cli.options import default_text, shared_option, value_type
from ..config import ConfigBase, field_defaults, field_docs, unknown_key_error
from ..lm import load_run
from ..results import write_report
from ..runtime import use_entry_points

__all__ = [
    "BATCH_SIZE",
    "DATA",
    "MAX_NEW_TOKENS",
    "MAX_PROBLEMS",
    "NUM_FEWSHOT",
    "PROBLEMS",
    "SEED",
    "SPLIT",
    "SUITES",
    "SUITES_GROUP",
    "TEMPERATURE",
    "TOP_P",
    "EvalRun",
    "Option",
    "Suite",
    "data_spec",
    "fmt_number",
    "get_suite",
    "load_suite_entry_points",
    "model_info",
    "register_suite",
    "shared",
]


@dataclass
class EvalRun:
    """A model to evaluate with what the suites read from a run (a
    :class:`~complexformer.lm.LoadedRun` has the same attributes)."""

    model: nn.Module
    tokenizer: Any = None
    train_config: Any = None
    run_dir: Path | None = None
    step: int | None = None


@dataclass(frozen=True)
class Option:
    """A command-line option of a suite and the config field it fills.

    What the option says comes from the field (:meth:`add_to`): its type (a list field takes
    one or more values, a bool field is a switch), its entry under the config's
    ``Attributes:`` and the default of each suite that reads it.

    Attributes:
        flag: the option, e.g. ``"--num-samples"`` (its destination is ``num_samples``).
        field: the config field the given value is stored in.
        help: what the option is where several suites read it (their fields may each say it
            in their own words); an option one suite reads says its field's entry.
        settings: the keyword arguments of ``argparse.ArgumentParser.add_argument`` that the
            field cannot give (``metavar``, ``choices``, a ``type`` that parses a list).
    """

    flag: str
    field: str
    help: str | None = None
    settings: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def bind(self, field_name: str) -> Option:
        """The same option filling another config field."""
        return replace(self, field=field_name)

    def add_to(self, group: Any, readers: dict[str, Option], configs: dict[str, type]) -> None:
        """Add the option to an argparse parser or group, for the suites that read it.

        Args:
            group: the parser or argument group.
            readers: suite name -> its option of this flag (the field may differ by suite).
            configs: suite name -> its config class.
        """
        first = next(iter(readers))
        config, name = configs[first], readers[first].field
        kind, many = value_type(typing.get_type_hints(config)[name])
        settings: dict[str, Any] = {"type": kind}
        if kind is bool:
            settings = {"action": "store_const", "const": True}
        elif many:
            settings.update(nargs="+", action="extend")
        settings.update(self.settings)
        text = self.help if len(readers) > 1 and self.help else field_docs(config)[name]
        text = text.rstrip(".")
        said = _defaults_said({s: field_defaults(configs[s])[o.field] for s, o in readers.items()})
        if said:
            text = f"{text}; {said}"
        if len(readers) > 1:
            text += f" [{', '.join(readers)}]"  # the suites that read it
        elif not said:
            text += "."
        group.add_argument(self.flag, dest=self.dest, default=None, help=text, **settings)


def _defaults_said(defaults: dict[str, Any]) -> str | None:
    """The defaults of the suites that read an option, as its help states them: ``default 8``
    where they agree, ``default val (text test)`` where most do, else each suite's."""
    said = {suite: default_text(value) for suite, value in defaults.items()}
    common, n = Counter(said.values()).most_common(1)[0]
    if n == len(said):
        return None if common is None else f"default {common}"
    if n == 1:
        common = None
    others = ", ".join(f"{s} {v}" for s, v in said.items() if v not in (common, None))
    if common is None:
        return f"default: {others}" if others else None
    return f"default {common} ({others})" if others else f"default {common}"


def option(
    flag: str, field_name: str | None = None, *, help: str | None = None, **settings: Any
) -> Option:
    """An :class:`Option` whose field defaults to the flag's destination."""
    opt = Option(flag, "", help, settings)
    return opt.bind(field_name or opt.dest)


def shared(name: str, *, help: str | None = None) -> Option:
    """The :class:`Option` of a command-line option several commands share
    (:data:`complexformer.cli.options.SHARED`), filling the field ``name``; its help is the
    shared one unless ``help`` says more."""
    flag, settings = shared_option(name, help=help)
    return Option(flag, name, settings.pop("help"), settings)


# Options that several suites read, declared once (a suite lists those it reads); the
# defaults their help states are the suites' own (Option.add_to).
DATA = option(
    "--data",
    metavar="SPEC",
    help="corpus of the prompts or blocks (none: the one the model records)",
)
SPLIT = option("--split", choices=("train", "val", "test"), help="split of the corpus")
BATCH_SIZE = option("--batch-size", metavar="N", help="sequences per forward pass")
SEED = shared("seed", help="seed of sampling and of the choices of prompts and blocks")
MAX_NEW_TOKENS = shared("max_new_tokens")
TEMPERATURE = shared("temperature")
TOP_P = shared("top_p")
PROBLEMS = option(
    "--problems",
    metavar="SET",
    help="problem set: code: humaneval (offline), mbpp or a HumanEval-format JSONL file; "
    "math: gsm8k or math (from the Hugging Face hub) or a JSONL file with question/answer",
)
MAX_PROBLEMS = option("--max-problems", metavar="N", help="use the first N problems (none: all)")
NUM_FEWSHOT = option(
    "--num-fewshot", metavar="N", help="worked examples in the prompt (none: the task's own)"
)


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
        where = getattr(run, "source", None) or getattr(run, "run_dir", None) or "the model"
        raise ValueError(
            f"{where} records no corpus (no training config) to evaluate on; set {what} "
            "(pass --data)"
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
        description: what it measures, in a few words (the command line's help).
        config_class: its config dataclass.
        options: the command-line options this suite reads, each bound to a config field
            (the shared ones of this module, and its own).
        many_runs: the suite compares several runs: ``run`` takes a list, and
            :meth:`compute` loads them one at a time with :meth:`load` (so only one model is
            in memory at once).
        lists_files: the payload lists the files written (``payload["files"]``).
        position: where the suite stands in ``--suite``'s choices and the options' help
            (lower first; ties by name).

    Args:
        config: the settings (the config class's defaults when None); validated here.
        log: called with progress messages (e.g. ``print``).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    config_class: ClassVar[type[ConfigBase]]
    options: ClassVar[tuple[Option, ...]] = ()
    many_runs: ClassVar[bool] = False
    lists_files: ClassVar[bool] = False
    position: ClassVar[int] = 100

    def __init__(
        self, config: ConfigBase | None = None, log: Callable[[str], Any] | None = None
    ) -> None:
        self.config = config if config is not None else self.config_class()
        validate = getattr(self.config, "validate", None)
        if validate is not None:
            validate()
        self.say: Callable[[str], Any] = log or (lambda _msg: None)

    @classmethod
    def config_from_args(cls, args: argparse.Namespace) -> ConfigBase:
        """The config from the parsed options this suite reads (an option not given keeps
        the config's default)."""
        kwargs = {
            opt.field: getattr(args, opt.dest)
            for opt in cls.options
            if getattr(args, opt.dest, None) is not None
        }
        return cls.config_class(**kwargs)

    def reads_corpus(self) -> bool:
        """Whether the suite scores the corpus ``--data`` names (a model that records no
        corpus then needs ``--data``)."""
        return any(opt.flag == "--data" for opt in self.options)

    # ---------------------------------------------------------------- the four stages
    def load(self, run: Any) -> Any:
        """A path is loaded with :func:`~complexformer.lm.load_run`; an artifact
        (:func:`~complexformer.artifacts.load_artifact`) gives its language model or is
        refused by kind; a loaded run is used as it is."""
        if hasattr(run, "model"):
            return run
        if hasattr(run, "require_lm"):
            return run.require_lm(f"suite {self.name}")
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
#: The entry-point group of suites that other packages add to ``complexformer evaluate``: each
#: entry point names a :class:`Suite` subclass, under the suite's ``name`` (the lab's is
#: ``heads = "complexformer_lab.evaluation.heads:HeadsSuite"``, declared in pyproject.toml).
SUITES_GROUP = "complexformer.suites"


def register_suite(cls: type[Suite]) -> type[Suite]:
    """Register a suite class under ``cls.name`` (usable as a class decorator)."""
    if cls.name in SUITES and SUITES[cls.name] is not cls:
        raise ValueError(f"evaluation suite {cls.name!r} is already registered")
    SUITES[cls.name] = cls
    return cls


def load_suite_entry_points() -> None:
    """Register every suite of :data:`SUITES_GROUP`. One that fails to load, is not a
    :class:`Suite` subclass or is named other than its suite is left out with one warning on
    stderr naming its entry point (once per process,
    :func:`~complexformer.runtime.use_entry_points`), and the other suites go on."""

    def use(ep) -> None:
        if ep.name in SUITES:
            return
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, Suite)):
            raise TypeError(f"{cls!r} is not a Suite subclass")
        if cls.name != ep.name:
            raise ValueError(f"the suite is named {cls.name!r}, not {ep.name!r}")
        register_suite(cls)

    use_entry_points(SUITES_GROUP, use)


def get_suite(name: str) -> type[Suite]:
    """The suite registered as ``name``, looked up in :data:`SUITES_GROUP` too when it is not
    registered yet; an unknown name lists the known ones."""
    if name not in SUITES:
        load_suite_entry_points()
    try:
        return SUITES[name]
    except KeyError:
        raise unknown_key_error(name, list(SUITES), "evaluation suite") from None
