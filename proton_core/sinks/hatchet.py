"""The hatchet sinks: hatchet JSON (``.hatchet``) and hatchet MessagePack (``.hatchet_msgpack``), as upstream.

The formats themselves, writer and reader together, are :mod:`proton_core.formats.hatchet`
and :mod:`proton_core.formats.hatchet_msgpack`.
"""

from __future__ import annotations

from ..formats import hatchet
from ..plugins import hookimpl


def write(profile, path: str) -> None:
    """The format's writer, with the root's ``metadata`` saying what the profile is (proton-view shows it)."""
    hatchet.write(profile, path, metadata=hatchet.metadata(profile))


def write_msgpack(profile, path: str) -> None:
    """The same document in MessagePack (upstream's ``hatchet_msgpack``), metadata and all."""
    from ..formats import hatchet_msgpack  # here: msgpack loads only for sessions that write it

    hatchet_msgpack.write(profile, path, metadata=hatchet.metadata(profile))


@hookimpl
def proton_register_sinks(register):
    register("hatchet", write, extension="hatchet", data=("tree", "trace"),
             description="call tree as hatchet JSON (proton-view, hatchet)")
    register("hatchet_msgpack", write_msgpack, extension="hatchet_msgpack", data=("tree", "trace"),
             description="call tree as hatchet MessagePack, as upstream's hatchet_msgpack (proton-view reads it)")
