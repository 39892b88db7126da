"""The hatchet sink: registers the hatchet JSON writer.

The format itself, writer and reader together, is :mod:`proton_core.formats.hatchet`.
"""

from __future__ import annotations

from ..formats import hatchet
from ..plugins import hookimpl


@hookimpl
def proton_register_sinks(register):
    register("hatchet", hatchet.write, extension="hatchet", data=("tree", "trace"),
             description="call tree as hatchet JSON (proton-view, hatchet)")
