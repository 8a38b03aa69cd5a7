"""The ComplexFormer lab: the experiments that produce the evidence of docs/, on top of the
library.

The library (:mod:`complexformer`) holds what a user imports to build, train, evaluate,
convert and load models. The lab reproduces the papers' comparisons with it: the
ComplexFormer paper's tables and the compute ladder (:mod:`.reproduce`), and the CmplxBERT
comparison over model kinds and seeds, the convergence study, the start against the real
model and the embedding figure (:mod:`.cmplxbert`). It ships in the same distribution,
imports only the library's public names and is never imported by the library; its commands
reach ``complexformer`` through the ``complexformer.commands`` entry point (:mod:`.cli`).
See docs/architecture.md, "Library and lab".
"""
