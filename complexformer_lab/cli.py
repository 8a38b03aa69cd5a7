"""The lab's subcommands of ``complexformer``: ``reproduce``, ``cbert-finetune``,
``cbert-study``, ``cbert-start`` and ``cbert-embeddings``.

:func:`add_parsers` is registered in the ``complexformer.commands`` entry-point group
(pyproject.toml), whose every provider :func:`complexformer.cli.build_parser` calls after the
library's own subcommands.
"""

from __future__ import annotations

from .cmplxbert.cli import add_lab_cbert_parsers
from .reproduce.cli import add_reproduce_parser

__all__ = ["add_parsers"]


def add_parsers(sub) -> None:
    """Add the lab's subcommands to ``sub``, the subparsers of the ``complexformer`` parser."""
    add_reproduce_parser(sub)
    add_lab_cbert_parsers(sub)
