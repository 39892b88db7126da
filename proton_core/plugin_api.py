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
Sinks and lifecycle hooks
    :class:`Profile` with its :class:`Tree` (of :class:`TreeNode`) and
    :class:`Trace` (of :class:`KernelEvent` and :class:`ScopeEvent`), and the
    :class:`Session` the lifecycle hooks receive.
Errors and messages
    :class:`ProtonError` (one actionable line), :class:`BackendUnavailable`,
    :class:`PluginError`; :func:`warn` writes one line through the ``proton`` logger.
"""

from __future__ import annotations

from .backend import CAPTURED_AT, NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, Backend, Batch, register_unavailable
from .context import THREAD, ContextSource, capture_frames, internal_paths, is_internal, register_internal_path
from .contexts.base import BaseContext
from .data import Profile, Trace, Tree
from .data.trace import KernelEvent, ScopeEvent
from .data.tree import Node as TreeNode
from .errors import BackendUnavailable, PluginError, ProtonError
from .log import warn
from .plugins import hookimpl
from .scope import enter_scope, exit_scope
from .session import ACTIVITY, Session
from .shared_install import SharedInstall

__all__ = [
    "hookimpl",
    # backends
    "Backend", "Batch", "NODE_CONTEXT", "NODE_FRAME", "NODE_CAPTURED_AT", "CAPTURED_AT", "register_unavailable",
    "internal_paths",
    # context sources
    "ContextSource", "BaseContext", "enter_scope", "exit_scope", "is_active", "ACTIVITY", "scope_depth",
    "open_scopes", "current_op", "thread_state",
    "SharedInstall", "register_internal_path", "is_internal", "capture_frames",
    # data and sessions
    "Profile", "Tree", "TreeNode", "Trace", "KernelEvent", "ScopeEvent", "Session",
    # errors and messages
    "ProtonError", "BackendUnavailable", "PluginError", "warn",
]


def is_active() -> bool:
    """Whether any session is recording now (per-launch hooks read ``ACTIVITY.any`` instead of calling)."""
    return ACTIVITY.any


def scope_depth() -> int:
    """How many scopes are open on the calling thread."""
    return len(THREAD.stack)


def thread_state():
    """The calling threads' annotation state, a ``threading.local``: read ``.op`` (the open op's name or
    None) where a function call per launch costs too much; never write to it."""
    return THREAD


def open_scopes() -> list[str]:
    """Names of the scopes open on the calling thread, outermost first."""
    return [name for _, name, _ in THREAD.stack]


def current_op() -> str | None:
    """The op the calling thread has open (``enter_scope(..., triton_op=True)``), or None."""
    return THREAD.op
