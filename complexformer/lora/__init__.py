"""Complex LoRA adapters: complexify a real pre-trained model (Tamburini 2024).

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. Frozen real layers are
wrapped (peft style, never copied) by complex low-rank updates,
y = (W + (alpha/r)·A·Bᴴ)·x + (b + b_c), and embeddings by E + (alpha/r)·A·Bᴴ. Adapters are
REAL parameters with a trailing dimension of 2. ``complexformer.models.cbert.complexify``
applies them to a Hugging Face BERT. See docs/cmplxbert.md.
"""

from .config import DEFAULT_TARGET_MODULES, ComplexLoRAConfig
from .io import (
    LoadResult,
    adapter_state_dict,
    load_adapters,
    print_trainable_parameters,
    save_adapters,
    trainable_parameter_counts,
)
from .layers import (
    ComplexLoRAEmbedding,
    ComplexLoRALinear,
    complex_lora_layers,
    merge_adapters,
    unmerge_adapters,
)

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "ComplexLoRAConfig",
    "ComplexLoRAEmbedding",
    "ComplexLoRALinear",
    "LoadResult",
    "adapter_state_dict",
    "complex_lora_layers",
    "load_adapters",
    "merge_adapters",
    "print_trainable_parameters",
    "save_adapters",
    "trainable_parameter_counts",
    "unmerge_adapters",
]
