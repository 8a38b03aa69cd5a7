"""ComplexFormer in the transformers ecosystem (Hugging Face).

* :mod:`.configuration_complexformer` and :mod:`.modeling_complexformer`:
  ``ComplexFormerConfig`` (``model_type="complexformer"``) and ``ComplexFormerForCausalLM``
  (a ``PreTrainedModel`` with ``generate``); self-contained files (``torch`` and
  ``transformers`` only) that an export copies beside the weights for
  ``trust_remote_code=True``;
* :mod:`.export`: a run, checkpoint or model as a transformers model directory
  (``complexformer export``);
* :mod:`.register`: :func:`register_auto_classes`, the explicit registration of both classes
  with ``AutoConfig`` / ``AutoModelForCausalLM``.

Only :mod:`.register` is imported here, and it imports transformers only when called; the
other modules need ``transformers`` (the ``hf`` extra). See ``docs/huggingface.md``.
"""

from .register import register_auto_classes

__all__ = ["register_auto_classes"]
