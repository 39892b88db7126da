"""A profile as read from a file: one node per node of the file, values as written.

Where :class:`~proton_core.model.Tree` keeps one node per call path with its
kernels per device (what a session records), a file holds a kernel run on
several devices as one sibling per device, its ``device_id``/``device_type``
among the metrics, and may hold anything its writer chose (upstream's files
too).  Readers that walk files (examples, benchmarks, tests) take them as
written, so this is its own model; :mod:`proton_core.formats.hatchet` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..inclusive import is_inclusive
from ..metrics import DEVICE_ID_KEY, DEVICE_TYPE_KEY

#: Keys that label a kernel node rather than measure it.
LABEL_KEYS = (DEVICE_ID_KEY, DEVICE_TYPE_KEY)


class ReadNode:
    """A node read from a file: name, exclusive numeric metrics (labels as strings), children;
    ``inner`` for a place inside a kernel (frame type ``in_kernel``)."""

    __slots__ = ("name", "metrics", "children", "inner")

    def __init__(self, name: str, metrics: dict | None = None, children=None, inner: bool = False) -> None:
        self.name = name
        self.metrics: dict = metrics or {}  # exclusive raw values, as in the file
        self.children: list[ReadNode] = children or []
        self.inner = inner

    @property
    def device(self):
        """(device_type, device_id) of a kernel node, else None."""
        if DEVICE_ID_KEY not in self.metrics:
            return None
        return (str(self.metrics.get(DEVICE_TYPE_KEY, "")), str(self.metrics[DEVICE_ID_KEY]))

    def key(self):
        """Identity among siblings: a kernel run on two devices is two nodes."""
        return (self.name, self.metrics.get(DEVICE_ID_KEY))

    def walk(self):
        """Pre-order, iteratively (Python-context trees can be deep)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass
class ReadProfile:
    """A file as read: its path, root node and device info."""

    path: str
    root: ReadNode
    devices: dict = field(default_factory=dict)
    #: The root's ``metadata`` (what the file is), ``{}`` where the writer gave none (upstream's files).
    metadata: dict = field(default_factory=dict)
    #: Kinds (``"exc"``, ``"pty"``) of keys whose spelling does not tell it: an upstream file writes
    #: ``"a (exc)"`` as ``"a"``, and only its root says which keys add up (decision 0210).
    kinds: dict = field(default_factory=dict)

    def is_inclusive(self, key: str) -> bool:
        """Whether ``key`` adds up from children into their parents, in this file."""
        return is_inclusive(key, self.kinds)

    def metric_keys(self) -> list[str]:
        """Raw metric names present anywhere, in first-seen order."""
        seen: dict[str, None] = {}
        for node in self.root.walk():
            for key in node.metrics:
                if key not in LABEL_KEYS:
                    seen.setdefault(key, None)
        return list(seen)
