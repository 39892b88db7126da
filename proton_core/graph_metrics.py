"""Metrics given while a CUDA graph is captured count at every replay, under the replay's ``<captured_at>`` path.

Work captured into a graph does not run at the capture: it runs at each replay, where the backend files its
kernels under ``<launch path>/<captured_at>/<capture path>``.  Metrics given while the graph is captured
(scope metrics, launch_metadata's numbers, tensor metrics) describe that work, so they are filed the same way,
as upstream Proton's metric kernels captured into the graph are: nothing at the capture, once per replay, in
each session that recorded when they were given and records at the replay (decision 0320).

Whoever captures and replays graphs says so here (:func:`capture_began`, :func:`capture_ended`,
:func:`replayed`): the torch observer (:mod:`.graph_capture_torch`) for ``torch.cuda.CUDAGraph``, the
synthetic backend in tests.  While a thread captures, ``CAPTURE.on`` is true and sessions hand what is given
on that thread to :func:`divert` instead of their tree; outside captures that flag is the only cost.
Plain numbers are summed per capture path at the capture and merged once per replay; a tensor is counted
per replay and read once, at the session's next flush, its value times the replays (static graph inputs:
every replay computes the same value).
"""

from __future__ import annotations

import os
import threading
import weakref

from . import log
from .activity import ACTIVITY
from .backend import CAPTURED_AT
from .context import THREAD
from .metrics import PROPERTY, read_tensor
from .model.tree import Node, merge_metrics

_PLAIN = (int, float, str, list)


class _Flag:
    """``on``: some thread is capturing a graph now (one attribute read on the metric paths)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


CAPTURE = _Flag()


class _Target:
    """What one session was given at one capture path: plain values summed, tensors kept."""

    __slots__ = ("node", "names", "tensors")

    def __init__(self) -> None:
        self.node = Node("")  # plain values, merged as the tree merges them
        self.names: dict = {}  # metric key -> MetricName
        self.tensors: list = []  # (MetricName, tensor), read at flush

    def add(self, name, value) -> None:
        if isinstance(value, _PLAIN):
            self.names[name.key] = name
            merge_metrics(self.node, [(name, value)])
        else:
            self.tensors.append((name, value))

    def frozen(self) -> tuple:
        """(numbers, tensors) as replays file them."""
        names = self.names
        return tuple((names[key], value) for key, value in self.node.metrics.items()), tuple(self.tensors)


class _Given:
    """One session's metrics of one capture: ``targets`` maps capture path -> :class:`_Target` while capturing,
    then a tuple of (path, numbers, tensors).  ``filed``: for a base whose paths follow context ids, launch
    context -> (weak tree, its filings), so a replay from a known context looks nothing up."""

    __slots__ = ("session", "targets", "filed")

    def __init__(self, session) -> None:
        self.session = weakref.ref(session)
        self.targets = {}
        self.filed: dict = {}


class _Capture:
    __slots__ = ("graph_id", "given")

    def __init__(self, graph_id: int) -> None:
        self.graph_id = graph_id
        self.given: dict[int, _Given] = {}  # session id -> what it was given

    def target(self, session, path: tuple) -> _Target:
        given = self.given.get(session.id)
        if given is None:
            given = self.given[session.id] = _Given(session)
        target = given.targets.get(path)
        if target is None:
            target = given.targets[path] = _Target()
        return target


#: thread ident -> the captures open on that thread, innermost last
_THREADS: dict[int, list[_Capture]] = {}
#: id(graph) -> (weak reference to the graph or the graph, {session id: _Given}) for graphs captured with metrics
_GRAPHS: dict[int, tuple] = {}


def _here(session) -> tuple:
    return tuple(name for _, name in session.base.here())


# ------------------------------------------------------------------ capture ----
def capture_began(graph) -> None:
    """The calling thread starts capturing ``graph`` (any object; kept by identity, weakly where it can be)."""
    _GRAPHS.pop(id(graph), None)  # captured again: what the old capture was given is gone with it
    _THREADS.setdefault(threading.get_ident(), []).append(_Capture(id(graph)))
    CAPTURE.on = True
    ACTIVITY.generation += 1  # cached launch steps count at once: none may answer while a graph is captured


def _take(graph):
    """The calling thread's open capture of ``graph``, removed; None if none."""
    ident = threading.get_ident()
    stack = _THREADS.get(ident)
    if not stack:
        return None
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].graph_id == id(graph)), None)
    if at is None:
        return None
    capture = stack.pop(at)
    if not stack:
        del _THREADS[ident]
    CAPTURE.on = bool(_THREADS)
    return capture


def capture_ended(graph) -> None:
    """The calling thread finished capturing ``graph``: what it was given is filed at each later replay."""
    capture = _take(graph)
    if capture is None:
        return
    given = {}
    for sid, g in capture.given.items():
        targets = []
        for path, target in g.targets.items():
            numbers, tensors = target.frozen()
            if numbers or tensors:
                targets.append((path, numbers, tensors))
        if targets:
            g.targets = tuple(targets)
            given[sid] = g
    if not given:
        return
    key = id(graph)
    try:
        ref = weakref.ref(graph, lambda _, key=key: _GRAPHS.pop(key, None))
    except TypeError:  # an object without weak references: kept alive, as its id must stay its own
        ref = (lambda g: lambda: g)(graph)
    _GRAPHS[key] = (ref, given)


def capture_abandoned(graph) -> None:
    """The capture of ``graph`` failed: what it was given is dropped (no replay can run it)."""
    _take(graph)


def divert(session, parsed):
    """``parsed`` metrics for ``session`` given at the calling thread: those a graph being captured on this thread
    takes are registered for its replays; returns the rest (``parsed`` itself when none is taken), which the
    session files now.  Host time (``cpu_time``) stays where it was measured: the capture's."""
    stack = _THREADS.get(threading.get_ident())
    if not stack:
        return parsed
    rest = [(name, value) for name, value in parsed if name.base == "cpu_time"]
    if len(rest) == len(parsed):
        return parsed
    target = stack[-1].target(session, _here(session))
    for name, value in parsed:
        if name.base != "cpu_time":
            target.add(name, value)
    return rest


# ------------------------------------------------------------------- replay ----
def replayed(graph) -> None:
    """``graph`` was just launched from the calling thread: file its metrics in every session that was given them
    and records now, under this thread's path and ``<captured_at>``."""
    entry = _GRAPHS.get(id(graph))
    if entry is None or entry[0]() is not graph:
        return
    stack = _THREADS.get(threading.get_ident()) if CAPTURE.on else None
    for given in entry[1].values():
        session = given.session()
        if session is None or not session.active or session.closed:
            continue
        if stack:  # launched into a graph being captured: its metrics belong to that graph's replays
            below = _here(session) + (CAPTURED_AT,)
            for path, numbers, tensors in given.targets:
                target = stack[-1].target(session, below + path)
                for name, value in numbers + tensors:
                    target.add(name, value)
            continue
        tree = session.profile.tree
        if session.base.incremental:  # the launch path is the current context's
            ctx = THREAD.current
            hit = given.filed.get(ctx)
            if hit is None or hit[0]() is not tree:
                if len(given.filed) >= _MAX_FILED:
                    given.filed.clear()
                hit = given.filed[ctx] = (weakref.ref(tree), _filings(tree, _here(session), given.targets))
            filings = hit[1]
        else:
            filings = _filings(tree, _here(session), given.targets)
        for node, numbers, where, tensors in filings:
            if numbers:
                merge_metrics(node, numbers)
            if tensors:
                session.count_replayed_tensors(where, tensors)


_MAX_FILED = 1024  # launch contexts remembered per graph and session


def _filings(tree, launch: tuple, targets) -> list:
    """(node, numbers, path, tensors) of each target below ``launch``/``<captured_at>`` in ``tree``."""
    out = []
    for path, numbers, tensors in targets:
        where = launch + (CAPTURED_AT,) + path
        out.append((tree.node(where) if numbers else None, numbers, where, tensors))
    return out


def times(name, value, count: int):
    """``value`` given ``count`` times: summed ``count`` times, a property or text the last one."""
    if count == 1 or name.kind == PROPERTY or isinstance(value, str):
        return value
    if isinstance(value, list):
        return [v * count for v in value]
    return value * count


def resolve(session, counted: dict) -> None:
    """File the tensors ``count_replayed_tensors`` counted: ``{(phase, path, id): [tensors, count]}``.  Each
    tensor is read once; one that cannot be read is left out with one warning, never the profile."""
    read: dict = {}
    for (phase, path, _), (tensors, count) in counted.items():
        profile = session.phases.profile_for(phase)
        if profile is None:  # its phase was cleared
            continue
        for name, tensor in tensors:
            value = read.get(id(tensor), read)
            if value is read:
                try:
                    value = read_tensor(name.key, tensor)
                except Exception as exc:
                    value = None
                    log.warn(f"session {session.id} ({session.name}): {str(exc).splitlines()[0]} at "
                             f"{'/'.join(path)} (given while a CUDA graph was captured); that value is left out "
                             "of the profile")
                read[id(tensor)] = value
            if value is not None:
                profile.tree.add_metrics(path, [(name, times(name, value, count))])


def forget() -> None:
    """Drop every capture and graph known (tests; a forked child)."""
    _THREADS.clear()
    _GRAPHS.clear()
    CAPTURE.on = False


os.register_at_fork(after_in_child=forget)  # the parent's captures are not the child's; its sessions are gone too
