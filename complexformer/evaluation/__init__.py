"""Evaluation suites (``complexformer evaluate --suite ...``).

* :mod:`.text` - generation quality: gen-PPL under an evaluator LM (:mod:`.genppl`), Dist-1/2
  and Rep-4 (:mod:`.text_metrics`);
* :mod:`.code_suite` - pass@k (:mod:`.passk`) of sampled programs run in the sandbox
  (:mod:`.sandbox`: bubblewrap isolation, a verdict by a trusted checker);
  ``check_correctness(problem, completion, timeout)``;
* :mod:`.math_suite` - GSM8K / MATH final-answer extraction, normalisation and accuracy;
* :mod:`.extrapolation` - perplexity against context length for several runs;
* ``heads`` - CMHA's δ and b per head, semantic vs positional share, attention maps: the
  lab's (:mod:`complexformer_lab.evaluation.heads`), added through the entry-point group
  ``complexformer.suites`` (:func:`.suite.load_suite_entry_points`);
* :mod:`.lmeval` - lm-evaluation-harness (EleutherAI) on the run exported for transformers,
  with offline tasks shipped in ``lm_eval_tasks/`` (held-out perplexity, multiple choice).

Each ``run_*_suite`` writes ``<suite>.json`` and ``<suite>.md``. The submodules are imported
on use (some need the ``eval`` extra).
"""
