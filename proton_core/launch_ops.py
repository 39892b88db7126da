"""One cached step per launch: open an op and count its numbers, for launch hooks.

A Triton launch with ``launch_metadata`` used to pay four core calls (open the
op, look its node up, count its numbers in every session, and their dict
lookups).  Launch after launch those steps repeat with the same inputs: the
same thread context, the same metadata.  :func:`open_counted_op` caches their
outcome per ``(context, key)`` -- the op's context id, its name and the
counters of every active session's :class:`~proton_core.tallies.Tallies` --
so a repeated launch is one dict lookup, three attribute writes, the backend
setters and one C-level increment per session.

The cache is valid for one ``ACTIVITY.generation``: the core bumps it whenever
the set of active sessions changes and whenever a session's tallies retire
entries, so a hit never counts into a session that stopped or an entry that
is no longer settled.  Anything the counted form cannot express (a session
with python context, numbers with a property) answers False: the caller takes
the general path (``open_op`` + ``add_numbers_here``).
"""

from __future__ import annotations

from .context import OP, SETTLERS, THREAD, TREE, settle
from .activity import ACTIVITY
from .graph_metrics import CAPTURE
from .manager import MANAGER

#: (context id, caller's key) -> (generation, op context id, op name, counters)
_OPS: dict = {}
_MAX_OPS = 65536
#: [how many times _OPS was emptied]: a hit stays what _OPS holds for its key while this count and
#: ACTIVITY.generation stay the same (only _build writes _OPS, and only for keys that miss), which lets
#: the engine's C copy of the cached step (csrc/engine.c, open_launch_op) remember hits across launches.
_CLEARS = [0]
_INDEX = TREE._index  # (parent, kind, name) -> id


def open_counted_op(key, name=None, numbers=None) -> bool:
    """Open op ``name`` at the calling thread's context and count ``numbers`` there once in every
    active session; True when done.

    ``key`` (hashable) stands for ``(name, numbers)`` in the caller's terms, e.g. the launch
    metadata's items: with only ``key`` given, this succeeds when the same key was opened at the
    same context before in this generation.  With ``name`` (non-empty str) and ``numbers``
    (``((metric_name(k), non-negative finite int|float), ...)``, a tuple kept as is), it also
    builds the entry.  False: nothing was done; open the op the general way.  While a CUDA graph is
    captured no entry is built (``capture_began`` also makes every entry stale): the general path hands
    the numbers to the capture.
    """
    if SETTLERS:
        settle()
    t = THREAD
    if t.op is not None:  # an op already open (a hook whose exit did not run): the general path
        return False
    base = t.current
    hit = _OPS.get((base, key))
    if hit is None or hit[0] != ACTIVITY.generation:
        if name is None:
            return False
        hit = _build(base, key, name, numbers)
        if hit is None:
            return False
    ctx = hit[1]
    t.op = hit[2]
    t.current = ctx
    for setter in MANAGER.setters:
        setter(ctx)
    for counter in hit[3]:
        next(counter)
    return True


def _build(base: int, key, name: str, numbers):
    sessions = MANAGER.active
    if not numbers or CAPTURE.on or any(s.base.python_frames for s in sessions):
        return None  # CAPTURE.on: a CUDA graph is captured, whose replays file these numbers (graph_metrics)
    ctx = _INDEX.get((base, OP, name)) or TREE.child(base, OP, name)
    counters = []
    for session in sessions:
        counter = session.tallies.counter(ctx, numbers)
        if counter is None:  # a property among the numbers: counts cannot say "the last value wins"
            return None
        counters.append(counter)
    if CAPTURE.on:  # a capture began while the counters were taken: no hit may count during it
        return None
    if len(_OPS) >= _MAX_OPS:  # metadata whose values change at every launch: stay bounded
        _OPS.clear()
        _CLEARS[0] += 1
    hit = _OPS[(base, key)] = (ACTIVITY.generation, ctx, name, tuple(counters))
    return hit
