"""Scope bookkeeping errors never end the program: they are repaired, counted and said once per call site.

A scope exited out of order (a generator that yields inside its own scope, ``with scope("step"): next(it)``),
exited twice, exited with none open, or exited on another thread than it was entered on is a bug of the
program's annotations, not of its work: a profiler must not end a training run for it.  The core repairs the
thread's scopes (closing the ones opened inside the exited one), adds one to ``unbalanced_scopes`` at the root
of every active session's profile, and writes one line per call site.  ``PROTON_STRICT_SCOPES=1`` makes each
of them a ``ProtonError`` instead (for tests).
"""

from __future__ import annotations

import os
import sys
import threading

from . import log
from .context import STATE, THREAD, TREE, is_internal, thread_states
from .errors import ProtonError
from .metrics import parse_name

#: The root metric counting them, in every active session's profile.
COUNT = parse_name("unbalanced_scopes", allow_reserved=True)

_said: set = set()  # call sites already warned about
_lock = threading.Lock()


def strict() -> bool:
    """``PROTON_STRICT_SCOPES=1``: bookkeeping errors raise (today's error, for tests)."""
    return os.environ.get("PROTON_STRICT_SCOPES", "").strip().lower() in ("1", "true", "yes", "on")


def _call_site() -> str:
    """``file:line`` of the program's frame that made the call (the profiler's own frames skipped)."""
    frame = sys._getframe(1)
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


def report(what: str) -> None:
    """Count one bookkeeping error in every active session and say ``what`` once for the caller's site."""
    from .manager import MANAGER

    for session in MANAGER.active:
        session.add_metrics((), [(COUNT, 1)])
    site = _call_site()
    with _lock:
        if site in _said:
            return
        _said.add(site)
    log.warn(f"{what}, at {site}; counted in the profile's 'unbalanced_scopes' (said once per place; "
             "PROTON_STRICT_SCOPES=1 makes it an error)")


def exited_elsewhere(obj) -> None:
    """``obj`` (a scope or state) is exited on a thread it was not entered on: close it on the thread that
    entered it, with the scopes opened inside it there, so that thread's later kernels are not filed under it."""
    if strict():
        raise ProtonError(f"{type(obj).__name__}({getattr(obj, 'name', '?')!r}) exited on another thread than "
                          "it was entered on, or exited twice: enter and exit it on one thread")
    owner = entry = None
    for state in thread_states():
        opened = state.get("opened", ())
        for i in range(len(opened) - 1, -1, -1):
            if opened[i][0] is obj:
                owner, entry = state, opened.pop(i)
                if entry[1] is True:  # the scopes entered inside it close with it: their own exits find them closed
                    opened[i:] = [e for e in opened[i:] if e[1] is not True and e[1] is not False]
                break
        if owner is not None:
            break
    name = getattr(obj, "name", "?")
    if owner is None:
        report(f"{type(obj).__name__}({name!r}) exited but not open (exited twice?); ignored")
        return
    if entry[1] is True:  # a scope that pushed: unwind the owner's stack through it
        stack = owner["stack"]
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][1] == name), None)
        if at is not None:
            del stack[at:]
    elif entry[1] is not False:  # a state's entry holds the state it replaced: that one comes back
        owner["state"] = entry[1]
    owner["current"] = _recompute(owner)
    report(f"{type(obj).__name__}({name!r}) exited on another thread than it was entered on; closed on its own "
           "thread (which publishes it at its next scope, state or op)")


def _recompute(state: dict) -> int:
    """``ThreadContext.recompute`` for another thread's state (no setters: they act on the calling thread)."""
    stack = state["stack"]
    ctx = stack[-1][0] if stack else 0
    if state.get("state") is not None:
        ctx = TREE.child(ctx, STATE, state["state"])
    if state.get("op") is not None:
        from .context import OP

        ctx = TREE.child(ctx, OP, state["op"])
    return ctx
