"""How unevenly the ranks share a node: min / median / max over ranks, the slowest rank, and
imbalance ``(max - mean) / max``: 0 when every rank spends the same, near 1 when one rank does it all
(the share of the slowest rank's time the others spend waiting, as Holistic Trace Analysis and
torch's straggler reports read it).

A rank without a node counts 0 there (it spent nothing in it), so a scope only one rank enters is
maximally imbalanced; a node no rank has a value for has no figures (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import add

NAN = float("nan")


@dataclass
class Stats:
    """Per node (indexed like the table): the figures over ranks; ``slowest`` holds a rank number or None."""

    low: list
    median: list
    high: list
    slowest: list
    imbalance: list


def by_node(per_rank: list) -> list:
    """``per_rank[r][i]`` turned into ``[i][r]`` (one C-level pass), a rank's NaN read as 0."""
    nodes = list(zip(*per_rank))
    return [t if (s := sum(t)) == s else tuple(v if v == v else 0.0 for v in t) for t in nodes]  # NaN sums to NaN


def subtree_sums(values: list, order, parent) -> list:
    """Per node, the rank vectors of its subtree (of the nodes in ``order``) added up, rank by rank."""
    sums = list(values)
    for i in reversed(order):  # every child before its parent
        p = parent[i]
        if p >= 0:
            sums[p] = tuple(map(add, sums[p], sums[i]))
    return sums


def over_ranks(values: list, ranks: list[int], nodes, size: int, scale: float = 1.0, shown=None) -> Stats:
    """``values[i]``: the ranks' values at node ``i`` (in ``ranks`` order), times ``scale``; figures for
    ``nodes`` where ``shown[i]`` is a number (no rank has a value where it is NaN), NaN elsewhere."""
    low, median, high, imb = ([NAN] * size for _ in range(4))
    slowest: list = [None] * size
    count = len(ranks)
    if not count:
        return Stats(low, median, high, slowest, imb)
    mid = count // 2
    even = count % 2 == 0
    for i in nodes:
        if shown is not None and shown[i] != shown[i]:
            continue
        row = values[i]
        top = max(row)
        ordered = sorted(row)
        low[i] = ordered[0] * scale
        high[i] = top * scale
        median[i] = (ordered[mid - 1] + ordered[mid]) / 2 * scale if even else ordered[mid] * scale
        slowest[i] = ranks[row.index(top)]
        imb[i] = (top - sum(row) / count) / top if top > 0 else 0.0
    return Stats(low, median, high, slowest, imb)
