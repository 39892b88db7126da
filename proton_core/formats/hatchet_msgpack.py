"""``hatchet_msgpack``: the hatchet document in MessagePack, as upstream Proton writes it (``.hatchet_msgpack``).

The same ``[root, device_info]`` as :mod:`proton_core.formats.hatchet`, node
for node and key for key (upstream's writer packs each node as a map of
``frame``, ``metrics``, ``children``), so every reader of one reads the other
after ``msgpack.unpackb(data, raw=False, strict_map_key=False)``.  The encoding
both ways is :mod:`proton_core.formats.msgpack_io` (decision 0211); reading
goes through :func:`proton_core.formats.hatchet.read_document`, which tells the
two formats apart by the file's first byte.
"""

from __future__ import annotations

from . import hatchet
from .msgpack_io import dump, load, packb

__all__ = ["write", "dump", "load", "packb"]


def write(profile, path: str, metadata: dict | None = None) -> None:
    """Write ``profile`` to ``path`` as hatchet MessagePack (the document of :func:`hatchet.document`)."""
    doc = hatchet.document(profile, metadata)
    with open(path, "wb") as f:
        dump(doc, f)
