"""The package's named configurations, as TOML data files.

- ``presets.toml``: model presets of the language model (``--preset``;
  :data:`complexformer.models.config.PRESETS`).
- ``cmplxbert_recipes.toml``: CmplxBERT recipes (``--recipe``;
  :func:`complexformer.cmplxbert.config.recipe_configs`).

Each top-level table is one configuration; ``extends`` starts it from another one and
``description`` is its line in ``--help`` (:class:`complexformer.config.NamedConfigs`). A user's
own file in the same format is read with ``--config FILE``.
"""
