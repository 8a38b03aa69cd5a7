"""Speed and memory benchmarks of complexformer, run as modules from the repository root.

Each benchmark measures and writes a JSON record to ``benchmarks/results/<name>.json``
(``python -m benchmarks.attention``, ``.train``, ``.complex_attention``, ``.cbert``; ``make
bench`` runs the four). ``python -m benchmarks.render`` (``make bench-docs``) reads the records
and writes the tables of ``docs/benchmarks.md``, with the targets' PASS/FAIL verdicts.
"""
