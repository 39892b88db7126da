"""The one module a Proton plugin imports from (with ``proton_core.hookimpl``).

Everything a backend, a context source or a sink needs is here; the rest of
``proton_core`` is internal and may change.  ``docs/plugins.md`` is the guide.

Backends
    :class:`Backend` (the contract), :class:`Batch` (what ``flush`` returns),
    the trie node kinds ``NODE_CONTEXT``/``NODE_FRAME``/``NODE_CAPTURED_AT``,
    :func:`register_unavailable` for a backend that only explains why it
    cannot run, :func:`internal_paths` for native frame filters.
Context sources
    :class:`ContextSource` (layered, ``hook=``), :class:`BaseContext`
    (``context=``), :func:`enter_scope`/:func:`exit_scope` (``triton_op=True``
    opens an op that names the next kernel), :func:`is_active` (and
    ``ACTIVITY.any``, the same as an attribute read for per-launch hooks),
    :func:`scope_depth`, :func:`open_scopes`, :func:`current_op`, :func:`thread_state`, :class:`SharedInstall` for a
    framework hook shared by sessions, :func:`register_internal_path` to hide
    a plugin's own frames from python-context paths.
Native scope sources (scopes opened by native code on threads without the GIL)
    :func:`open_scope`/:func:`close_scope` (the least-cost scope, for per-event hooks),
    :func:`open_op`/:func:`close_op`, :func:`metric_name` and :func:`add_numbers_here` (the same for
    per-launch ops and their metrics), :func:`open_counted_op` (both in one cached step),
    :func:`register_context_ids` (ids a plugin interns itself; prefer ``reserve_context_ids``),
    :func:`native_context_setters` (the running backends' C setters, capsules
    named ``proton.native_context.v1``), :func:`innermost_scope`, :func:`register_settler` (frames a
    plugin keeps above the core's scopes become scopes before anything opens under them),
    :func:`context_names`,
    :func:`add_cpu_time_at`, :func:`add_scope_event`,
    :func:`open_sessions`.
Sinks and lifecycle hooks
    :class:`Profile` with its :class:`Tree` (of :class:`TreeNode`) and
    :class:`Trace` (of :class:`KernelEvent`, :class:`ScopeEvent` and :class:`KernelSlice`), and the
    :class:`Session` the lifecycle hooks receive.
Errors and messages
    :class:`ProtonError` (one actionable line), :class:`BackendUnavailable`,
    :class:`PluginError`; :func:`warn` writes one line through the ``proton`` logger.
"""

from __future__ import annotations

from .backend import CAPTURED_AT, NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, Backend, Batch, register_unavailable
from .context import METADATA_SCOPE, SETTLERS, THREAD, ContextSource, settle, capture_frames, internal_paths, is_internal, register_internal_path
from .contexts.base import BaseContext
from .model import Profile, Trace, Tree
from .model.trace import KernelEvent, KernelSlice, ScopeEvent
from .model.tree import Node as TreeNode
from .errors import BackendUnavailable, PluginError, ProtonError
from .launch_ops import open_counted_op
from .log import warn
from .follow.child import start_in_program
from .exit_flush import write_open_sessions
from .plugins import hookimpl
from .scope import CPU_TIME, close_op_unchecked, close_unchecked, enter_scope, exit_scope, open_op_unchecked, open_unchecked
from .activity import ACTIVITY
from .manager import MANAGER
from .session_state import Session
from .shared_install import SharedInstall
from .native_api import NATIVE_CONTEXT_CAPSULE, native_context_setters, reserve_context_ids

__all__ = [
    "hookimpl",
    # backends
    "Backend", "Batch", "NODE_CONTEXT", "NODE_FRAME", "NODE_CAPTURED_AT", "CAPTURED_AT", "register_unavailable",
    "internal_paths",
    # context sources
    "ContextSource", "BaseContext", "enter_scope", "exit_scope", "is_active", "ACTIVITY", "scope_depth",
    "open_scopes", "current_op", "thread_state",
    "SharedInstall", "register_internal_path", "is_internal", "capture_frames",
    # native scope sources
    "register_context_ids", "native_context_setters", "innermost_scope", "register_settler", "unregister_settler",
    "context_names", "open_scope", "METADATA_SCOPE",
    "close_scope", "open_op", "close_op", "metric_name", "add_numbers_here", "open_counted_op",
    "add_cpu_time_at",
    "add_scope_event", "open_sessions", "NATIVE_CONTEXT_CAPSULE",
    # data and sessions
    "Profile", "Tree", "TreeNode", "Trace", "KernelEvent", "ScopeEvent", "KernelSlice", "Session",
    # errors and messages
    "ProtonError", "BackendUnavailable", "PluginError", "warn",
    # programs without Python (the injection library's session)
    "start_in_program", "write_open_sessions",
]


def is_active() -> bool:
    """Whether any session is recording now (per-launch hooks read ``ACTIVITY.any`` instead of calling)."""
    return ACTIVITY.any


def scope_depth() -> int:
    """How many scopes are open on the calling thread (frames plugins keep settled into scopes first)."""
    settle()
    return len(THREAD.stack)


def thread_state():
    """The calling threads' annotation state, a ``threading.local``: read ``.op`` (the open op's name or
    None) where a function call per launch costs too much; never write to it."""
    return THREAD


def open_scopes() -> list[str]:
    """Names of the scopes open on the calling thread, outermost first (frames plugins keep settled into
    scopes first)."""
    settle()
    return [name for _, name, _ in THREAD.stack]


def current_op() -> str | None:
    """The op the calling thread has open (``enter_scope(..., triton_op=True)``), or None."""
    return THREAD.op


# ------------------------------------------------------ native scope sources ----
def register_context_ids(first_id: int, resolve) -> None:
    """Context ids from ``first_id`` (above 2**32) up are scopes a plugin interned itself (natively,
    without the GIL); ``resolve(id)`` returns ``(parent id, name)`` or None.  Prefer
    :func:`~proton_core.native_api.reserve_context_ids`, which picks a range no other plugin uses."""
    from .context import TREE

    TREE.register_foreign(first_id, resolve)


def context_names(context_id: int) -> list[str]:
    """The names along a context id's path, outermost first (scopes, states, ops)."""
    from .context import TREE

    return [name for _, name in TREE.path(context_id)]


def innermost_scope() -> int:
    """The context id of the innermost scope open on the calling thread (0: none)."""
    settle()
    return THREAD.stack[-1][0] if THREAD.stack else 0


def register_settler(settler) -> None:
    """Have ``settler()`` called (GIL held, on the thread concerned) before the core, or a native copy of
    its steps (the protocols below), reads a thread's innermost context to open a scope, state or op
    under it: a plugin keeping frames of its own above the core's scopes, natively and cheaply, turns
    them into scopes of the core's there (:func:`open_scope`), outermost first, so that what opens nests
    under them. It must be cheap when the thread has none, and must not open anything else. Registering
    the same callable again does nothing."""
    if settler not in SETTLERS:
        SETTLERS.append(settler)


def unregister_settler(settler) -> None:
    """Undo :func:`register_settler` (nothing if it is not registered)."""
    if settler in SETTLERS:
        SETTLERS.remove(settler)


#: open_scope(name) -> context id: open scope ``name`` on the calling thread at the least cost, for
#: per-event hooks (NVTX ranges) that run only while a session is open.  Unlike :func:`enter_scope`,
#: nothing is checked (``name`` must be a non-empty ``str``) and the scope opens even while every
#: session is deactivated (it then records nothing), so a later ``activate`` finds the right nesting.
open_scope = open_unchecked

#: close_scope(context_id) -> bool: close the calling thread's innermost scope if it is
#: ``context_id`` (from :func:`open_scope`); False, closing nothing, if another scope is innermost.
close_scope = close_unchecked


#: open_op(name) -> context id: ``enter_scope(name, triton_op=True)`` for per-launch hooks that
#: run only while a session is active: no checks (``name`` a non-empty ``str``), no metrics.
open_op = open_op_unchecked

#: close_op(): ``exit_scope(triton_op=True)`` for per-launch hooks.
close_op = close_op_unchecked


def metric_name(key: str):
    """``key`` parsed and checked as a metric name (cached; a bad one raises ProtonError saying why)."""
    from .metrics import parse_name

    return parse_name(key)


#: add_numbers_here([(metric_name(key), value)]): add at the calling thread's context in every active
#: session, at least cost; the values must already be non-negative finite ints or floats (tensors and
#: anything else go through ``enter_scope(metrics=...)``).
add_numbers_here = MANAGER.add_numbers_here


def add_cpu_time_at(context_id: int, ns: int) -> None:
    """Add ``ns`` of host time (``cpu_time (ns)``, the metric of ``cpu_timed_scope``) at the scope
    ``context_id``, in every active session (from any Python thread)."""
    parsed = [(CPU_TIME, ns)]
    for session in MANAGER.active:
        session.add_metrics(session.base.spell_context(context_id), parsed)


def add_scope_event(context_id: int, name: str, thread_id: int, start_ns: int, end_ns: int) -> None:
    """A range (``end_ns == start_ns``: an instant) for every tracing session (``data="trace"``), under the
    scope ``context_id``; times in the ``time.monotonic_ns()`` clock."""
    for session in MANAGER.tracing:
        path = tuple(n for _, n in session.base.spell_context(context_id))
        session.profile.trace.scopes.append(ScopeEvent(path, name, thread_id, start_ns, end_ns))


def open_sessions() -> list:
    """The sessions open now (active or not), oldest first."""
    with MANAGER.lock:
        return [s for s in MANAGER.sessions.values() if not s.closed]
