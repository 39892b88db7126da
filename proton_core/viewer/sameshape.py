"""A rank file with the same tree as one already read, read by its numbers alone (decision 0272).

The ranks of one job run one program, so their files usually differ only in
their numbers.  A file's text is cut at each ``"metrics":{`` and
``},"children":[``: what lies between those marks are the metrics objects, the
rest (frames, names, nesting) is the tree's skeleton.  A file whose skeleton
equals a known one has the same nodes in the same order; its metrics objects,
turned into one flat JSON list (``"key",value,...``), are parsed by the C JSON
decoder in one call, and its numbers land in slots known from the first file
of that shape.  No Python work per node: a 100 000-node file is a few
C-level passes over its text.

A known shape is learnt from a file the full reader read, and checked
against it: every number the slots give must be the one the reader found at
that node, and every value the reader found must have a slot; else the shape
is not used.  A later file is taken only if its skeleton, its keys in order
and its root's naming metadata are the same, and every slotted value is a
number; else the caller reads it with the full reader.  Nothing is guessed:
what this reader cannot vouch for goes the slow way.

Where ``proton_core._rank_numbers`` is built (csrc/rank_numbers.c, decision
0275) a later file is matched in C against the learnt file's bytes: literal
runs byte for byte, numbers parsed where the learnt file had numbers.  A file
the C reader does not take is read here, as without it; ``PROTON_PURE_PYTHON``
or a missing extension leaves only this module's code.
"""

from __future__ import annotations

import json
import math
import os
from array import array
from itertools import accumulate
from operator import add, itemgetter

from ..formats import hatchet, keys as file_keys
from ..model.table import DEVICE_ID, DEVICE_TYPE, Table
from .rankfiles import head_metadata


def _native():
    """``proton_core._rank_numbers`` unless it was not built or PROTON_PURE_PYTHON is set."""
    if os.environ.get("PROTON_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no", "off"):
        return None
    try:
        from .. import _rank_numbers
    except ImportError:
        return None
    return _rank_numbers


_C = _native()

MARK_METRICS = '"metrics":{'
MARK_CHILDREN = '},"children":['
SEPARATOR = ""  # the key that ends a node's pairs in the flat list
#: Device kinds whose kernels' labels the flat list carries as one number (others: the full reader)
DEVICE_TYPES = ("CUDA", "HIP")


class _Refused(ValueError):
    """NaN or Infinity in a file: the full reader counts those; this one does not take the file."""


def _refuse(word):
    raise _Refused(word)


def _tokens(text: str):
    """(skeleton pieces but the last, the closing brackets, each node's metrics text, device-info text) or None."""
    if not text.startswith('[{"frame":'):
        return None
    parts = text.replace(MARK_CHILDREN, MARK_METRICS).split(MARK_METRICS)
    if len(parts) % 2 == 0 or len(parts) < 3:
        return None
    skeleton, contents = parts[0::2], parts[1::2]
    contents[0] = contents[0].partition("}")[0]  # the root's metrics; its metadata follows them
    tail = skeleton.pop()
    comma = tail.find(",")
    closing, devices = (tail, None) if comma < 0 else (tail[:comma], tail[comma + 1:])
    return skeleton, closing, contents, devices


def _flat(contents: list[str]):
    """(keys, values) of every node's metrics in text order, a SEPARATOR pair after each node."""
    body = "[" + ',"",0,'.join(contents) + ',"",0]'
    if "[," in body or ",," in body:  # nodes without metrics (",," is in no valid metrics object but in text)
        body = "[" + body[1:].lstrip(",").replace(",,", ",")
    for kind in DEVICE_TYPES:  # a kernel's labels as one number: "device_id":"3","device_type":"CUDA" -> 3
        body = body.replace(f'","{DEVICE_TYPE}":"{kind}"', "")
    body = body.replace(f'"{DEVICE_ID}":"', f'"{DEVICE_ID}":')  # a label left unpaired breaks the JSON: refused
    items = json.loads(body.replace('":', '",'), parse_constant=_refuse)
    return items[0::2], items[1::2]


def _getter(positions: list[int]):
    """positions -> a function giving the tuple of those items (itemgetter of one item gives no tuple)."""
    if len(positions) == 1:
        (p,) = positions
        return lambda values: (values[p],)
    if not positions:
        return lambda values: ()
    return itemgetter(*positions)


def _naming(meta: dict):
    return meta.get(file_keys.NAMES_KEY), meta.get(file_keys.MARKS_KEY)


class Shape:
    """One tree's skeleton and its value slots; sums of the files read through it, kept per slot."""

    def __init__(self) -> None:
        self.skeleton: list[str] = []
        self.closing = ""
        self.keys: list = []
        self.naming = None
        self.positions: list[int] = []  # slot -> index in a file's values
        self.nodes: list[int] = []  # slot -> node of the learnt table
        self.names: list[str] = []  # slot -> metric name (as the reader names it)
        self.device_slots: list[tuple[int, int]] = []  # (index in values, node) of device ids
        self.devices_seen: tuple = ()
        self.sums: list = []
        self.last: list = []
        self.files = 0
        self._columns: dict = {}
        self.native = None  # the C reader of this shape (csrc/rank_numbers.c), None where the Python one reads

    @classmethod
    def learn(cls, path: str, table: Table) -> "Shape | None":
        """The shape of ``path``, which the full reader read as ``table``; None where it cannot vouch for it."""
        try:
            text = hatchet.read_text(path)
        except hatchet.HatchetError:
            return None
        tokens = _tokens(text)
        text_bytes = text.encode("utf-8") if _C is not None else b""
        del text
        if tokens is None:
            return None
        skeleton, closing, contents, _ = tokens
        if len(contents) != table.size:
            return None
        try:
            keys, values = _flat(contents)
        except ValueError:
            return None
        order, _ = table.walk()
        if len(order) != table.size or keys.count(SEPARATOR) != table.size:
            return None
        meta = table.metadata
        renamed = file_keys.restored_names(meta) if file_keys.is_ours(meta) else {}
        shape = cls()
        shape.skeleton, shape.closing, shape.keys, shape.naming = skeleton, closing, keys, _naming(meta)
        cols, root = table.cols, table.root
        before = [0, *accumulate(k == SEPARATOR for k in keys)]  # pair p belongs to node before[p] (in text order)
        groups: dict = {}
        for p, key in enumerate(keys):
            groups.setdefault(key, []).append(p)
        groups.pop(SEPARATOR, None)
        for p in groups.pop(DEVICE_ID, ()):
            shape.device_slots.append((p, order[before[p]]))
        for key, positions in groups.items():
            found = _getter(positions)(values)
            if not {type(v) for v in found} <= {int, float}:
                if any(type(v) is int or type(v) is float for v in found):
                    return None  # numbers and text under one key: not what this reader vouches for
                continue  # text and lists: the reader keeps none of them
            nodes = [order[before[p]] for p in positions]
            name = renamed.get(key, key)
            col = cols.get(name)
            if col is None:
                col = array("d", [math.nan]) * table.size
            if col[root] != col[root] and root in nodes:  # a zero the writer marks the root with, dropped on reading
                k = nodes.index(root)
                if found[k] != 0:
                    return None
                del positions[k], nodes[k]
                found = found[:k] + found[k + 1:]
            if tuple(_getter(nodes)(col)) != tuple(found):
                return None  # NaN (a value the reader has not) compares unequal too
            shape.positions += positions
            shape.nodes += nodes
            shape.names += [name] * len(positions)
        if len(shape.positions) != sum(1 for col in cols.values() for v in col if v == v):
            return None  # the reader found values this reader has no slot for
        shape.devices_seen = tuple(values[p] for p, _ in shape.device_slots)
        shape.sums = [0] * len(values)  # every position (device ids, separators: unused); ints stay exact
        shape.take = _getter(shape.positions)
        shape.take_devices = _getter([p for p, _ in shape.device_slots])
        shape.native = _native_reader(text_bytes, values) if _C is not None else None
        return shape

    def read(self, path: str):
        """(the file's values, its device info, device-id slots that differ from the learnt file's) where
        ``path`` has this shape (its numbers added to the sums), else None."""
        if self.native is not None:
            data = _read_bytes(path)
            if data is None:
                return None
            got = self._read_native(path, data)
            if got is not _UNDECIDED:
                return got
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return None
            del data
            tokens = _tokens(text)
            del text
            if tokens is None or tokens[1] != self.closing or tokens[0] != self.skeleton:
                return None  # another shape (the usual case here): the C reader's sums stay as they are
            self.sums, self.last = self.native.sums(), list(memoryview(self.native.last()).cast("d"))[:-1]
            got = self._read_python(path, tokens)
            if got is not None:  # the sums are Python's from now on
                self.native = None
            return got
        try:
            text = hatchet.read_text(path)
        except hatchet.HatchetError:  # binary (hatchet_msgpack, gzip) or unreadable: the full reader says which
            return None
        tokens = _tokens(text)
        del text
        return self._read_python(path, tokens)

    def _read_native(self, path: str, data: bytes):
        """:meth:`read` through the C reader: its answer, or _UNDECIDED where the Python reader must read."""
        native = self.native
        at = native.parse(data)
        if at < 0:
            return _UNDECIDED
        try:
            tail = data[at:].decode("utf-8")
        except UnicodeDecodeError:  # the whole text would not decode either
            return None
        comma = tail.find(",")
        closing, devices_text = (tail, None) if comma < 0 else (tail[:comma], tail[comma + 1:])
        if closing != self.closing:
            return None
        try:
            devices = json.loads(devices_text[:-1]) if devices_text else {}
        except (ValueError, TypeError, OverflowError):
            return None
        if not isinstance(devices, dict) or _naming(head_metadata(path)) != self.naming:
            return None
        slots = self.device_slots
        moved = [slots[j][1] for j in native.moved()]
        native.commit()
        self.files += 1
        return native.last(), devices, moved

    def _read_python(self, path: str, tokens):
        """:meth:`read` by the Python reader, of a text cut by :func:`_tokens`."""
        if tokens is None:
            return None
        skeleton, closing, contents, devices_text = tokens
        if closing != self.closing or skeleton != self.skeleton:
            return None
        try:
            keys, values = _flat(contents)
            sums = list(map(add, self.sums, values))  # TypeError: text or a list where a number was
            devices = json.loads(devices_text[:-1]) if devices_text else {}
        except (ValueError, TypeError, OverflowError):
            return None
        if keys != self.keys or not isinstance(devices, dict) or _naming(head_metadata(path)) != self.naming:
            return None
        seen = self.take_devices(values)
        moved = [] if seen == self.devices_seen else \
            [i for (p, i), a, b in zip(self.device_slots, seen, self.devices_seen) if a != b]
        self.sums = sums
        values.append(0.0)  # what column() takes where the file has no value
        self.last = values
        self.files += 1
        return values, devices, moved

    def column(self, name: str, values, mapping, size: int) -> array:
        """A file's values (as :meth:`read` gave them: a list, or the C reader's doubles as bytes) of ``name``
        on the union's nodes (``mapping``: learnt node -> union node), 0 where none."""
        if isinstance(values, bytes):
            where = self._columns.get(("native", name, size))
            if where is None:
                where = array("q", [len(values) // 8 - 1]) * size  # the 0.0 after the values: no value there
                for p, i, key in zip(self.positions, self.nodes, self.names):
                    if key == name:
                        where[mapping[i]] = p
                self._columns[("native", name, size)] = where
            out = array("d")
            out.frombytes(_C.take(memoryview(values).cast("d"), where))
            return out
        take = self._columns.get((name, size))
        if take is None:
            where = [len(values) - 1] * size  # the 0 read() put after the values: the file has no value there
            for p, i, key in zip(self.positions, self.nodes, self.names):
                if key == name:
                    where[mapping[i]] = p
            take = self._columns[(name, size)] = _getter(where)
        return array("d", take(values))

    def fold(self, union: Table, mapping) -> None:
        """Add the sums of the files read through this shape into ``union`` (properties: the last file's)."""
        if not self.files:
            return
        if self.native is not None:
            self.sums, self.last = self.native.sums(), list(memoryview(self.native.last()).cast("d"))
        cols = {name: union.column(name) for name in set(self.names)}
        properties = {name for name in cols if union.kind(name) == "pty"}
        sums, lasts = self.take(self.sums), self.take(self.last)
        for i, name, total, last in zip(self.nodes, self.names, sums, lasts):
            col = cols[name]
            j = mapping[i]
            old = col[j]
            value = last if name in properties else (total if old != old else old + total)
            try:
                col[j] = value
            except OverflowError:  # an int sum past a double: infinite, clamped where shown (decision 0180)
                col[j] = math.inf if value > 0 else -math.inf


_UNDECIDED = object()  # the C reader leaves the file to the Python one


def _read_bytes(path: str) -> bytes | None:
    """A file's bytes, None where :func:`hatchet.read_text` would refuse it for what it is (missing, a directory,
    unreadable); its text is checked later (the C reader's literals are the learnt file's text)."""
    try:
        if os.path.isdir(path):
            return None
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _native_reader(data: bytes, values: list):
    """The C reader of the learnt file ``data`` whose flat values the Python reader found to be ``values``;
    None where it refuses the file or reads it otherwise (every value, its type and a zero's sign, must agree)."""
    try:
        reader = _C.Reader(data)
    except (ValueError, MemoryError):
        return None
    mine = reader.values(data)
    if mine is None or len(mine) != len(values) or list(map(type, mine)) != list(map(type, values)) or mine != values:
        return None
    if array("d", mine).tobytes() != array("d", values).tobytes():  # a zero's sign (== takes -0.0 for 0.0)
        return None
    return reader
