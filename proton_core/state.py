"""States, upstream's ``triton.profiler.state``: ``state`` and its imperative ``enter_state``/``exit_state``.

A state is a suffix under the call path of everything recorded while it is set (kernels and scope
metrics alike): ``enter_scope("a"); enter_state("s"); enter_scope("b", metrics=m)`` files ``m`` under
``a/b/s``, as upstream.  States do not nest: the innermost wins; ``exit_state`` restores the state that
was set before the matching ``enter_state`` (upstream clears it), per thread.
"""

from __future__ import annotations

from .context import THREAD
from .manager import MANAGER
from .scope import _check_name, state

__all__ = ["state", "enter_state", "exit_state"]


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
