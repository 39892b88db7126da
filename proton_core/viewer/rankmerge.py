"""Ranks of one run as one tree: each rank's files summed, ranks matched node by node, and each rank's
own values of the metric that is compared kept beside the sum.

Nodes of two ranks are the same node when their paths match by name and by
the order of same-named siblings (a kernel run on two devices is two siblings
of one name): ranks use different GPUs (rank 3 on device 3), so the device id
that tells two nodes apart within one file (:mod:`.combine`) would keep every
rank's kernels apart here (decision 0271).  A device id the ranks disagree on
is dropped from the merged node.  A rank's file read once is freed once its
numbers are added; only the raw metrics the compared metric needs are kept per
rank (a few arrays per rank, not the rank's table).
"""

from __future__ import annotations

from array import array

from ..model.table import DEVICE_ID, Table
from . import derive, rankfiles
from .errors import MissingMetric
from .sameshape import Shape

#: Tree shapes remembered for reading later ranks by their numbers (ranks of one job have one or a few).
MAX_SHAPES = 4


class _Recording(dict):
    """A ``cols`` dict that notes which keys a computation read: the raw metrics a derived one needs."""

    def __init__(self, cols) -> None:
        super().__init__(cols)
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def needed_keys(table: Table, metric: str) -> list[str]:
    """The raw keys ``metric`` is computed from in ``table`` ([] where the table cannot give it)."""
    probe = Table(table.path)
    probe.names, probe.kids, probe.root, probe.kinds = table.names, table.kids, table.root, table.kinds
    probe.labels, probe.inner = table.labels, table.inner
    probe.cols = _Recording(table.cols)
    order, parent = table.walk()
    try:
        columns = derive.Columns(probe, order, parent)  # lists every key: what it reads next is what counts
        probe.cols.read.clear()
        columns.compute(metric)
    except MissingMetric:
        return []
    return sorted(k for k in probe.cols.read if k in table.cols)


def first_metric(args_metrics: str | None, table: Table) -> str | None:
    """The metric the ranks are compared by: ``-m``'s first, else the view's default first column."""
    wanted = [m.strip() for m in (args_metrics or "").split(",") if m.strip()]
    if wanted:
        return wanted[0]
    keys = table.metric_keys()
    return derive.default_metrics(table, keys)[0] if keys else None


def last_scope(table: Table) -> str | None:
    """Where a part ends: the path to its most recently entered scope (last child at each level,
    kernels and places inside kernels left out), ``a > b > c``; None for an empty tree."""
    path, i = [], table.root
    devices, inner, kids = table.labels[DEVICE_ID], table.inner, table.kids
    while True:
        scopes = [k for k in (kids[i] or ()) if devices[k] is None and not inner[k]]
        if not scopes:
            break
        i = scopes[-1]
        path.append(table.names[i])
    return " > ".join(path) if path else None


class Merged:
    """The union tree (``table``, every metric summed over ranks) and, per rank, its own raw values of
    the ``keys`` the compared ``metric`` needs, on the union's nodes (``per_rank[rank][key]``, 0 where the
    rank has none)."""

    def __init__(self, run: rankfiles.Run, metrics: str | None, read_rank, warnings: list[str]) -> None:
        self.run = run
        self.ranks = list(run.ranks)
        self.table = Table()
        self.metric: str | None = None
        self.keys: list[str] = []
        self.per_rank: dict[int, dict[str, array]] = {}
        self.notes = list(run.notes)
        self._index: dict[int, dict] = {}
        self.shapes: list[tuple[Shape, array]] = []  # (shape, its learnt nodes -> union nodes)
        for number, rank in run.ranks.items():
            whole = len(rank.paths) == 1 and not rank.parts
            if whole and self._read_fast(number, rank.paths[0]):
                continue
            data = read_rank(rank.paths, warnings)
            if not self.table.names:
                self.metric = first_metric(metrics, data)
                self.keys = needed_keys(data, self.metric) if self.metric else []
                mapping = self._start(data)
            else:
                mapping = self._absorb(data)
                self._add(data, mapping)
            self.per_rank[number] = {key: _mapped(data.cols.get(key), mapping, self.table.size) for key in self.keys}
            if whole and len(self.shapes) < MAX_SHAPES and not getattr(data, "unreadable", 0):
                shape = Shape.learn(rank.paths[0], data)
                if shape is not None:
                    self.shapes.append((shape, mapping))
            del data
            if rank.stopped_early():
                where = last_scope(read_rank([rank.parts[-1].path], None))
                self.notes.append(rankfiles.stopped_early_line(rank, where))
        for shape, mapping in self.shapes:
            shape.fold(self.table, mapping)
        size = self.table.size
        for cols in self.per_rank.values():  # ranks read before the union grew: nothing on the new nodes
            for key, col in cols.items():
                if len(col) < size:
                    col.extend(array("d", [0.0]) * (size - len(col)))

    def _read_fast(self, number: int, path: str) -> bool:
        """Read ``path`` through a known shape (:mod:`.sameshape`) if it has one; whether it did."""
        union = self.table
        for shape, mapping in self.shapes:
            got = shape.read(path)
            if got is None:
                continue
            values, devices, moved = got
            union.devices = {**devices, **union.devices}
            labels = union.labels[DEVICE_ID]
            for i in moved:  # ranks on different devices: the merged node is on no one device
                labels[mapping[i]] = None
            self.per_rank[number] = {key: shape.column(key, values, mapping, union.size) for key in self.keys}
            return True
        return False

    def _start(self, first: Table) -> array:
        """The union begins as a copy of the first rank's table (its nodes, numbers); identity mapping."""
        t = self.table
        t.path, t.metadata, t.root = first.path, first.metadata, first.root
        t.names = list(first.names)
        t.kids = [list(k) if k else None for k in first.kids]
        t.labels = {key: list(values) for key, values in first.labels.items()}
        t.inner = bytearray(first.inner)
        t.cols = {key: array("d", col) for key, col in first.cols.items()}
        t.kinds, t.devices = dict(first.kinds), dict(first.devices)
        t.unreadable = getattr(first, "unreadable", 0)
        return array("q", range(first.size))

    def _absorb(self, data: Table) -> array:
        """Match ``data``'s nodes to the union's, adding those it lacks; ``data`` node -> union node."""
        union, index = self.table, self._index
        mapping = array("q", [-1]) * data.size
        mapping[data.root] = union.root
        names, kids, inner = data.names, data.kids, data.inner
        devices, rank_dev = data.labels, data.labels[DEVICE_ID]
        u_dev = union.labels[DEVICE_ID]
        stack = [(data.root, union.root)]
        while stack:
            x, u = stack.pop()
            ks = kids[x]
            if not ks:
                continue
            children = index.get(u)
            if children is None:
                children = index[u] = {}
                seen: dict = {}
                for j in union.kids[u] or ():
                    n = union.names[j]
                    children[(n, seen.get(n, 0))] = j
                    seen[n] = seen.get(n, 0) + 1
            seen = {}
            for k in ks:
                n = names[k]
                nth = seen.get(n, 0)
                seen[n] = nth + 1
                j = children.get((n, nth))
                if j is None:
                    j = children[(n, nth)] = union.add(n, u)
                    for key, values in devices.items():
                        union.labels[key][j] = values[k]
                    union.inner[j] = inner[k]
                elif u_dev[j] is not None and u_dev[j] != rank_dev[k]:
                    u_dev[j] = None  # ranks on different devices: the merged node is on no one device
                mapping[k] = j
                stack.append((k, j))
        return mapping

    def _add(self, data: Table, mapping: array) -> None:
        """Add ``data``'s numbers into the union, node by node through ``mapping``."""
        union = self.table
        union.kinds = {**data.kinds, **union.kinds}
        union.devices = {**data.devices, **union.devices}
        for key, src in data.cols.items():
            col = union.column(key)
            last_wins = union.kind(key) == "pty"
            for j, v in zip(mapping, src):
                if v == v and j >= 0:
                    old = col[j]
                    col[j] = v if (old != old or last_wins) else old + v
        union.unreadable = getattr(union, "unreadable", 0) + getattr(data, "unreadable", 0)


def _mapped(src, mapping: array, size: int) -> array:
    """A rank's column on the union's nodes (0 where the rank has no value: it spent nothing there)."""
    out = array("d", [0.0]) * size
    if src is not None:
        for j, v in zip(mapping, src):
            if j >= 0 and v == v:
                out[j] = v
    return out
