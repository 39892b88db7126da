"""Which part of ``hook="torch"`` costs what on a GPU training step: variants with one part switched off.

    python3 -m benchmarks.framework_overhead.torch_ablation --profilers shadow-null,ours-torch,ours-nomod \
        [--workload mlp] [--seconds 240] [--window 0.2]

Runs torch_thread_split.py's loop (all profilers in one process, windows rotating, per-thread on-CPU
time) with these profilers added to benchmarks/profilers.py's:

- ``shadow-null``: our session (no hook) plus the anchor's RecordFunction observer that does nothing;
- ``shadow-noscope`` / ``ours-torch-noscope``: the workload's ``proton.scope`` calls left out;
- ``ours-nocb``: ``hook="torch"`` with its RecordFunction callbacks removed after start (module scopes,
  the backward-call wrapper and the session stay);
- ``ours-nomod``: ``hook="torch"`` without module scopes (the C ``nn.Module.__call__`` passes through);
- ``ours-nowrap``: ``hook="torch"`` without the backward-call wrapper (links then lack the engine call's
  context, so they are named another way: not a pure subtraction);
- ``ours-all``: every operator observed (``PROTON_TORCH_OBSERVE_ALL=1``);
- ``ours-noprov``: a context set per operator instead of the provider (``PROTON_TORCH_PROVIDER=0``);
- ``floor-null-hidden``: the anchor with the operators that launch nothing unobserved, as ``hook="torch"``
  leaves them: what torch's records alone cost at our record count;
- ``ours-empty``: ``hook="torch"`` with its callbacks replaced by the null observer, hiding kept (module
  frames, the backward-call wrapper, the provider and the session stay): ours minus it is what our
  callbacks' bodies cost, caches they disturb included, which their timers (torch_part_times.py) miss;
- ``shadow-null-hidden``: our session (no hook) plus the null observer with hiding;
- ``ours-empty-nomod`` / ``-nowrap`` / ``-noprov``: ``ours-empty`` without module frames, without the
  backward-call wrapper, or with no provider asked at each launch: what each piece of the machinery
  around the callbacks costs.

Differences between them are differences of medians of paired windows, so read them with their
intervals: on the H200 machine two variants that differ by nothing read up to 0.02 apart.
"""

from __future__ import annotations

import contextlib
import os
import sys
from unittest import mock

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.framework_overhead.torch_ablation ...")

from benchmarks import profilers  # noqa: E402
from benchmarks.framework_overhead import torch_thread_split  # noqa: E402


class ShadowNull(profilers.WithNullObserver, profilers.Ours):
    """Our session (no hook) plus the anchor's null RecordFunction observer."""

    def __init__(self):
        super().__init__("shadow")


class Hidden:
    """Mixin over a profiler with the null observer: the operators that launch nothing left unobserved."""

    def start(self, path):
        super().start(path)
        self.ext.null_observer(True, True)


class FloorNullHidden(Hidden, profilers.FloorRecordFunction):
    """The anchor with the operators that launch nothing left unobserved."""


class ShadowNullHidden(Hidden, ShadowNull):
    """Our session (no hook) plus the null observer with the operators that launch nothing hidden."""


class NoScope:
    """Another profiler with the workload's scopes left out."""

    def __init__(self, inner):
        self.inner = inner
        self.reports_kernels = inner.reports_kernels

    def start(self, path):
        return self.inner.start(path)

    def scope(self, name):
        return contextlib.nullcontext()

    def finalize(self):
        return self.inner.finalize()


class OursWithout(profilers.Ours):
    """``hook="torch"`` with parts switched off after start (``env``: set around the session)."""

    def __init__(self, modules=True, wrapper=True, callbacks=True, env=None, null=False, provider=True):
        super().__init__("shadow", hook="torch")
        self.modules, self.wrapper, self.callbacks, self.env = modules, wrapper, callbacks, dict(env or {})
        self.null, self.provider = null, provider

    def start(self, path):
        self.environ = mock.patch.dict(os.environ, self.env)
        self.environ.start()
        super().start(path)
        from proton_torch import native, ops

        if not self.modules:
            native.load().set_module_call(False)
        if not self.wrapper:
            ops._unpatch_backward(ops.STATE["patched"])
        if not self.callbacks:
            native.load().disable()
        self.ext = native.load()
        if self.null:
            self.ext.null_observer(True, True)
        if not self.provider:
            from proton_core.plugin_api import native_context_setters

            self.ext.set_channels(native_context_setters(), provide=False)

    def finalize(self):
        try:
            if self.null:
                self.ext.null_observer(False)
            return super().finalize()
        finally:
            self.environ.stop()


VARIANTS = {
    "shadow-null": ShadowNull,
    "shadow-noscope": lambda: NoScope(profilers.Ours("shadow")),
    "ours-torch-noscope": lambda: NoScope(profilers.Ours("shadow", hook="torch")),
    "ours-nocb": lambda: OursWithout(callbacks=False),
    "ours-nomod": lambda: OursWithout(modules=False),
    "ours-nowrap": lambda: OursWithout(wrapper=False),
    "ours-all": lambda: OursWithout(env={"PROTON_TORCH_OBSERVE_ALL": "1"}),
    "ours-noprov": lambda: OursWithout(env={"PROTON_TORCH_PROVIDER": "0"}),
    "floor-null-hidden": FloorNullHidden,
    "ours-empty": lambda: OursWithout(callbacks=False, null=True),
    "shadow-null-hidden": ShadowNullHidden,
    "ours-empty-nomod": lambda: OursWithout(callbacks=False, null=True, modules=False),
    "ours-empty-nowrap": lambda: OursWithout(callbacks=False, null=True, wrapper=False),
    "ours-empty-noprov": lambda: OursWithout(callbacks=False, null=True, provider=False),
}
profilers.PROFILERS.update(VARIANTS)

if __name__ == "__main__":
    sys.exit(torch_thread_split.main(sys.argv[1:]))
