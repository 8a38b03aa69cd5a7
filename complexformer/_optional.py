"""Import of optional dependencies with an error that says how to install them."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


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
            f"{purpose} need the `{package}` package, which is not installed; install it with "
            f"`pip install 'complexformer[{extra}]'` (or `pip install {package}`)"
        ) from e
