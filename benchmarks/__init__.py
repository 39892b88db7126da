"""Proton's benchmarks: what profiling costs, beside what users would pick instead.

A package so that its modules import one another by name, with no search-path edits. Run them
from the repository root, as modules: ``python3 -m benchmarks.run --dry-run --out /tmp/bench``. Not
installed with the profiler (pyproject's package list names ``proton_core`` only); README.md lists
the commands.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the directory `python3 -m` runs from


def python_m(module: str, *args: str) -> list[str]:
    """The command line of a fresh interpreter running ``module`` (``benchmarks.worker``) as
    ``python3 -m`` does; start it with ``cwd=REPO`` so that the package is found."""
    return [sys.executable, "-m", module, *args]
