"""Stand-ins for the frameworks' objects the hooks receive, shared by the tests and the benchmarks."""

from __future__ import annotations


class LazyDict:
    """Triton's LazyDict contract: ``data`` (Triton's keys), ``extras`` evaluated by ``get()``."""

    def __init__(self, data):
        self.data, self.extras = data, []

    def get(self):
        for func, args in self.extras:
            self.data = self.data | func(*args)
        self.extras.clear()
        return self.data

    def add(self, func, args):
        self.extras.append((func, args))
