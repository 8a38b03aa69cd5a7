"""Running untrusted, model-written programs and judging them by a verdict they cannot forge.

* :mod:`.runner` - :func:`run_program` / :func:`start_program`: one program in a fresh
  interpreter, isolated, resource-limited and cleaned up; :func:`sandbox_capabilities`;
* :mod:`.isolation` - the operating-system layers: bubblewrap, ``unshare``, ``pids`` cgroups;
* :mod:`.verdict` - :func:`check_program`: the completion runs in the sandbox, the problem's
  tests in a separate trusted interpreter;
* :mod:`.sandboxed_side` and :mod:`.trusted_side` - the source the two interpreters run
  (shipped as text, after :mod:`.literal_codec`, the literal-only encoding of the values that
  cross between them).
"""

from __future__ import annotations

from .runner import (
    RunningProgram,
    SandboxResult,
    SandboxUnavailableError,
    find_sandbox_processes,
    run_program,
    sandbox_capabilities,
    site_package_dirs,
    start_program,
    sweep_leftovers,
)
from .verdict import MESSAGE_LIMIT, build_program, check_program, scrub, weak_problems

__all__ = [
    "MESSAGE_LIMIT",
    "RunningProgram",
    "SandboxResult",
    "SandboxUnavailableError",
    "build_program",
    "check_program",
    "find_sandbox_processes",
    "run_program",
    "sandbox_capabilities",
    "scrub",
    "site_package_dirs",
    "start_program",
    "sweep_leftovers",
    "weak_problems",
]
