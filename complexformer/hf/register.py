"""Registration of the ComplexFormer classes with transformers' auto classes.

After :func:`register_auto_classes`, ``AutoConfig``, ``AutoModelForCausalLM`` and
``pipeline`` resolve ``model_type="complexformer"`` to
:class:`~complexformer.hf.configuration_complexformer.ComplexFormerConfig` and
:class:`~complexformer.hf.modeling_complexformer.ComplexFormerForCausalLM`, so that an
exported directory loads without ``trust_remote_code=True``. The call imports transformers
(the ``hf`` extra), whose import costs 0.5 s (``import transformers``) to 2.5 s (its model
classes), several times ``import complexformer``; so ``import complexformer`` does not
register, and the registration is an explicit call::

    from complexformer.hf import register_auto_classes

    register_auto_classes()
    model = AutoModelForCausalLM.from_pretrained("hf/cmha")
"""

from __future__ import annotations

from ..runtime import require

__all__ = ["register_auto_classes"]


def register_auto_classes() -> None:
    """Register ``"complexformer"`` with ``AutoConfig`` and ``AutoModelForCausalLM``, and
    ``"cmplxbert"`` (:mod:`.cmplxbert`) with ``AutoConfig``, ``AutoModel``,
    ``AutoModelForMaskedLM``, ``AutoModelForPreTraining``,
    ``AutoModelForSequenceClassification`` and ``AutoModelForTokenClassification``.

    Idempotent: a second call registers the same classes again, which transformers allows
    (``exist_ok=True``).

    Raises:
        ImportError: transformers is not installed (the ``hf`` extra).
    """
    transformers = require("transformers", "hf", "hf: the transformers auto classes")
    # the two modules import transformers at their top, so they are imported only here
    from .configuration_complexformer import ComplexFormerConfig
    from .modeling_complexformer import ComplexFormerForCausalLM

    transformers.AutoConfig.register(
        ComplexFormerConfig.model_type, ComplexFormerConfig, exist_ok=True
    )
    transformers.AutoModelForCausalLM.register(
        ComplexFormerConfig, ComplexFormerForCausalLM, exist_ok=True
    )
    from . import cmplxbert as cb

    config = cb.CmplxBertConfig
    transformers.AutoConfig.register(config.model_type, config, exist_ok=True)
    for auto, cls in (
        ("AutoModel", cb.CmplxBertModel),
        ("AutoModelForMaskedLM", cb.CmplxBertForMaskedLM),
        ("AutoModelForPreTraining", cb.CmplxBertForPreTraining),
        ("AutoModelForSequenceClassification", cb.CmplxBertForSequenceClassification),
        ("AutoModelForTokenClassification", cb.CmplxBertForTokenClassification),
    ):
        getattr(transformers, auto).register(config, cls, exist_ok=True)
