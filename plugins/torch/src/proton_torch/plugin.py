"""Keeps the native operator contexts matched to the sessions (backends' setters, tracing).

Cheap to import: nothing here imports torch or the extension; each hook acts only while
``hook="torch"`` runs natively (``proton_torch.ops.active()``).
"""

from __future__ import annotations

from proton_core import hookimpl

from . import ops


@hookimpl
def proton_session_started(session):
    if ops.active():
        ops.refresh()


@hookimpl
def proton_session_finalizing(session):
    if ops.active() and getattr(session, "data", None) == "trace":
        ops.drain()


@hookimpl
def proton_session_finalized(session, paths):
    if ops.active():
        ops.refresh()
