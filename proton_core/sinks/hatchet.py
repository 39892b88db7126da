"""Hatchet JSON, byte-for-byte the schema upstream Proton writes.

``[root, device_info]``: ``root`` is a literal node tree loadable with
``hatchet.GraphFrame.from_literal``; ``device_info`` maps device type to
device id to its properties.
"""

from __future__ import annotations

import json

from ..plugins import hookimpl


def write_hatchet(profile, path: str) -> None:
    document = [profile.tree.to_literal(), profile.device_info()]
    with open(path, "w") as f:
        json.dump(document, f, separators=(",", ":"))


@hookimpl
def proton_register_sinks(register):
    register("hatchet", write_hatchet, extension="hatchet", data=("tree", "trace"),
             description="call tree as hatchet JSON (proton-viewer, hatchet)")
