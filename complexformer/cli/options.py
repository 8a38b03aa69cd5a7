"""The command line's one vocabulary: shared options, one list convention and ``--set``.

Every subcommand builds its parser from these helpers, so that one setting has one flag
everywhere: ``--model`` is an artifact to read, ``--base`` a model to convert or start from,
``--seeds`` the list of seeds to run, ``--seq-len`` the tokens per sequence, ``--rank`` the
adapters' rank, ``--preset`` a named model configuration and ``--recipe`` a named set of
training defaults. Lists are written with spaces (``--seeds 0 1 2``; repeating the flag
appends). ``tests/cli/test_options.py`` walks every parser against :data:`VOCABULARY`.

The module lives beside the command (:mod:`complexformer.cli`) on a low layer of its own
(docs/architecture.md): each part's ``cli.py`` builds its subcommand's parser from it.
"""

from __future__ import annotations

import argparse
import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from ..config import (
    ConfigBase,
    field_defaults,
    field_docs,
    parse_overrides,
    read_toml,
    unknown_key_error,
)

__all__ = [
    "FIELD_FLAGS",
    "VOCABULARY",
    "add_base",
    "add_device",
    "add_fields",
    "add_json",
    "add_out",
    "add_overwrite",
    "SHARED",
    "add_prompt",
    "add_shared",
    "shared_option",
    "add_sampling",
    "add_model",
    "add_run_dir",
    "add_seeds",
    "add_set",
    "add_shard",
    "add_threads",
    "add_verify",
    "build_configs",
    "config_choice",
    "config_file_values",
    "default_text",
    "float_list",
    "int_list",
    "route_overrides",
    "route_values",
    "value_type",
]

#: The one meaning of each flag; a flag outside this table, or two flags with one meaning,
#: fails ``tests/cli/test_options.py``.
VOCABULARY: dict[str, str] = {
    # what to read and where to write
    "--model": "an artifact to read: LM run, checkpoint or final model, export, retrofit run or "
    "adaptation, CmplxBERT directory (several where the command compares them)",
    "--base": "a model to convert or start from: a Hugging Face name, a local directory, "
    "a GGUF file, minilm, smollm2, or a ComplexFormer run for continued training",
    "--out": "the folder to write (a run, a results folder or an export)",
    "--data": "a corpus: stdlib, shakespeare, text:GLOB, hf:NAME[:CONFIG], prepared:DIR",
    "--task": "a labelled task: a built-in name, a file, a folder or hf:NAME[:CONFIG]",
    "--tokenizer": "a tokenizer directory or Hugging Face name",
    "--split": "which split of the corpus: train, val or test",
    "--resume": "continue the run in --out from its newest good checkpoint",
    "--overwrite": "start afresh in an existing run folder",
    "--json": "print JSON",
    "--no-verify": "read an artifact the package wrote without checking its manifest",
    "--input": "a JSONL file of records to process",
    "--output": "a JSONL file to write",
    "--quiet": "no progress bar",
    "--no-save-models": "keep results only, not the fine-tuned models",
    # model and recipe
    "--preset": "a named model configuration (models.config.PRESETS)",
    "--recipe": "a named set of training and model defaults: library or paper",
    "--set": "override any field of the command's configs, KEY=VALUE (repeatable)",
    "--config": "a TOML file of field values of the command's configs",
    "--seq-len": "tokens per sequence (training examples, blocks or truncation)",
    "--rank": "rank of the adapters (complex LoRA, or the real LoRA control)",
    "--alpha": "LoRA scale numerator (scale = alpha / rank)",
    "--lora-dropout": "dropout on the adapters' input",
    "--lora-init": "which LoRA factor starts at zero",
    "--target-modules": "module-name suffixes to adapt, or one regular expression",
    "--attention-score": "CmplxBERT attention score: modulus or real part",
    "--head-output": "CmplxBERT head output: modulus or real part",
    "--whiten": "CmplxBERT complex LayerNorm whitening",
    "--heads": "CmplxBERT heads: BERT's blocks or one adapted linear",
    "--start": "CmplxBERT initial complex biases: keep or paper",
    "--start-offset": "C of the keep start",
    "--activation": "CmplxBERT GELU on complex values: gated or split",
    "--pooling": "sentence vector of a classifier: auto, cls or mean",
    "--scheme": "positional scheme of the converted attention",
    "--gqa": "retrofit: delta per KV head or per query head",
    "--train": "retrofit: which parameters train",
    # optimisation
    "--max-steps": "optimizer updates",
    "--epochs": "fine-tuning epochs",
    "--batch-size": "sequences or examples per update (global)",
    "--grad-accum": "micro-batches per update",
    "--lr": "peak learning rate",
    "--base-lr-ratio": "learning rate of everything but a new head, as a share of --lr",
    "--warmup-frac": "share of the updates in linear warm-up",
    "--min-lr-ratio": "floor of the decay as a share of --lr",
    "--weight-decay": "AdamW weight decay",
    "--eval-every": "validate every N updates",
    "--eval-blocks": "validation blocks per evaluation (cap)",
    "--save-every": "checkpoint every N updates",
    "--log-every": "a metrics row every N updates",
    "--vocab-size": "vocabulary of a BPE trained on the corpus",
    # seeds and runtime
    "--seed": "the seed of one run",
    "--seeds": "the list of seeds to run, one run each",
    "--device": "auto, cpu or cuda",
    "--threads": "CPU threads for torch",
    "--bf16": "bf16 compute (autocast; phases stay float32)",
    "--compile": "torch.compile the model",
    "--shard": "under torchrun, shard parameters, gradients and optimizer state over the ranks "
    "(FSDP2) instead of replicating them (DDP)",
    "--tensorboard": "also log to TensorBoard",
    "--dry-run": "print the plan and stop",
    # sampling
    "--prompt": "prompt text",
    "--prompt-file": "a file whose content is the prompt",
    "--max-new-tokens": "tokens to add",
    "--sample-tokens": "tokens to sample at the end of training",
    "--temperature": "softmax temperature (0: greedy)",
    "--top-p": "nucleus sampling mass",
    "--top-k": "keep the k most likely tokens (0: all)",
    "--num-samples": "samples per prompt",
    "--no-cache": "recompute instead of using the KV cache",
    # reproduce
    "--table": "the paper's tables to reproduce",
    "--scale": "a reproduction scale: a model preset with its data, budget and evaluation",
    "--evaluator": "the model that scores generated text (gen-PPL)",
    "--code-problems": "code benchmarks of the fine-tuning tables",
    "--math-problems": "math benchmarks of the fine-tuning tables",
    "--only": "restrict training and evaluation to these runs",
    "--train-only": "train, do not evaluate or tabulate",
    # CmplxBERT
    "--n": "how many items the command samples (sentences, components)",
    "--models": "which models to fine-tune side by side",
    "--text-field": "the text column of the data",
    "--pair-field": "the second text's column of sentence-pair data",
    "--label-field": "the label column of the data",
    "--task-type": "sequence, pair or token classification",
    "--max-train-examples": "train on a fixed random subset of N examples",
    "--max-eval-examples": "validate and test on fixed random subsets of N examples",
    "--real-lora-rank": "rank of the real LoRA baseline (default: match the trainable count)",
    "--every": "MLM updates between the points of a study",
    "--ft-epochs": "fine-tuning epochs of a study's points",
    "--ft-lr": "fine-tuning learning rate of a study's points",
    "--ft-base-lr-ratio": "fine-tuning learning-rate ratio of a study's points",
    "--ft-batch-size": "fine-tuning batch of a study's points",
    "--ft-seq-len": "fine-tuning tokens per example of a study's points",
    # evaluation
    "--suite": "the evaluation suites to run",
    "--problems": "the problem set of the code or math suite: a benchmark name or a JSONL file",
    "--max-problems": "use the first N problems",
    "--num-prompts": "held-out prompts whose continuations are scored",
    "--prompt-tokens": "prompt length in model tokens",
    "--k": "the ks of pass@k",
    "--timeout": "seconds a sandboxed program may run",
    "--workers": "processes working in parallel (programs checked, or corpus tokenized)",
    "--unsafe-python-guard-only": "run model-written code without operating-system isolation",
    "--allow-weak-verdicts": "count forgeable weak-path passes instead of failing them",
    "--num-fewshot": "worked examples in the prompt",
    "--multipliers": "context lengths as multiples of the training length",
    "--max-tokens": "tokens scored at every context length",
    "--protocol": "how longer contexts are scored: blocks or last_window",
    "--num-blocks": "blocks of real data the head analysis measures",
    "--layers": "layers whose attention maps are drawn",
    "--tasks": "lm-evaluation-harness tasks",
    "--max-documents": "documents the held-out perplexity task scores",
    "--limit": "at most N documents per harness task",
    "--max-blocks": "score at most N blocks of the split",
    "--lm-eval-tasks-path": "print the folder of the shipped lm-evaluation-harness tasks",
}


# ---------------------------------------------------------------------- list values
def _list_of(kind: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if "," in text:
            raise argparse.ArgumentTypeError(
                f"lists are written with spaces, not commas: got {text!r}; "
                f"write {' '.join(t for t in text.split(',') if t)}"
            )
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None

    parse.__name__ = name
    return parse


#: ``type=`` of one item of an integer list option (a comma is refused with a hint).
int_list = _list_of(int, "an integer")
#: ``type=`` of one item of a float list option.
float_list = _list_of(float, "a number")


# ---------------------------------------------------------------------- shared options
def add_model(
    p: argparse.ArgumentParser, help: str, *, required: bool = True, many: bool = False
) -> None:
    """``--model``: the artifact to read, or several with ``many``."""
    if many:
        p.add_argument(
            "--model", nargs="+", action="extend", required=required, metavar="PATH", help=help
        )
    else:
        p.add_argument("--model", required=required, metavar="PATH", help=help)


def add_base(p: argparse.ArgumentParser, help: str, **kwargs: Any) -> None:
    """``--base``: a model to convert or start from."""
    p.add_argument("--base", metavar="MODEL", help=help, **kwargs)


def add_verify(p: argparse.ArgumentParser) -> None:
    """``--no-verify``: read the artifact without checking it against its manifest."""
    p.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="read the artifact without checking its files against its manifest.json (by "
        "default a missing manifest, a changed file or a file it does not list is an error "
        "that names the file); for a directory saved before manifests covered it, or a "
        "damaged one you mean to inspect",
    )


def add_seeds(p: argparse.ArgumentParser, default: Sequence[int], help: str) -> None:
    """``--seeds``: always the list of seeds to run (``--seeds 0 1 2``)."""
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int_list,
        default=list(default),
        metavar="SEED",
        help=f"{help} (default {' '.join(map(str, default))})",
    )


def add_threads(p: argparse.ArgumentParser, dest: str = "threads") -> None:
    """``--threads``; ``dest`` is the config field it fills (``num_threads``) where one does."""
    p.add_argument(
        "--threads",
        dest=dest,
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's)",
    )


def add_device(
    p: argparse.ArgumentParser,
    default: str | None = "auto",
    help: str = "auto (CUDA when available), cpu or cuda (default auto)",
) -> None:
    """``--device``: auto, cpu or cuda (``default`` None leaves it to the config)."""
    p.add_argument("--device", default=default, choices=("auto", "cpu", "cuda"), help=help)


def add_shard(p: argparse.ArgumentParser) -> None:
    """``--shard``: FSDP2 instead of DDP under torchrun (fills ``TrainConfig.shard``)."""
    p.add_argument(
        "--shard",
        action="store_true",
        default=None,
        help="under torchrun, shard the parameters, gradients and optimizer state over the "
        "ranks with PyTorch's FSDP2 (fully_shard per transformer block) instead of "
        "replicating them with DDP; same losses, same checkpoints (they resume on any number "
        "of ranks); with --bf16, parameters are gathered in bf16 and gradients reduced in "
        "fp32. A single process trains unsharded",
    )


def add_run_dir(p: argparse.ArgumentParser) -> None:
    """``--resume`` and ``--overwrite`` of a run folder."""
    p.add_argument(
        "--resume", action="store_true", help="continue from the newest good checkpoint in --out"
    )
    add_overwrite(p, "start afresh in an existing run folder (its checkpoints are replaced)")


def add_out(
    p: argparse.ArgumentParser, help: str, *, dest: str = "out", required: bool = True, **kwargs
) -> None:
    """``--out``: the folder a command writes (``dest`` is the config field it fills)."""
    p.add_argument("--out", dest=dest, required=required, help=help, **kwargs)


def add_overwrite(p: argparse.ArgumentParser, help: str) -> None:
    """``--overwrite``: replace what an earlier run of the command wrote in ``--out``."""
    p.add_argument("--overwrite", action="store_true", help=help)


def add_json(p: argparse.ArgumentParser, help: str = "print JSON") -> None:
    """``--json``: print JSON instead of text."""
    p.add_argument("--json", action="store_true", help=help)


#: Options several commands read with one meaning, declared once: the flag, the type and
#: what the option is; each command adds its default and, where it says more, its own help
#: (:func:`shared_option`).
SHARED: dict[str, dict[str, Any]] = {
    "prompt": {"flag": "--prompt", "metavar": "TEXT", "help": "the text a sample continues"},
    "max_new_tokens": {
        "flag": "--max-new-tokens",
        "type": int,
        "metavar": "N",
        "help": "new tokens per sample",
    },
    "temperature": {
        "flag": "--temperature",
        "type": float,
        "metavar": "T",
        "help": "softmax temperature, >= 0; 0 is greedy",
    },
    "top_p": {
        "flag": "--top-p",
        "type": float,
        "metavar": "P",
        "help": "nucleus sampling mass in (0, 1]",
    },
    "num_samples": {
        "flag": "--num-samples",
        "type": int,
        "metavar": "N",
        "help": "samples per prompt",
    },
    "seed": {"flag": "--seed", "type": int, "metavar": "N", "help": "seed of sampling"},
}


def shared_option(name: str, *, help: str | None = None) -> tuple[str, dict[str, Any]]:
    """The flag and the ``add_argument`` settings (without a default) of the shared option
    ``name`` (a key of :data:`SHARED`); ``help`` replaces its general help."""
    settings = dict(SHARED[name])
    flag = settings.pop("flag")
    if help is not None:
        settings["help"] = help
    return flag, settings


def add_shared(
    p: argparse.ArgumentParser | Any, name: str, default: Any = None, *, help: str | None = None
) -> None:
    """Add the shared option ``name`` (:data:`SHARED`) with ``default``, stated in its help."""
    flag, settings = shared_option(name, help=help)
    if default is not None:
        settings["help"] += f" (default {default})"
    p.add_argument(flag, dest=name, default=default, **settings)


def add_prompt(p: argparse.ArgumentParser | Any, help: str) -> None:
    """``--prompt``: the text a sample continues (``p`` may be a mutually exclusive group)."""
    add_shared(p, "prompt", help=help)


def add_sampling(p: argparse.ArgumentParser) -> None:
    """``--temperature`` and ``--top-p`` of sampling from a language model."""
    add_shared(p, "temperature", 0.8)
    add_shared(p, "top_p", 0.95)


def add_set(
    p: argparse.ArgumentParser,
    configs: Iterable[type],
    choices: Iterable[str] = (),
    *,
    help: str | None = None,
    config_file: bool = True,
) -> None:
    """``--set KEY=VALUE`` and ``--config FILE`` over every field of ``configs``.

    Args:
        p: the subcommand's parser.
        configs: the config classes whose fields the two options set (``NAME.KEY`` where two
            share a field).
        choices: options a config file may also choose, such as ``preset`` or ``recipe``
            (read with :func:`config_choice`).
        help: the help of ``--set`` where the command routes it itself (``evaluate``).
        config_file: also add ``--config`` (read by :func:`build_configs`).
    """
    names = ", ".join(c.__name__ for c in configs)
    chosen = "".join(f", {c} = NAME" for c in choices)
    p.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help=help
        or f"override any field of {names} (VALUE read as JSON when it parses; "
        "NAME.KEY=VALUE where two configs share KEY)",
    )
    if config_file:
        p.add_argument(
            "--config",
            metavar="FILE",
            default=None,
            help=f"a TOML file of field values of {names}: KEY = VALUE lines, or [NAME] tables "
            f"where two configs share KEY{chosen}; the options given on the command line and "
            "--set win over the file",
        )
    p.set_defaults(_config_choices=tuple(choices))


# ---------------------------------------------------------------------- config fields
#: Fields whose flag is not their name with dashes, wherever they get an option: one name
#: per meaning (:data:`VOCABULARY`), whatever the field is called in its config.
FIELD_FLAGS: dict[str, str] = {
    "max_seq_len": "--seq-len",
    "max_len": "--seq-len",
    "ft_max_len": "--ft-seq-len",
    "r": "--rank",
    "lora_r": "--rank",
    "num_threads": "--threads",
}


def add_fields(
    p: argparse.ArgumentParser | Any,
    cls: Callable[..., Any],
    *names: str,
    flags: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    choices: dict[str, Sequence[Any]] | None = None,
    required: Iterable[str] = (),
    metavars: dict[str, str] | None = None,
    note: str = "",
) -> None:
    """One option per field of a config dataclass (or parameter of a function or class),
    declared by the field itself.

    The flag is the field's name with dashes (``max_steps`` -> ``--max-steps``) unless
    ``flags`` or :data:`FIELD_FLAGS` names another; the type is the field's (``X | None``
    reads X; a bool field is a switch that sets True, or False where its flag starts with
    ``--no-``; a list field takes one or more values);
    the help is the field's entry in the class's ``Attributes:`` (or ``Args:``) section,
    followed by its default. The option's own default is None for a config dataclass, so
    that only what is given overrides a recipe or a ``--config`` file (:func:`build_configs`);
    for a function's parameter it is the parameter's default.

    Args:
        p: the subcommand's parser (or an argument group).
        cls: the config dataclass, or the function or class whose parameters the options
            fill (documented under ``Args:``).
        *names: the fields that get an option.
        flags: field -> flag, where the flag is neither the field's name nor in
            :data:`FIELD_FLAGS`.
        defaults: field -> the default to state in the help, where it is not the field's
            (a recipe's value, or words such as "the preset's").
        choices: field -> the values argparse accepts.
        required: the fields that must be given.
        metavars: field -> the name of its value in the usage line.
        note: text added to every help, after the field's (where the options apply only in
            some cases, such as "(with --base)").

    Raises:
        KeyError: a name that is not a field of ``cls``, or a field without documentation.
    """
    docs = field_docs(cls)
    config = is_dataclass(cls)
    given, hints = _parameters(cls)
    for name in names:
        if name not in given:
            raise KeyError(f"{getattr(cls, '__name__', cls)} has no field {name!r}")
        if name not in docs:
            raise KeyError(f"{getattr(cls, '__name__', cls)}.{name} has no documentation entry")
        flag = {**FIELD_FLAGS, **(flags or {})}.get(name, "--" + name.replace("_", "-"))
        default = (defaults or {}).get(name, given[name])
        said = default_text(default)
        doc = docs[name].rstrip(".") + note
        text = f"{doc}." if said is None else f"{doc}; default {said}"
        kind, many = value_type(hints.get(name, str))
        extra: dict[str, Any] = {"choices": choices[name]} if choices and name in choices else {}
        extra["default"] = None if config or given[name] is MISSING else given[name]
        if name in required:
            extra["required"] = True
        if many:  # one or more values; a repeated flag appends
            extra.update(nargs="+", action="extend", metavar=name.upper().rstrip("S") or None)
        if (metavars or {}).get(name):
            extra["metavar"] = metavars[name]
        if kind is bool:
            off = flag.startswith("--no-")  # a switch that turns a true default off
            text = f"turn {name} off ({doc}); default {said}" if off else text
            action = "store_false" if off else "store_true"
            p.add_argument(flag, dest=name, action=action, help=text, **extra)
        else:
            p.add_argument(flag, dest=name, type=kind, help=text, **extra)


def _parameters(target: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The defaults (MISSING where none) and type hints of a dataclass's fields or of a
    function's (or class's) parameters."""
    if is_dataclass(target):
        return field_defaults(target), typing.get_type_hints(target)
    signature = inspect.signature(target)
    defaults = {
        k: MISSING if v.default is inspect.Parameter.empty else v.default
        for k, v in signature.parameters.items()
    }
    function = target.__init__ if isinstance(target, type) else target
    return defaults, typing.get_type_hints(function)


def value_type(hint: Any) -> tuple[type, bool]:
    """The type of one value of a field and whether the field takes several."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (list, tuple):
        item = [a for a in args if a is not Ellipsis]
        return (item[0] if item and item[0] in (int, float, str) else str), True
    lists = [a for a in args if typing.get_origin(a) in (list, tuple)]
    if lists:
        return value_type(lists[0])
    kind = args[0] if args else hint
    return (kind if kind in (bool, int, float, str) else str), False


def default_text(value: Any) -> str | None:
    """A default as the help states it (``true``, ``1 10 100``); None for none at all."""
    if value is MISSING:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return None if value is None else str(value)


# ---------------------------------------------------------------------- configs
def _field_names(cls: type) -> list[str]:
    if isinstance(cls, type) and issubclass(cls, ConfigBase):
        return list(cls.field_names())
    if is_dataclass(cls):
        return [f.name for f in fields(cls)]
    raise TypeError(f"{cls!r} is not a config dataclass")


def build_configs(
    args: argparse.Namespace,
    configs: dict[str, type],
    *,
    defaults: dict[str, dict[str, Any]] | None = None,
    extra: dict[str, dict[str, Any]] | None = None,
    exclude: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """Keyword arguments of each config from the options, the defaults and ``--set``.

    An option fills every config that has a field of its destination's name; ``--set KEY=V``
    fills the one config with field ``KEY`` (``NAME.KEY`` chooses one when several have it).
    Later sources win: ``defaults`` (a recipe), then the options given (not None), then
    ``extra`` (values the command computes), then ``--set``.

    Args:
        args: the parsed options (``args.set`` the ``--set`` strings, when present).
        configs: config name -> config class.
        defaults: config name -> field values of the chosen recipe.
        extra: config name -> field values set by the command.
        exclude: option destinations that are not config fields (``model``, a path).

    Returns:
        config name -> keyword arguments.

    Raises:
        ValueError: an unknown or ambiguous ``--set`` key (the valid names are listed).
    """
    names = {n: set(_field_names(c)) for n, c in configs.items()}
    out: dict[str, dict[str, Any]] = {n: dict((defaults or {}).get(n, {})) for n in configs}
    path = getattr(args, "config", None)
    if path is not None:
        for n, values in config_file_values(path, names, _choices(args)).items():
            out[n].update(values)
    skip = {"set", "config", "func", "command", "_config_choices", *exclude}
    given = {k: v for k, v in vars(args).items() if v is not None and k not in skip}
    for n, keys in names.items():
        out[n].update({k: v for k, v in given.items() if k in keys})
        out[n].update((extra or {}).get(n, {}))
    routed = route_overrides(
        getattr(args, "set", []) or [], names, "config name in --set", "config key"
    )
    for n, values in routed.items():
        out[n].update(values)
    return out


def _choices(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(getattr(args, "_config_choices", ()))


def config_choice(args: argparse.Namespace, name: str, default: str) -> str:
    """A named configuration's name: the option ``name`` when given, else the config file's
    top-level ``name`` key (``--config``), else ``default``."""
    given = getattr(args, name, None)
    if given is not None:
        return given
    path = getattr(args, "config", None)
    if path is not None:
        value = read_toml(path).get(name)
        if value is not None:
            if not isinstance(value, str):
                raise ValueError(f"{path}: {name} must be a name, got {value!r}")
            return value
    return default


def config_file_values(
    path: str, names: dict[str, set[str]], choices: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """The field values of a ``--config`` TOML file, routed to the configs that own them.

    Top-level keys are fields, routed as ``--set`` routes them; a table named after a config
    (``[model]``, ``[train]``) scopes its keys to that config. Keys in ``choices`` (``preset``,
    ``recipe``) are left to :func:`config_choice`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: invalid TOML, or an unknown or ambiguous key (the file is named).
    """
    data = read_toml(path)
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in choices:
            continue
        if isinstance(value, dict) and key in names:
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    try:
        return route_values(flat, names, "config table", "config key")
    except ValueError as e:
        raise ValueError(f"--config {path}: {e}") from None


def route_overrides(
    items: Iterable[str],
    names: dict[str, set[str]],
    scope_what: str,
    key_what: str,
    *,
    shared: bool = False,
) -> dict[str, dict[str, Any]]:
    """Route ``--set KEY=VALUE`` strings to the configs that have field ``KEY``.

    ``NAME.KEY=VALUE`` goes to config ``NAME`` only. An unscoped key held by several configs
    is refused with the scoped spellings, or with ``shared=True`` set in each of them (the
    evaluation suites, which share fields such as ``seed``).

    Args:
        items: the ``KEY=VALUE`` strings.
        names: config name -> its field names.
        scope_what: what a scope is, for the error on an unknown one.
        key_what: what a key is, for the error on an unknown one.
        shared: set a key held by several configs in each of them.

    Returns:
        config name -> {field: value}.

    Raises:
        ValueError: an unknown scope or key (the closest valid names are named), or an
            ambiguous key without ``shared``.
    """
    return route_values(parse_overrides(list(items)), names, scope_what, key_what, shared=shared)


def route_values(
    values: dict[str, Any],
    names: dict[str, set[str]],
    scope_what: str,
    key_what: str,
    *,
    shared: bool = False,
) -> dict[str, dict[str, Any]]:
    """Route parsed ``{KEY or NAME.KEY: value}`` pairs as :func:`route_overrides` does."""
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for key, value in values.items():
        scope, _, field = key.rpartition(".")
        if scope and scope not in names:
            raise unknown_key_error(scope, sorted(names), scope_what)
        owners = [n for n in ([scope] if scope else names) if field in names[n]]
        if not owners:
            raise unknown_key_error(field, sorted(set().union(*names.values())), key_what)
        if len(owners) > 1 and not shared:
            raise ValueError(
                f"--set {key}: the field is in {' and '.join(owners)}; write "
                + " or ".join(f"--set {o}.{key}=..." for o in owners)
            )
        for n in owners:
            out[n][field] = value
    return out
