"""The per-head analysis of CMHA (ComplexFormer, Shao et al. 2025, eq. 7-8): :mod:`.heads`
(the measures and the ``heads`` suite, added to ``complexformer evaluate`` through the
entry-point group ``complexformer.suites``) and :mod:`.heads_report` (its tables and plots)."""
