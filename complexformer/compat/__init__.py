"""Drop-in replacements for the APIs of other complex-valued libraries.

``complexformer.compat.complextorch`` takes the constructor arguments of the complextorch
library, version 2.1.1, and computes its outputs, built from :mod:`complexformer.nn`.
"""
