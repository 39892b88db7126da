"""Per-launch metrics counted, not merged: what ``add_numbers_here`` does at each Triton launch.

A hook that files the same checked numbers at the same context launch after
launch (``flops32=…, bytes=…`` of a kernel) pays one dict lookup and one C-level
increment here; the numbers are multiplied into the tree when the session is
flushed or a phase ends (:meth:`Tallies.settle`, under the manager's lock).

Thread safety without a lock on the launch path: a launching thread only ever
``setdefault``s an entry and advances its ``itertools.count`` (both atomic
under the GIL); only ``settle`` writes ``applied``.  So no increment is lost or
counted twice, whichever thread settles.
"""

from __future__ import annotations

import itertools

from .metrics import PROPERTY

#: Entries with nothing new at a settle are dropped once there are more than this many (a hook
#: whose values change at every launch still keeps bounded memory).
MAX_IDLE = 4096


def _value(counter) -> int:
    return counter.__reduce__()[1][0]  # itertools.count's current value, read without advancing it


class Tallies:
    def __init__(self) -> None:
        #: (context id, id(numbers)) -> [numbers, count, applied]; the entry keeps ``numbers`` alive,
        #: so its id cannot be reused while the key exists.
        self.entries: dict = {}
        #: Entries dropped from ``entries`` at the last settle, settled once more at the next one: a
        #: launch that took the counter just before it was dropped still counts.
        self.retired: list = []

    def add(self, ctx: int, numbers) -> bool:
        """Count ``numbers`` once more at ``ctx``; False (nothing counted) for numbers that hold a
        property (``(pty)``: the last value wins, which a count cannot tell): merge those directly."""
        counter = self.counter(ctx, numbers)
        if counter is None:
            return False
        next(counter)
        return True

    def counter(self, ctx: int, numbers):
        """The ``itertools.count`` that counts ``numbers`` at ``ctx`` (advance it once per launch), or
        None for numbers holding a property.  Valid until a settle retires it (:attr:`retired`)."""
        key = (ctx, id(numbers))
        entry = self.entries.get(key)
        if entry is None:
            if any(name.kind == PROPERTY for name, _ in numbers):
                return None
            entry = self.entries.setdefault(key, [numbers, itertools.count(), 0])
        return entry[1]

    def settle(self, merge) -> bool:
        """``merge(ctx, [(MetricName, value × count)])`` for what was counted since the last settle.
        True when entries were retired: counters handed out before (cached by launch hooks) must be
        taken again."""
        retired, self.retired = self.retired, []
        for key, entry in retired:
            _settle_one(key, entry, merge)
        idle = []
        for key, entry in list(self.entries.items()):
            if not _settle_one(key, entry, merge):
                idle.append(key)
        if len(self.entries) <= MAX_IDLE:
            return False
        self.retired = [(key, self.entries.pop(key)) for key in idle]
        return bool(self.retired)


def _settle_one(key, entry, merge) -> bool:
    """Merge what ``entry`` counted since its last settle; False when it counted nothing."""
    total = _value(entry[1])
    times = total - entry[2]
    if not times:
        return False
    entry[2] = total
    merge(key[0], [(name, value * times) for name, value in entry[0]])
    return True
