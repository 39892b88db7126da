"""The hatchet sink: registers the hatchet JSON writer.

The format itself, writer and reader together, is :mod:`proton_core.formats.hatchet`.
"""

from __future__ import annotations

from ..formats import hatchet
from ..plugins import hookimpl


def write(profile, path: str) -> None:
    """The format's writer, with the root's ``metadata`` saying what the profile is (proton-view shows it)."""
    hatchet.write(profile, path, metadata=hatchet.metadata(profile))


@hookimpl
def proton_register_sinks(register):
    register("hatchet", write, extension="hatchet", data=("tree", "trace"),
             description="call tree as hatchet JSON (proton-view, hatchet)")
