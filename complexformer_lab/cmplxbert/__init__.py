"""The CmplxBERT evidence (Tamburini 2024): :mod:`.finetune` (the comparison of the CmplxBERT
with the real BERT and a real LoRA over seeds, with the majority baseline, paired tests,
reports and plots), :mod:`.study` (the convergence study: fine-tuning at MLM steps 0, N, 2N,
...), :mod:`.start_report` (the complexified start against the real model),
:mod:`.embeddings` (the complex word embeddings in the complex plane, Figure 1),
:mod:`.docstrings`, :mod:`.stdlib_tasks` and :mod:`.tasks` (the offline labelled tasks built
from the standard library, registered by name in the entry-point group
``complexformer.tasks``) and :mod:`.cli` (``cbert-finetune``, ``cbert-study``,
``cbert-start``, ``cbert-embeddings``).

One fine-tuning run, the model classes, loading labelled data and the library's commands are
:mod:`complexformer.cmplxbert`'s.
"""
