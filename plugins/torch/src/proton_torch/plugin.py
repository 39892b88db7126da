"""Registers ``hook="torch"`` and keeps the native operator contexts matched to the sessions.

Cheap to import: nothing here imports torch or the extension; the context source is built when a
session asks for it, and each session hook acts only while ``hook="torch"`` runs natively
(``proton_torch.ops.active()``).
"""

from __future__ import annotations

from proton_core import hookimpl

from . import ops


def _torch():
    from .hook import TorchSource

    return TorchSource()


@hookimpl
def proton_register_contexts(register):
    register("torch", _torch, description="PyTorch aten operators and nn.Module paths above their kernels")


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
