"""States, upstream's ``triton.profiler.state``: ``state`` and its imperative ``enter_state``/``exit_state``.

A state is a suffix under the call path of everything recorded while it is set (kernels and scope
metrics alike): ``enter_scope("a"); enter_state("s"); enter_scope("b", metrics=m)`` files ``m`` under
``a/b/s``, as upstream.  States do not nest: the innermost wins; ``exit_state`` restores the state that
was set before the matching ``enter_state`` (upstream clears it), per thread.
"""

from __future__ import annotations

from .context import METADATA_SCOPE, THREAD
from .manager import MANAGER
from .scope import _check_name, state

__all__ = ["state", "enter_state", "exit_state", "metadata_state", "COMPUTE_METADATA_SCOPE_NAME"]

#: Upstream's name for the work a profiler hook does to compute launch metadata; viewers hide it
#: (proton_core.viewer.shape.METADATA_SCOPE is the same name).
COMPUTE_METADATA_SCOPE_NAME = METADATA_SCOPE


def _set(name: str | None) -> None:
    t = THREAD
    t.state = name
    ctx = t.recompute()
    if MANAGER.active:
        MANAGER.notify_context(ctx)


def enter_state(name: str) -> None:
    """Set this thread's state to ``name`` until the next ``exit_state``."""
    _check_name(name)
    saved = THREAD.__dict__.setdefault("saved_states", [])
    saved.append(THREAD.state)
    _set(name)


def exit_state() -> None:
    """Undo the last ``enter_state`` on this thread (with none open: clear the state, as upstream)."""
    saved = THREAD.__dict__.get("saved_states")
    _set(saved.pop() if saved else None)


def metadata_state() -> state:
    """``with proton.metadata_state(): ...``: kernels launched inside (a tensor metric's own reduction,
    ``a.sum()``) are filed under :data:`COMPUTE_METADATA_SCOPE_NAME`, which viewers hide, not among the
    program's kernels.  Upstream main's name (after 3.6); its semantics here are read from upstream's tests."""
    return state(COMPUTE_METADATA_SCOPE_NAME)
