"""CMHA for pre-trained Hugging Face RoPE language models (Llama, Mistral, Qwen2, SmolLM2).

:func:`to_cmha` converts a model in place so that it computes the same function (δ = 1,
b = 0) and learns per-head phase adaptation on top of what it knows;
:func:`save_adaptation` / :func:`load_adaptation` store the few trained tensors beside a
reference to the base; :class:`RetrofitTask` trains them on the shared loop
(``complexformer retrofit``). See docs/retrofit.md.
"""

from .build import add_lora, load_base, prepare_model
from .config import TRAIN_MODES, RetrofitConfig
from .convert import (
    GQA_MODES,
    RETROFIT_SCHEMES,
    SUPPORTED_ATTENTION,
    SUPPORTED_ROPE_TYPES,
    TRANSFORMERS_RANGE,
    CMHAConversion,
    cmha_modules,
    set_trainable,
    to_cmha,
)
from .io import (
    ADAPTATION_CONFIG,
    ADAPTATION_FILE,
    adaptation_tensors,
    find_adaptation_dir,
    load_adaptation,
    save_adaptation,
)
from .task import RetrofitTask, wrap_tokenizer

__all__ = [
    "ADAPTATION_CONFIG",
    "ADAPTATION_FILE",
    "GQA_MODES",
    "RETROFIT_SCHEMES",
    "SUPPORTED_ATTENTION",
    "SUPPORTED_ROPE_TYPES",
    "TRAIN_MODES",
    "TRANSFORMERS_RANGE",
    "CMHAConversion",
    "RetrofitConfig",
    "RetrofitTask",
    "adaptation_tensors",
    "add_lora",
    "cmha_modules",
    "find_adaptation_dir",
    "load_adaptation",
    "load_base",
    "prepare_model",
    "save_adaptation",
    "set_trainable",
    "to_cmha",
    "wrap_tokenizer",
]
