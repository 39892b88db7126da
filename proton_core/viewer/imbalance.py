"""How unevenly the ranks share a node: min / median / max over ranks, the slowest rank, and
imbalance ``(max - mean) / max``: 0 when every rank spends the same, near 1 when one rank does it all
(the share of the slowest rank's time the others spend waiting, as Holistic Trace Analysis and
torch's straggler reports read it).

A rank without a node counts 0 there (it spent nothing in it), so a scope only one rank enters is
maximally imbalanced; a node no rank has a value for has no figures (NaN).

64 ranks of 100 000 nodes are 6.4 million values: everything here is C-level passes (``map``,
``zip``, ``itemgetter``, ``accumulate``), never a Python step per value.  Subtree sums come from a
prefix sum over the pre-order, where a subtree is one run of positions (exact for integer values
below 2**53, as times in ns and counts are).

Where ``proton_core._rank_numbers`` is built (csrc/rank_numbers.c, decision 0275), the same passes run
in C with the same float operations in the same order; a column of NaN (or of other than doubles) takes
the Python passes.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import accumulate
from operator import itemgetter, sub

from .sameshape import _C

NAN = float("nan")


@dataclass
class Stats:
    """Per node (indexed like the table): the figures over ranks; ``slowest`` holds a rank number or None."""

    low: list
    median: list
    high: list
    slowest: list
    imbalance: list


def _getter(positions):
    if len(positions) == 1:
        (p,) = positions
        return lambda values: (values[p],)
    return itemgetter(*positions)


class Spans:
    """The nodes of ``order`` (a pre-order) and where each one's subtree ends in it."""

    def __init__(self, order: list[int], parent, size: int) -> None:
        self.order = order
        self.take = _getter(order) if order else (lambda values: ())
        where = [-1] * size
        for k, i in enumerate(order):
            where[i] = k
        sizes = [1] * len(order)
        for k in range(len(order) - 1, 0, -1):
            p = parent[order[k]]
            if p >= 0 and where[p] >= 0:
                sizes[where[p]] += sizes[k]
        self.ends = _getter([k + s for k, s in enumerate(sizes)]) if order else (lambda values: ())
        self.order_q = array("q", order)  # for the C passes
        self.ends_q = array("q", [k + s for k, s in enumerate(sizes)])

    def own(self, column):
        """A node-indexed column at the positions of ``order`` (doubles in, doubles out: an array)."""
        if _C is not None and _doubles(column) and self.order:
            out = array("d")
            out.frombytes(_C.take(column, self.order_q))
            return out
        return self.take(column)

    def subtree_sums(self, column):
        """Per position, ``column`` summed over the subtree."""
        if _C is not None and _doubles(column) and self.order:
            out = array("d")
            out.frombytes(_C.subtree_sums(column, self.order_q, self.ends_q))
            return out
        prefix = [0.0, *accumulate(self.own(column))]
        return list(map(sub, self.ends(prefix), prefix[:-1]))


def over_ranks(columns: list, ranks: list[int], spans: Spans, size: int, scale: float = 1.0,
               shown=None) -> Stats:
    """``columns[r][k]``: rank ``ranks[r]``'s value at position ``k`` of ``spans.order`` (0: none), times
    ``scale``; the figures per node, NaN where ``shown`` (node-indexed) is NaN: no rank has a value there."""
    low, median, high, imb = ([NAN] * size for _ in range(4))
    slowest: list = [None] * size
    count = len(columns)
    if not count or not spans.order:
        return Stats(low, median, high, slowest, imb)
    if _C is not None and all(map(_doubles, columns)) and type(ranks) is list and len(ranks) == count:
        got = _C.over_ranks(list(columns), ranks, spans.order_q, size, float(scale), shown, NAN)
        if got is not None:  # None: a NaN among the values; sorted() decides where it goes
            return Stats(*got)
    rows = list(zip(*columns))
    ordered = list(map(sorted, rows))
    lo = list(map(itemgetter(0), ordered))
    hi = list(map(itemgetter(-1), ordered))
    mid = count // 2
    if count % 2:
        med = list(map(itemgetter(mid), ordered))
    else:
        med = [(a + b) / 2 for a, b in zip(map(itemgetter(mid - 1), ordered), map(itemgetter(mid), ordered))]
    del ordered
    top = list(map(tuple.index, rows, hi))
    totals = list(map(sum, rows))
    del rows
    for k, i in enumerate(spans.order):
        if shown is not None and shown[i] != shown[i]:
            continue
        h = hi[k]
        low[i], median[i], high[i] = lo[k] * scale, med[k] * scale, h * scale
        slowest[i] = ranks[top[k]]
        imb[i] = (h - totals[k] / count) / h if h > 0 else 0.0
    return Stats(low, median, high, slowest, imb)


def _doubles(column) -> bool:
    return type(column) is array and column.typecode == "d"
