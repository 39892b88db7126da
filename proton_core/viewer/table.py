"""The viewer's profile: a call tree stored column-wise, read in one pass.

A million-node profile as hatchet literals (a dict per node, per frame and per
metrics object) costs about 1 GB in Python; here a node is an index: names in
one list, children in lists of indices, each numeric metric one ``array('d')``
with NaN where a node has no value.  The JSON decoder's ``object_hook`` turns
each node into its index as soon as it is parsed, so the literal dicts never
pile up (peak: the file's text plus the columns).  Decoding calls the hook on
an object after its children, so indices come in post-order.  Places inside a
kernel (frame type ``in_kernel``: source lines, SASS offsets) are flagged in
``inner``, so kernels with per-line data are found by structure, not by name.
"""

from __future__ import annotations

import math
from array import array
from itertools import chain

from ..formats import hatchet
from ..formats.hatchet import INNER_TYPE, LABEL_KEYS, METADATA_KEY

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


def read(path) -> Table:
    """Read a hatchet file (ours or upstream's) into a :class:`Table`; HatchetError (one line) says why not.

    Like :func:`proton_core.formats.hatchet.read`, what is not understood
    (extra keys, non-numeric or non-finite values) is skipped, not rejected.
    """
    path = str(path)
    text = hatchet.read_text(path)
    loader = _Loader(path, text.count('"frame"') + 1)  # an upper bound on the nodes
    try:
        doc = hatchet.parse(text, path, object_hook=loader.hook)
    except IndexError:  # more nodes than '"frame"' strings: nodes nested where no node belongs
        raise hatchet.not_profile(path, "unexpected nested 'frame' objects") from None
    del text
    return loader.finish(doc)


class _Loader:
    """Builds the ``object_hook``: a node's dict becomes its index; every other object passes through."""

    def __init__(self, path: str, capacity: int) -> None:
        self.path = path
        self.capacity = capacity
        self.table = Table(path)
        self.names = [None] * capacity
        self.kids = [None] * capacity
        self.inner = bytearray(capacity)
        self.labels = {key: [None] * capacity for key in LABEL_KEYS}
        self.cols = dict(self.labels)  # labels take any value; numeric columns join as met
        self.metadata: dict[int, dict] = {}  # a node's own "metadata" (the root's, in our files)
        self.next = [0]
        self.hook = self._hook()

    def _hook(self):
        """The hook as a closure: its state in local cells, read faster than attributes a million times."""
        path, capacity, names, kids, cols, metadata, nxt = (self.path, self.capacity, self.names, self.kids,
                                                            self.cols, self.metadata, self.next)
        inner, inner_type = self.inner, INNER_TYPE
        intern = {}.setdefault
        not_profile = hatchet.not_profile

        def hook(obj: dict):
            if "frame" not in obj:
                return obj  # a frame, a metrics object, device info: kept for its parent
            frame = obj["frame"]
            if type(frame) is not dict:
                return obj
            i = nxt[0]
            nxt[0] = i + 1
            name = frame.get("name")
            if type(name) is not str:
                raise not_profile(path, "a node's frame has no 'name'")
            names[i] = intern(name, name)  # IndexError past capacity: see read()
            if frame.get("type") == inner_type:
                inner[i] = 1
            if "metrics" in obj:
                metrics = obj["metrics"]
                if type(metrics) is not dict:
                    if metrics is None:
                        metrics = {}
                    else:
                        raise not_profile(path, f"node {name!r} has 'metrics' that is not an object")
                for key, value in metrics.items():
                    try:
                        cols[key][i] = value
                    except KeyError:
                        if type(value) is int or type(value) is float:
                            col = cols[key] = array("d", [NAN]) * capacity
                            col[i] = value
                    except (TypeError, OverflowError):  # text where a number belongs; an int past a double
                        pass
            if "children" in obj:
                children = obj["children"]
                if children:
                    if type(children) is not list:
                        raise not_profile(path, f"node {name!r} has 'children' that is not a list")
                    kids[i] = children
            if METADATA_KEY in obj and isinstance(obj[METADATA_KEY], dict):
                metadata[i] = obj[METADATA_KEY]
            return i

        return hook

    def finish(self, doc) -> Table:
        path, size = self.path, self.next[0]
        if type(doc) is list and doc:
            root, devices = doc[0], (doc[1] if len(doc) > 1 and isinstance(doc[1], dict) else {})
        else:
            root, devices = doc, {}  # a bare root node
        if type(root) is not int:
            why = "a node has no 'frame' object" if isinstance(root, dict) else "expected a JSON list [root, device_info]"
            raise hatchet.not_profile(path, why)
        kids = self.kids[:size]
        edges = sum(len(k) for k in kids if k)
        if edges != size - 1 or set(map(type, chain.from_iterable(k for k in kids if k))) - {int}:
            # every node but the root is one node's child, as its index: else a child was no node
            raise hatchet.not_profile(path, "a node has no 'frame' object")
        table = self.table
        table.names = self.names[:size]
        table.kids = kids
        table.inner = self.inner[:size]
        table.labels = {key: values[:size] for key, values in self.labels.items()}
        for key, col in self.cols.items():
            if key not in self.labels:
                del col[size:]
                if math.inf in col or -math.inf in col:  # non-finite values count as absent
                    for j, v in enumerate(col):
                        if math.isinf(v):
                            col[j] = NAN
                table.cols[key] = col
        table.root = root
        table.devices = devices
        table.metadata = self.metadata.get(root, {})
        return table
