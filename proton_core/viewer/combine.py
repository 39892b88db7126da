"""Two profiles as one: ``merge`` (part files of one run, or runs to add up) and ``diff`` (``-diff``).

Nodes are matched by their path of (name, device); each pair of parents
matches its children through a dict of its own, dropped once done, so the work
is one pass over both trees and the memory a few siblings at a time.
"""

from __future__ import annotations

from array import array

from ..model.table import DEVICE_ID, NAN, Table


def merge(a: Table, b: Table) -> Table:
    """``a + b`` per node; properties (``(pty)``) are taken from ``b`` where it has them."""
    out = _combine(a, b, subtract=False)
    out.devices = {**b.devices, **a.devices}
    return out


def diff(a: Table, b: Table) -> Table:
    """``a - b`` per node; a node absent from one side counts as zero there.

    The result's ``base`` holds ``a``'s own values on the same nodes: a flame
    graph of a diff is as wide as ``a`` and coloured by the change.
    """
    out = _combine(a, b, subtract=True)
    out.devices = a.devices or b.devices
    return out


def _combine(a: Table, b: Table, subtract: bool) -> Table:
    out = Table(a.path)
    out.metadata = a.metadata
    out.kinds = {**b.kinds, **a.kinds}  # what each file says of its keys (an upstream file's root)
    map_a, map_b = _match(a, b, out)
    for key in dict.fromkeys([*a.cols, *b.cols]):
        col = array("d", [NAN]) * out.size
        src = a.cols.get(key)
        if src is not None:
            for j, v in zip(map_a, src):
                if j >= 0 and v == v:
                    col[j] = v
        if subtract:
            out.base[key] = array("d", col)
        src = b.cols.get(key)
        if src is not None:
            last_wins = not subtract and out.kind(key) == "pty"
            for j, v in zip(map_b, src):
                if j >= 0 and v == v:
                    if last_wins:
                        col[j] = v
                    else:
                        old = col[j]
                        base = old if old == old else 0.0
                        col[j] = base - v if subtract else base + v
        out.cols[key] = col
    out.inner = bytearray(out.size)  # a place inside a kernel on either side stays one
    for mapping, flags in ((map_a, a.inner), (map_b, b.inner)):
        if any(flags):
            for j, flag in zip(mapping, flags):
                if flag and j >= 0:
                    out.inner[j] = 1
    for key, values in out.labels.items():  # labels from a where it has them
        for side, mapping in ((b, map_b), (a, map_a)):
            for j, v in zip(mapping, side.labels[key]):
                if j >= 0 and v is not None:
                    values[j] = v
    return out


def _keys(table: Table) -> list:
    """Each node's identity among its siblings: (name, device id); a kernel on two devices is two nodes."""
    return [(name, None if dev is None else str(dev)) for name, dev in zip(table.names, table.labels[DEVICE_ID])]


def _pairs(ka, kb, keys_a, keys_b) -> list:
    """Children of two matched nodes, paired by identity: a's in order (with b's match or -1), then b's own."""
    if len(ka) == len(kb) and all(keys_a[x] == keys_b[y] for x, y in zip(ka, kb)):
        return list(zip(ka, kb))  # the common case: the same children in the same order
    pending: dict = {}
    for k in kb:
        pending.setdefault(keys_b[k], []).append(k)
    used = set()
    pairs = []
    for k in ka:
        same = pending.get(keys_a[k])
        m = same.pop(0) if same else -1
        if m >= 0:
            used.add(m)
        pairs.append((k, m))
    return pairs + [(-1, k) for k in kb if k not in used]


def _match(a: Table, b: Table, out: Table):
    """Build ``out``'s nodes (labels and columns left empty); return a's and b's node -> out node."""
    map_a = array("q", [-1]) * a.size
    map_b = array("q", [-1]) * b.size
    keys_a, keys_b = _keys(a), _keys(b)
    names, kids = out.names, out.kids
    a_names, b_names, a_kids, b_kids = a.names, b.names, a.kids, b.kids
    stack = [(a.root, b.root, -1)]
    pop, extend = stack.pop, stack.extend
    while stack:
        x, y, parent = pop()
        j = len(names)
        names.append(a_names[x] if x >= 0 else b_names[y])
        kids.append(None)
        if parent >= 0:
            siblings = kids[parent]
            if siblings is None:
                kids[parent] = [j]
            else:
                siblings.append(j)
        ka = kb = None
        if x >= 0:
            map_a[x] = j
            ka = a_kids[x]
        if y >= 0:
            map_b[y] = j
            kb = b_kids[y]
        if ka and kb:
            pairs = _pairs(ka, kb, keys_a, keys_b)
        elif ka:
            pairs = [(k, -1) for k in ka]
        elif kb:
            pairs = [(-1, k) for k in kb]
        else:
            continue
        extend([(x2, y2, j) for x2, y2 in reversed(pairs)])
    size = len(names)
    for values in out.labels.values():
        values.extend([None] * size)
    return map_a, map_b
