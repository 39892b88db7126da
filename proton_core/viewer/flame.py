"""What a flame graph draws: per shown frame, its own width in each additive metric.

A picture needs widths that add up: a frame is as wide as itself plus its
children.  Additive metrics are the inclusive ones (time, count, flops,
bytes, ...) and ``cpu_time`` (a scope's own time covers its children's).  A
frame's own width is its total less its shown children's totals, so a frame
cut by ``-d`` or ``-t`` keeps its whole total.  Shared by ``--html`` and
``--speedscope``.
"""

from __future__ import annotations

from array import array

from ..inclusive import is_inclusive
from .derive import subtree_sums
from .errors import ViewerError


def additive(keys, kinds: dict | None = None) -> list[str]:
    """The metrics a frame's width can stand for: inclusive ones (time first), then cpu_time.
    ``kinds``: the profile's own (an upstream file's unmarked keys are exclusive)."""
    inclusive = sorted((k for k in keys if is_inclusive(k, kinds)), key=lambda k: not k.startswith("time"))
    return inclusive + [k for k in keys if k.startswith("cpu_time")]


def _own(order, kids, totals, clamp: bool) -> list[float]:
    """Each frame's total less its shown children's (NaN counts as 0), in ``order``."""
    out = []
    for i in order:
        t = totals[i]
        own = t if t == t else 0.0
        for k in kids[i] or ():
            c = totals[k]
            if c == c:
                own -= c
        out.append(max(own, 0.0) if clamp else own)
    return out


class Frames:
    """The shown tree in pre-order: ``order``, ``parent`` (positions), names, own widths per metric.

    For a diff, widths are the first profile's and ``deltas`` the change.
    """

    def __init__(self, view) -> None:
        table, calc = view.table, view.calc
        self.order, _ = table.walk()
        position = array("q", [-1]) * table.size
        for p, i in enumerate(self.order):
            position[i] = p
        kids = table.kids
        self.parent = [-1] * len(self.order)
        for p, i in enumerate(self.order):
            for k in kids[i] or ():
                self.parent[position[k]] = p
        self.names = [table.names[i] for i in self.order]
        self.metrics = additive(calc.keys, table.kinds)
        if not self.metrics:
            raise ViewerError("nothing to draw: the profile has no metric that adds up (time, count, flops, bytes, ...)")
        self.diff = bool(table.base)
        self.widths: list[list[float]] = []
        self.deltas: list[list[float]] = []
        for key in self.metrics:
            if self.diff:
                base = table.base.get(key) or array("d", [float("nan")]) * table.size
                totals = base if not table.is_inclusive(key) else subtree_sums(base, calc.order, calc.parent)
                self.deltas.append(_own(self.order, kids, calc.value(key), clamp=False))
            else:
                totals = calc.value(key)
            self.widths.append(_own(self.order, kids, totals, clamp=True))
