"""Scopes, states and ops: the user's annotations of the call path.

Scopes nest per thread.  A state is a suffix that the innermost ``state``
sets for everything below it; an op (entered by launch hooks such as the
Triton one) names the next kernel node and carries that launch's metrics.
When no session is active these calls return at once.
"""

from __future__ import annotations

import functools
import os
import threading
import time

from .context import OP, ROOT_ID, SCOPE, SETTLERS, THREAD, TREE, settle
from . import unbalanced
from .errors import ProtonError
from .metrics import parse_metrics, parse_name
from .manager import MANAGER
from .model.trace import ScopeEvent

CPU_TIME = parse_name("cpu_time (ns)(exc)", allow_reserved=True)
_now_ns = time.monotonic_ns


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ProtonError(f"scope name must be a non-empty string, not {name!r}")


def _record_trace(name: str, start_ns: int) -> None:
    """A closed scope becomes an event of every tracing session (data="trace")."""
    end = _now_ns()
    tid = threading.get_native_id()
    for session in MANAGER.tracing:
        trace = session.profile.trace
        trace.thread_names.setdefault(tid, threading.current_thread().name)
        path = tuple(n for _, n in session.base.here())
        trace.scopes.append(ScopeEvent(path, name, tid, start_ns, end))


# _publish, _push and _pop take this thread's attributes as a dict (``THREAD.__dict__``: one
# thread-local read, then dict items): a training step opens a few scopes, and each thread-local read
# shows in its time (cold caches after the GPU launches around them).
def _publish(t: dict, innermost: int) -> None:
    """Make this thread's current context the one under scope ``innermost`` and tell the backends."""
    if t["state"] is None and t["op"] is None:
        t["current"] = innermost
    else:
        innermost = THREAD.recompute()
    for setter in MANAGER.setters:
        setter(innermost)


def _push(name: str, ids: dict | None = None) -> int:
    """Open scope ``name`` on this thread (profiling is on); ``ids`` caches parent id -> its id."""
    if SETTLERS:
        settle()
    t = THREAD.__dict__
    stack = t["stack"]
    parent = stack[-1][0] if stack else ROOT_ID
    ctx = ids.get(parent) if ids is not None else None
    if ctx is None:
        ctx = _INDEX.get((parent, SCOPE, name)) or TREE.child(parent, SCOPE, name)
        if ids is not None:
            ids[parent] = ctx
    stack.append((ctx, name, _now_ns()))
    _publish(t, ctx)
    return ctx


_INDEX = TREE._index  # (parent, kind, name) -> id: read directly on the per-event paths
_ENTRIES = TREE._entries  # id -> (parent, kind, name), likewise


def _announce(t, innermost: int, plain: bool) -> None:
    """``_publish`` when the caller already knows whether a state or op sits on top (``plain``: none)."""
    if plain:
        t.current = innermost
        for setter in MANAGER.setters:
            setter(innermost)
    else:
        _publish(t.__dict__, innermost)


def open_unchecked(name: str) -> int:
    """``_push`` for per-event hooks: a profiling session is on and ``name`` is a non-empty str."""
    if SETTLERS:
        settle()
    t = THREAD
    stack = t.stack
    parent = stack[-1][0] if stack else ROOT_ID
    plain = t.current == parent  # no state or op on top (they would make current another id): one read
    ctx = _INDEX.get((parent, SCOPE, name)) or TREE.child(parent, SCOPE, name)
    stack.append((ctx, name, _now_ns()))
    _announce(t, ctx, plain)
    return ctx


def close_unchecked(ctx: int) -> bool:
    """``_pop`` for per-event hooks: close the innermost scope if it is ``ctx``; False if it is not."""
    t = THREAD
    stack = t.stack
    if not stack or stack[-1][0] != ctx:
        return False
    if MANAGER.tracing:
        _record_trace(stack[-1][1], stack[-1][2])
    plain = t.current == ctx
    stack.pop()
    _announce(t, stack[-1][0] if stack else ROOT_ID, plain)
    return True


def open_op_unchecked(name: str) -> int:
    """``enter_scope(name, triton_op=True)`` for per-launch hooks: no checks, no metrics."""
    if SETTLERS:
        settle()
    t = THREAD
    if t.op is None:
        base = t.current  # the context without an op, which close_op returns to
    else:
        t.op = None
        base = t.recompute()
    t.op = name
    ctx = _INDEX.get((base, OP, name))
    if ctx is None:
        ctx = TREE.child(base, OP, name)
    t.current = ctx
    for setter in MANAGER.setters:
        setter(ctx)
    return ctx


def close_op_unchecked() -> None:
    """``exit_scope(triton_op=True)`` for per-launch hooks."""
    t = THREAD
    t.op = None
    ctx = t.current
    entry = _ENTRIES[ctx] if ctx < len(_ENTRIES) else None
    if entry is not None and entry[1] == OP:
        ctx = entry[0]  # an op is the innermost element of its context: back to what it was opened in
    else:
        ctx = t.recompute()
    t.current = ctx
    for setter in MANAGER.setters:
        setter(ctx)


def _mismatch(name: str, top: str) -> int:
    """An exit that does not match the innermost scope: an error in strict mode; else the scopes opened inside
    ``name`` are closed with it (or, ``name`` not open here, nothing is), counted and said once per call site.
    Returns the closed scope's id, or -1."""
    return _pop(None) if _unwind_above(name, top) else -1


def _unwind_above(name: str, top: str) -> bool:
    """Close the scopes opened inside this thread's innermost scope ``name`` (see _mismatch); False: ``name`` is
    not open on this thread and nothing was closed."""
    if unbalanced.strict():
        raise ProtonError(
            f"exit_scope({name!r}) does not match the innermost open scope {top!r}: exit scopes in reverse order"
        )
    stack = THREAD.stack
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][1] == name), None)
    if at is None:
        unbalanced.report(f"scope {name!r} exited but not open on this thread (innermost: {top!r}); ignored")
        return False
    unbalanced.report(f"scope {name!r} exited with {len(stack) - 1 - at} scope(s) opened inside it still open "
                      f"(innermost: {top!r}); closed them with it")
    while len(stack) > at + 1:
        _pop(None)
    return True


def _take_entry(obj):
    """Remove and return ``obj``'s latest entry in this thread's ``opened`` list; None: it has none here."""
    opened = THREAD.opened
    if opened and opened[-1][0] is obj:
        return opened.pop()
    for i in range(len(opened) - 1, -1, -1):  # interleaved generators: this object's own entry
        if opened[i][0] is obj:
            return opened.pop(i)
    return None


def _pop(name: str | None) -> int:
    """Close the innermost scope of this thread; ``name``, if given, should be its name (see _mismatch)."""
    t = THREAD.__dict__
    stack = t["stack"]
    ctx, top, start = stack[-1]
    if name is not None and name != top:
        return _mismatch(name, top)
    if MANAGER.tracing:
        _record_trace(top, start)
    stack.pop()
    _publish(t, stack[-1][0] if stack else ROOT_ID)
    return ctx


def _enter_scope(name: str, *, triton_op: bool = False, metrics=None) -> int:
    """Open a scope (or, with ``triton_op``, an op) on this thread; return its id (-1: profiling off).

    The Python path of ``enter_scope``: every case; ``_scope_fast.enter_scope`` takes the plain ones in C."""
    _check_name(name)
    parsed = parse_metrics(metrics)
    if not MANAGER.active:
        return -1
    if triton_op:
        t = THREAD
        t.op = name
        ctx = t.recompute()
        MANAGER.notify_context(ctx)
    else:
        ctx = _push(name)
    if parsed:
        MANAGER.add_metrics_here(parsed)
    return ctx


def _exit_scope(name: str | None = None, *, triton_op: bool = False, metrics=None) -> int:
    """Close the innermost scope (or the op); ``name``, if given, must match it.  The Python path of ``exit_scope``."""
    parsed = parse_metrics(metrics)
    t = THREAD
    if triton_op:
        t.op = None
        MANAGER.notify_context(t.recompute())
        return -1
    if not t.stack:
        if MANAGER.active:
            if unbalanced.strict():
                raise ProtonError(f"exit_scope({name!r}) has no open scope on this thread: call enter_scope first")
            unbalanced.report(f"exit_scope({name!r}) with no scope open on this thread; ignored")
        return -1
    if name is not None and name != t.stack[-1][1] and not _unwind_above(name, t.stack[-1][1]):
        return -1  # not open here: no metric lands
    if parsed and MANAGER.active:
        MANAGER.add_metrics_here(parsed)
    return _pop(None)  # name checked above


def _init_check(name, metrics) -> None:
    """The constructor's checks: a non-empty str name; metrics parsed now, to fail at the call, not later."""
    if name.__class__ is not str or not name:
        _check_name(name)
    if metrics is not None:
        parse_metrics(metrics)


def _init(self, name: str, metrics=None) -> None:
    """``scope.__init__`` in Python."""
    _init_check(name, metrics)
    self.name = name
    self.metrics = metrics
    self._ids = None  # {parent context id: this scope's id under it}, from the second entry (ids never change)


def _enter(self):
    """``scope.__enter__`` in Python: every case (the C path takes the plain ones, the same way)."""
    opened = THREAD.opened
    if not MANAGER.active:
        opened.append((self, False, 0))
        return self
    ids = self._ids
    if ids is None:
        ids = self._ids = {}
    _push(self.name, ids)
    if self.metrics is not None:
        parsed = parse_metrics(self.metrics)
        if parsed:
            MANAGER.add_metrics_here(parsed)
    opened.append((self, True, time.perf_counter_ns() if self.cpu_timed else 0))
    return self


def _exit(self, *exc) -> None:
    """``scope.__exit__`` in Python."""
    entry = _take_entry(self)
    if entry is None:  # entered on another thread
        unbalanced.exited_elsewhere(self)
        return
    _, pushed, start = entry
    if not pushed or not THREAD.stack:
        return
    if self.cpu_timed and MANAGER.active:
        MANAGER.add_metrics_here([(CPU_TIME, time.perf_counter_ns() - start)])
    _pop(self.name)


def _pure_python_asked() -> bool:
    """``PROTON_PURE_PYTHON=1``: scopes in Python even where the C path is built (comparisons, debugging)."""
    return os.environ.get("PROTON_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no", "off")


def _load_fast():
    """``proton_core._scope_fast`` (csrc/scope_fast.c), unless it was not built or PROTON_PURE_PYTHON is set."""
    if _pure_python_asked():
        return None
    try:
        from . import _scope_fast
    except ImportError:
        return None
    return _scope_fast


_FAST = _load_fast()


class _PythonScope:
    __init__ = _init
    __enter__ = _enter
    __exit__ = _exit


class scope(_FAST.ScopeBase if _FAST is not None else _PythonScope):
    """A named region, as a context manager or a decorator.

    ``metrics`` (``{name: number}``) are added to the scope's node each time
    it is entered.  One object may be entered again while open (recursion, a
    decorated function) and from several threads: what each entry did is kept
    on the entering thread (``ThreadContext.opened``), not on the object.
    ``scope(name, metrics=None)``; creating, entering and leaving run in C where
    ``proton_core._scope_fast`` was built (the plain cases; the rest, and
    everything without it, in ``_init``/``_enter``/``_exit``).
    """

    cpu_timed = False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


if _FAST is not None:
    enter_scope, exit_scope = _FAST.enter_scope, _FAST.exit_scope
else:
    enter_scope, exit_scope = _enter_scope, _exit_scope


def scope_objects() -> dict:
    """What ``_scope_fast``'s scope type and functions hand over: the plain type they run natively and the
    Python path's functions for everything else (the thread's state itself is the engine's, engine_objects)."""
    return {"plain_type": scope, "enter": _enter, "exit": _exit, "init_check": _init_check,
            "enter_scope": _enter_scope, "exit_scope": _exit_scope}


def _current() -> int:
    """The calling thread's published context (the C API's ``current``, Python path)."""
    return THREAD.current


def _innermost() -> int:
    """The innermost scope open on the calling thread, 0 for none (the C API's ``innermost_scope``)."""
    if SETTLERS:
        settle()
    stack = THREAD.stack
    return stack[-1][0] if stack else ROOT_ID


def engine_objects(pure: bool) -> dict:
    """What the scope engine's C API (``_scope_fast._C_API``, proton_core/include/proton_core/scope_api.h)
    acts on: the Python path's objects, and its functions for every case the C side hands back.
    ``pure``: every call goes to those functions (PROTON_PURE_PYTHON)."""
    from .context import OP
    from .launch_ops import _CLEARS, _OPS, open_counted_op
    from .activity import ACTIVITY

    return {
        "thread": THREAD, "index": _INDEX, "child": TREE.child, "scope_kind": SCOPE, "op_kind": OP,
        "manager": MANAGER, "activity": ACTIVITY, "entries": _ENTRIES, "settlers": SETTLERS,
        "open_scope": open_unchecked, "close_scope": close_unchecked, "open_op": open_op_unchecked,
        "close_op": close_op_unchecked, "open_counted_op": open_counted_op, "ops": _OPS, "clears": _CLEARS,
        "current": _current, "innermost_scope": _innermost, "reserve_ids": TREE.reserve, "pure": pure,
    }


def _configure_engine() -> None:
    """Back the C API with this module's objects, wherever the extension was built (forced pure: all in Python)."""
    try:
        from . import _scope_fast
    except ImportError:
        return
    _scope_fast.configure_engine(engine_objects(pure=_pure_python_asked()))


def use_fast(on: bool = True) -> bool:
    """Enter and leave plain scopes in C (``on``) or always in Python; False where the C path is not built."""
    if _FAST is None:
        return False
    _FAST.configure(scope_objects() if on else None)
    return on


_configure_engine()
use_fast(True)


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

    def __enter__(self):
        t = THREAD
        t.opened.append((self, t.state, 0))
        t.state = self.name
        ctx = t.recompute()
        if MANAGER.active:
            MANAGER.notify_context(ctx)
        return self

    def __exit__(self, *exc) -> None:
        t = THREAD
        entry = _take_entry(self)
        if entry is None:  # entered on another thread: that thread keeps its state
            unbalanced.exited_elsewhere(self)
            return
        t.state = entry[1]
        ctx = t.recompute()
        if MANAGER.active:
            MANAGER.notify_context(ctx)

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
