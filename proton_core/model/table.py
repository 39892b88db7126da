"""A profile file as columns: the whole call tree as a few lists and arrays, for files of millions of nodes.

The column-wise form of :mod:`proton_core.model.read`'s model: a million-node
profile as hatchet literals (a dict per node, per frame and per metrics object)
costs about 1 GB in Python; here a node is an index: names in one list,
children in lists of indices, each numeric metric one ``array('d')`` with NaN
where a node has no value.  Places inside a kernel (frame type ``in_kernel``:
source lines, SASS offsets) are flagged in ``inner``.  The viewer reads files
into it (:func:`proton_core.viewer.table.read`) and merges, diffs and draws it.
"""

from __future__ import annotations

import math
from array import array

from ..inclusive import is_inclusive, kind
from .read import LABEL_KEYS

NAN = math.nan
DEVICE_ID, DEVICE_TYPE = LABEL_KEYS


class Table:
    """Nodes ``0 .. size-1``; ``root`` is the top; a node's children are ``kids[i]`` (None: a leaf)."""

    def __init__(self, path: str = "") -> None:
        self.path = path
        self.names: list[str] = []
        self.kids: list[list[int] | None] = []
        self.cols: dict[str, array] = {}  # raw numeric metrics, NaN where absent
        self.labels: dict[str, list] = {DEVICE_ID: [], DEVICE_TYPE: []}  # kernel labels, None where absent
        self.root = 0
        self.devices: dict = {}
        self.metadata: dict = {}
        self.base: dict[str, array] = {}  # of a diff: the first profile's own values (see combine.diff)
        self.inner = bytearray()  # 1: a place inside a kernel (frame type in_kernel), below its kernel's node
        #: Kinds ("exc", "pty") of keys whose spelling does not tell it (an upstream file's, decision 0210)
        self.kinds: dict[str, str] = {}

    @property
    def size(self) -> int:
        return len(self.names)

    def add(self, name: str, parent: int | None = None) -> int:
        """A new node (for tables built in code: merges, diffs, tests); its columns are NaN."""
        i = len(self.names)
        self.names.append(name)
        self.kids.append(None)
        self.inner.append(0)
        for values in self.labels.values():
            values.append(None)
        for col in self.cols.values():
            col.append(NAN)
        if parent is not None:
            if self.kids[parent] is None:
                self.kids[parent] = []
            self.kids[parent].append(i)
        return i

    def column(self, key: str) -> array:
        """The column of ``key``, created (all NaN) if absent."""
        col = self.cols.get(key)
        if col is None:
            col = self.cols[key] = array("d", [NAN]) * self.size
        return col

    def device(self, i: int):
        """(device_type, device_id) of a kernel node, else None."""
        dev = self.labels[DEVICE_ID][i]
        if dev is None:
            return None
        kind = self.labels[DEVICE_TYPE][i]
        return ("" if kind is None else str(kind), str(dev))

    def is_inclusive(self, key: str) -> bool:
        """Whether ``key`` adds up from children into their parents, in this profile."""
        return is_inclusive(key, self.kinds)

    def kind(self, key: str) -> str:
        """``"inc"``, ``"exc"`` or ``"pty"`` of ``key`` in this profile."""
        return kind(key, self.kinds)

    def metric_keys(self) -> list[str]:
        """Raw metric names present: the root's first (what upstream's root marks), then as first seen."""
        present = [k for k, col in self.cols.items() if any(v == v for v in col)]  # v == v: not NaN
        first = [k for k in present if self.cols[k][self.root] == self.cols[k][self.root]]
        return first + [k for k in present if k not in first]

    def walk(self) -> tuple[list[int], array]:
        """(pre-order of the nodes reachable from the root, parent of each node: -1 for the root and the unreached)."""
        parent = array("q", [-1]) * self.size
        order, stack, kids = [], [self.root], self.kids
        push, pop, visit = stack.extend, stack.pop, order.append
        while stack:
            i = pop()
            visit(i)
            ks = kids[i]
            if ks:
                for k in ks:
                    parent[k] = i
                push(reversed(ks))
        return order, parent
