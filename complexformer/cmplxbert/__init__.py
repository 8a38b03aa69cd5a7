"""CmplxBERT-LoRA: a pre-trained real BERT made complex-valued by complex LoRA adapters.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. Frozen real layers are
wrapped (peft style, never copied) by complex low-rank updates,
y = (W + (alpha/r)·A·Bᴴ)·x + (b + b_c), and embeddings by E + (alpha/r)·A·Bᴴ; adapters are
REAL parameters with a trailing dimension of 2. :func:`complexify` applies them to a Hugging
Face BERT. See docs/cmplxbert.md.

Modules: :mod:`.config` (the configuration), :mod:`.layers` (complex LoRA layers),
:mod:`.planar` (planar-rows kernels and the per-forward workspace), :mod:`.modeling` (the
:class:`CmplxBert` module tree), :mod:`.complexify` (the builder), :mod:`.start` (the
sign-preserving complex biases), :mod:`.loading` (MiniLM, Hugging Face BERTs, saved CmplxBERT
directories), :mod:`.io` (adapter files), :mod:`.mlm` (continued MLM pre-training),
:mod:`.finetune` (one sequence, pair or token fine-tuning run of a CmplxBERT or a real
baseline, the fine-tuned model kept), :mod:`.finetune_task` (its task on the shared loop),
:mod:`.finetuned` and :mod:`.predict` (the kept classifier and its predictions), :mod:`.real`
(real LoRA), :mod:`.analysis` (embedding and hidden-state measures), :mod:`.metrics`,
:mod:`.labelled` (labelled data, and tasks registered by name), :mod:`.cli` (the
``cbert-complexify`` and ``cbert-predict`` subcommands and the options every CmplxBERT command
shares). The comparison with the real baselines over seeds, the convergence study, the start
report, the embedding figure and the offline tasks built from the standard library
(registered by name, so ``--task docstrings`` reaches them) are the lab's
(:mod:`complexformer_lab.cmplxbert`).

Dependencies point one way: this package uses :mod:`complexformer.nn`,
:mod:`complexformer.training`, :mod:`complexformer.data` and the shared utilities; nothing
below it imports it.
"""

from .complexify import complexify
from .config import DEFAULT_TARGET_MODULES, CmplxBertConfig, ComplexLoRAConfig
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
from .loading import (
    find_minilm_dir,
    is_cmplxbert_dir,
    load_cmplxbert,
    load_hf_bert,
    load_minilm,
    save_cmplxbert,
)
from .modeling import CmplxBert, CmplxBertOutput, split_tanh

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "CmplxBert",
    "CmplxBertConfig",
    "CmplxBertOutput",
    "ComplexLoRAConfig",
    "ComplexLoRAEmbedding",
    "ComplexLoRALinear",
    "LoadResult",
    "adapter_state_dict",
    "complex_lora_layers",
    "complexify",
    "find_minilm_dir",
    "is_cmplxbert_dir",
    "load_adapters",
    "load_cmplxbert",
    "load_hf_bert",
    "load_minilm",
    "merge_adapters",
    "print_trainable_parameters",
    "save_adapters",
    "save_cmplxbert",
    "split_tanh",
    "trainable_parameter_counts",
    "unmerge_adapters",
]
