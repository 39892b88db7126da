"""Run a function on a module once the program imports it, never importing it ourselves.

The core observes torch (its process groups, its CUDA graphs) only in programs that use it: importing torch
would cost seconds, so a finder first on ``sys.meta_path`` waits for the module's import, lets it run, then
hands the module over, and takes itself off the path.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``name`` is imported, calls ``then(module)`` once the module has run."""

    def __init__(self, name: str, then: Callable) -> None:
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec
        then = self.then

        def exec_module(module):
            run(module)
            then(module)

        loader.exec_module = exec_module
        return spec


def when_imported(name: str, then: Callable) -> None:
    """``then(module)`` now if ``name`` is imported, else once it is (idempotent for one ``then``)."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    elif not any(isinstance(f, AfterImport) and f.name == name and f.then is then for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, then))
