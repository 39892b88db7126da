"""How unevenly the ranks share a node: min / median / max over ranks, the slowest rank, and
imbalance ``(max - mean) / max``: 0 when every rank spends the same, near 1 when one rank does it all
(the share of the slowest rank's time the others spend waiting, as Holistic Trace Analysis and
torch's straggler reports read it).

A rank without a node counts 0 there (it spent nothing in it), so a scope only one rank enters is
maximally imbalanced; a node no rank has a value for has no figures (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

NAN = float("nan")


@dataclass
class Stats:
    """Per node (indexed like the table): the figures over ranks; ``slowest`` holds a rank number or None."""

    low: list
    median: list
    high: list
    slowest: list
    imbalance: list


def over_ranks(per_rank: list, ranks: list[int], nodes, size: int) -> Stats:
    """``per_rank[r][i]``: rank ``ranks[r]``'s value at node ``i``; figures for ``nodes`` (others NaN)."""
    low, median, high, imb = ([NAN] * size for _ in range(4))
    slowest: list = [None] * size
    count = len(per_rank)
    if not count:
        return Stats(low, median, high, slowest, imb)
    mid = count // 2
    even = count % 2 == 0
    for i in nodes:
        values = [col[i] for col in per_rank]
        if not any(v == v for v in values):
            continue
        values = [v if v == v else 0.0 for v in values]
        top = max(values)
        ordered = sorted(values)
        low[i] = ordered[0]
        high[i] = top
        median[i] = (ordered[mid - 1] + ordered[mid]) / 2 if even else ordered[mid]
        slowest[i] = ranks[values.index(top)]
        imb[i] = (top - sum(values) / count) / top if top > 0 else 0.0
    return Stats(low, median, high, slowest, imb)
