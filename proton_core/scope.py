"""Scopes, states and ops: the user's annotations of the call path.

Scopes nest per thread.  A state is a suffix that the innermost ``state``
sets for everything below it; an op (entered by launch hooks such as the
Triton one) names the next kernel node and carries that launch's metrics.
When no session is active these calls return at once.
"""

from __future__ import annotations

import functools
import threading
import time

from .context import SCOPE, THREAD, TREE
from .errors import ProtonError
from .metrics import parse_metrics, parse_name
from .data.trace import ScopeEvent
from .session import MANAGER

CPU_TIME = parse_name("cpu_time (ns)(exc)", allow_reserved=True)


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ProtonError(f"scope name must be a non-empty string, not {name!r}")


def _record_trace(name: str, start_ns: int, path_of) -> None:
    end = time.monotonic_ns()
    tid = threading.get_native_id()
    for session in MANAGER.active:
        if session.data == "trace":
            trace = session.profile.trace
            trace.thread_names.setdefault(tid, threading.current_thread().name)
            trace.scopes.append(ScopeEvent(path_of(session), name, tid, start_ns, end))


def enter_scope(name: str, *, triton_op: bool = False, metrics=None) -> int:
    """Open a scope (or, with ``triton_op``, an op) on this thread; return its id (-1: profiling off)."""
    _check_name(name)
    parsed = parse_metrics(metrics)
    if not MANAGER.active:
        return -1
    t = THREAD
    if triton_op:
        t.op = name
        ctx = t.recompute()
    else:
        ctx = TREE.child(t.stack[-1][0] if t.stack else 0, SCOPE, name)
        t.stack.append((ctx, name, time.monotonic_ns()))
        t.recompute()
    MANAGER.notify_context(t.current)
    if parsed:
        MANAGER.add_metrics_here(parsed)
    return ctx


def exit_scope(name: str | None = None, *, triton_op: bool = False, metrics=None) -> int:
    """Close the innermost scope (or the op); ``name``, if given, must match it."""
    parsed = parse_metrics(metrics)
    t = THREAD
    if triton_op:
        t.op = None
        MANAGER.notify_context(t.recompute())
        return -1
    if not t.stack:
        if MANAGER.active:
            raise ProtonError(f"exit_scope({name!r}) has no open scope on this thread: call enter_scope first")
        return -1
    ctx, top, start = t.stack[-1]
    if name is not None and name != top:
        raise ProtonError(
            f"exit_scope({name!r}) does not match the innermost open scope {top!r}: exit scopes in reverse order"
        )
    if parsed and MANAGER.active:
        MANAGER.add_metrics_here(parsed)
    if MANAGER.active:
        _record_trace(top, start, lambda s: tuple(n for _, n in s.base.here()))
    t.stack.pop()
    MANAGER.notify_context(t.recompute())
    return ctx


class scope:
    """A named region, as a context manager or a decorator.

    ``metrics`` (``{name: number}``) are added to the scope's node each time
    it is entered.
    """

    cpu_timed = False

    def __init__(self, name: str, metrics=None) -> None:
        _check_name(name)
        parse_metrics(metrics)  # fail at the call, not later
        self.name = name
        self.metrics = metrics
        self._local = threading.local()

    def __enter__(self):
        opened = enter_scope(self.name, metrics=self.metrics) != -1
        stack = getattr(self._local, "opened", None)
        if stack is None:
            stack = self._local.opened = []
        stack.append((opened, time.perf_counter_ns()))
        return self

    def __exit__(self, *exc) -> None:
        opened, start = self._local.opened.pop()
        if not opened or not THREAD.stack:
            return
        if self.cpu_timed and MANAGER.active:
            MANAGER.add_metrics_here([(CPU_TIME, time.perf_counter_ns() - start)])
        exit_scope(self.name)

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


class cpu_timed_scope(scope):
    """A scope that also records its host wall time as ``cpu_time (ns)`` (exclusive)."""

    cpu_timed = True


class state:
    """Set this thread's state: a suffix added under the call path of every kernel inside.

    States do not nest: the innermost one wins and the outer one is restored on exit.
    """

    def __init__(self, name: str) -> None:
        _check_name(name)
        self.name = name
        self._local = threading.local()

    def __enter__(self):
        t = THREAD
        saved = getattr(self._local, "saved", None)
        if saved is None:
            saved = self._local.saved = []
        saved.append(t.state)
        t.state = self.name
        t.recompute()
        if MANAGER.active:
            MANAGER.notify_context(t.current)
        return self

    def __exit__(self, *exc) -> None:
        t = THREAD
        t.state = self._local.saved.pop()
        t.recompute()
        if MANAGER.active:
            MANAGER.notify_context(t.current)

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
