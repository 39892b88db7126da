"""The viewer's reader: a hatchet file into the column model (:class:`~proton_core.model.table.Table`) in one pass.

The JSON decoder's ``object_hook`` turns each node into its index as soon as
it is parsed, so the literal dicts never pile up (peak: the file's text plus
the columns).  Decoding calls the hook on an object after its children, so
indices come in post-order.  Places inside a kernel (frame type ``in_kernel``)
are flagged as read, so kernels with per-line data are found by structure, not
by name.
"""

from __future__ import annotations

import math
from array import array
from itertools import chain

from ..formats import hatchet, keys
from ..formats.hatchet import INNER_TYPE, LABEL_KEYS, METADATA_KEY
from ..model.table import NAN, Table


def read(path) -> Table:
    """Read a hatchet file (ours or upstream's) into a :class:`Table`; HatchetError (one line) says why not.

    Like :func:`proton_core.formats.hatchet.read`, what is not understood
    (extra keys, non-numeric or non-finite values) is skipped, not rejected;
    the table's ``unreadable`` counts the numbers left out for not being
    finite doubles (NaN, Infinity, integers past a double), which Proton never
    writes (decision 0180) but other writers may: the viewer says so.
    """
    path = str(path)
    if hatchet.is_msgpack(path):
        return _read_msgpack(path)
    text = hatchet.read_text(path)
    loader = _Loader(path, text.count('"frame"') + 1)  # an upper bound on the nodes
    try:
        doc = hatchet.parse(text, path, object_hook=loader.hook, parse_constant=loader.constant)
    except IndexError:  # more nodes than '"frame"' strings: nodes nested where no node belongs
        raise hatchet.not_profile(path, "unexpected nested 'frame' objects") from None
    del text
    return loader.finish(doc)


def _read_msgpack(path: str) -> Table:
    """A ``hatchet_msgpack`` file: decoded whole, then its nodes through the same hook, children first."""
    from ..formats import msgpack_io

    doc = msgpack_io.load(path)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        root = doc[0]
    elif isinstance(doc, dict):
        root, doc = doc, [doc]
    else:
        raise hatchet.not_profile(path, "expected a list [root, device_info]")
    nodes, stack = [], [root]
    while stack:  # pre-order; reversed below, every node comes after its children
        node = stack.pop()
        if isinstance(node, dict) and isinstance(node.get("frame"), dict):
            nodes.append(node)
            kids = node.get("children")
            if isinstance(kids, list):
                stack.extend(kids)
    loader = _Loader(path, len(nodes))
    index: dict[int, int] = {}  # id of a node dict -> its index in the table
    for node in reversed(nodes):
        kids = node.get("children")
        literal = node
        if isinstance(kids, list) and kids:
            literal = dict(node, children=[index[id(k)] if id(k) in index else k for k in kids])
        index[id(node)] = loader.hook(literal)
    return loader.finish([index[id(root)], *doc[1:2]])


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
        #: Numbers left out: NaN/Infinity (counted as the parser meets them) and ints past a double
        self.unreadable = [0]
        self.hook = self._hook()

    def constant(self, word: str) -> float:
        """``parse_constant``: NaN, Infinity and -Infinity are counted, and read as no value."""
        self.unreadable[0] += 1
        return NAN

    def _hook(self):
        """The hook as a closure: its state in local cells, read faster than attributes a million times."""
        path, capacity, names, kids, cols, metadata, nxt = (self.path, self.capacity, self.names, self.kids,
                                                            self.cols, self.metadata, self.next)
        inner, inner_type, unreadable = self.inner, INNER_TYPE, self.unreadable
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
                            try:
                                col[i] = value
                            except OverflowError:  # an int past a double
                                unreadable[0] += 1
                    except TypeError:  # text where a number belongs
                        pass
                    except OverflowError:  # an int past a double
                        unreadable[0] += 1
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
                if math.inf in col or -math.inf in col:  # non-finite values (1e999 in the text) count as absent
                    for j, v in enumerate(col):
                        if math.isinf(v):
                            col[j] = NAN
                            self.unreadable[0] += 1
                table.cols[key] = col
        table.root = root
        table.devices = devices
        table.metadata = self.metadata.get(root, {})
        table.unreadable = self.unreadable[0]
        _apply_naming(table)
        return table


def _apply_naming(table: Table) -> None:
    """Our file: the program's metric names back, the root's marking zeros dropped (as if never written).
    Another writer's file: its keys the root lacks are exclusive (:func:`keys.upstream_kinds`, decision 0210)."""
    meta, root = table.metadata, table.root
    if not keys.is_ours(meta):
        present = [k for k, col in table.cols.items() if col[root] == col[root]]  # not NaN: the root has it
        table.kinds = keys.upstream_kinds(table.cols, present)
        return
    for key in keys.marks(meta):
        col = table.cols.get(key)
        if col is not None and col[root] == 0:
            col[root] = NAN
            if not any(v == v for v in col):
                del table.cols[key]
    names = keys.restored_names(meta)
    if names and any(k in names for k in table.cols):
        table.cols = {names.get(k, k): col for k, col in table.cols.items()}
