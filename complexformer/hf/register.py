"""Registration of the ComplexFormer classes with transformers' auto classes.

``AutoConfig.register("complexformer", ...)`` and ``AutoModelForCausalLM.register(...)`` need
transformers, whose import costs 0.5 s (``import transformers``) to 2.5 s (its model classes)
here, several times the cost of ``import complexformer`` itself. So ``import complexformer``
calls :func:`install_auto_registration`, which registers at once when transformers' auto
modules are already imported and otherwise installs an import hook that registers the
configuration right after ``transformers.models.auto.configuration_auto`` has been executed
and the model right after ``transformers.models.auto.modeling_auto``: the registration is in
place before any ``AutoConfig`` / ``AutoModelForCausalLM`` call, costs nothing when
transformers is never used, and nothing breaks when it is not installed.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from collections.abc import Callable
from typing import Any

__all__ = [
    "install_auto_registration",
    "register_auto_classes",
    "register_config",
    "register_model",
]

CONFIG_MODULE = "transformers.models.auto.configuration_auto"
MODELING_MODULE = "transformers.models.auto.modeling_auto"


def register_config() -> None:
    """``AutoConfig.register("complexformer", ComplexFormerConfig)``."""
    from transformers import AutoConfig

    from .configuration_complexformer import ComplexFormerConfig

    AutoConfig.register(ComplexFormerConfig.model_type, ComplexFormerConfig, exist_ok=True)


def register_model() -> None:
    """``AutoModelForCausalLM.register(ComplexFormerConfig, ComplexFormerForCausalLM)``."""
    from transformers import AutoModelForCausalLM

    from .configuration_complexformer import ComplexFormerConfig
    from .modeling_complexformer import ComplexFormerForCausalLM

    AutoModelForCausalLM.register(ComplexFormerConfig, ComplexFormerForCausalLM, exist_ok=True)


def register_auto_classes() -> None:
    """Register both now (imports transformers; needs the ``hf`` extra)."""
    register_config()
    register_model()


def _safely(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as e:  # never break the import of transformers
        warnings.warn(f"complexformer: transformers auto registration failed: {e}", stacklevel=2)


class _LoaderThenCall(importlib.abc.Loader):
    """A module loader that runs ``callback`` after the wrapped loader executed the module."""

    def __init__(self, loader: Any, callback: Callable[[], None]) -> None:
        self.loader, self.callback = loader, callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _safely(self.callback)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the original
        return getattr(self.loader, name)


class _AfterImportHook(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of the watched modules (name -> callback)."""

    def __init__(self, callbacks: dict[str, Callable[[], None]]) -> None:
        self.callbacks = callbacks

    def find_spec(self, name, path, target=None):
        if name not in self.callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LoaderThenCall(spec.loader, self.callbacks.pop(name))
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        return spec


def install_auto_registration() -> None:
    """Register with transformers' auto classes now or when they are first imported."""
    if any(isinstance(f, _AfterImportHook) for f in sys.meta_path):
        return
    pending = {}
    for name, callback in ((CONFIG_MODULE, register_config), (MODELING_MODULE, register_model)):
        if name in sys.modules:
            _safely(callback)
        else:
            pending[name] = callback
    if pending:
        sys.meta_path.insert(0, _AfterImportHook(pending))
