"""Helpers shared by the frameworks tests: read a hatchet profile, walk it by names.

Loading and path-following come from proton_core.testing (the hatchet format's reader).
"""

from proton_core.testing import child as node, child_names as names, find_all, load_profile as load  # noqa: F401


class HookChain:
    """Triton 3.6's knobs.runtime.launch_*_hook."""

    def __init__(self, reversed=False):
        self.calls, self.reversed = [], reversed

    def add(self, f):
        if f not in self.calls:
            self.calls.append(f)

    def remove(self, f):
        if f in self.calls:
            self.calls.remove(f)

    def __call__(self, *a):
        for f in (reversed(self.calls) if self.reversed else self.calls):
            f(*a)


def install_fake_triton(monkeypatch):
    """A Triton 3.6-shaped module (knobs.runtime HookChains) in place of any real one; returns the runtime."""
    import sys
    import types

    runtime = types.SimpleNamespace(launch_enter_hook=HookChain(), launch_exit_hook=HookChain(reversed=True))
    knobs = types.ModuleType("triton.knobs")
    knobs.runtime = runtime
    triton = types.ModuleType("triton")
    triton.__version__ = "3.6.0"
    triton.knobs = knobs
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", knobs)
    return runtime
