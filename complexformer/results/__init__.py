"""Results: the tables, result files and statistics of every report.

- :mod:`~complexformer.results.report`: JSON-safe payloads, markdown and text tables, and the
  ``name.json`` / ``name.md`` pair every suite writes, atomically (:func:`write_report`);
- :mod:`~complexformer.results.stats`: mean ± sample standard deviation over seeds and the
  two-sided paired t-test (:func:`mean_std`, :func:`paired_t_test`).

The evaluation suites, ``reproduce``, the CmplxBERT reports, ``benchmarks/`` and ``examples/``
import their tables from here.
"""

from .report import jsonable, markdown_table, text_table, write_json, write_report
from .stats import (
    MIN_PAIRS,
    format_p,
    mean_std,
    paired_t_test,
    regularized_incomplete_beta,
    student_t_two_sided_p,
)

__all__ = [
    "MIN_PAIRS",
    "format_p",
    "jsonable",
    "markdown_table",
    "mean_std",
    "paired_t_test",
    "regularized_incomplete_beta",
    "student_t_two_sided_p",
    "text_table",
    "write_json",
    "write_report",
]
