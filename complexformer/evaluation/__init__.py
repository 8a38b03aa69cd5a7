"""Evaluation suites: generation quality (text), code (pass@k in a sandbox), math answers,
length extrapolation and per-head analysis of CMHA."""
