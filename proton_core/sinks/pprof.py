"""The pprof sink: ``output_format="pprof"`` (``proton-profile -o pprof``) writes ``<name>.pb.gz``.

Gzipped ``profile.proto`` for go tool pprof and the continuous profilers (Parca,
Pyroscope, Grafana); the rules are :mod:`proton_core.formats.pprof`'s.  A trace
session's kernels carry their stream as a label as well as their device.  The
profile's time is when its session started (or, for a periodic part, when the
previous part was written) and its duration runs to the write, so parts of one
run line up on a continuous profiler's time axis.
"""

from __future__ import annotations

import threading
import time

from .. import log
from ..formats import pprof
from ..plugins import hookimpl

EXTENSION = "pb.gz"

#: session name -> wall-clock ns where its next file's span begins (its start, then each write)
_SPAN_START: dict[str, int] = {}
_LOCK = threading.Lock()


def _span(name: str) -> tuple[int, int]:
    """(time_nanos, duration_nanos) of the file written now for session ``name``; the next begins here."""
    now = time.time_ns()
    with _LOCK:
        start = _SPAN_START.get(name, now)
        _SPAN_START[name] = now
    return start, max(now - start, 0)


def _streams(profile) -> dict:
    """(path, kernel, device_type, device_id) -> {stream: [time_ns, count]} from a trace session's events."""
    out: dict = {}
    trace = getattr(profile, "trace", None)
    for e in trace.kernels if trace is not None else ():
        runs = out.setdefault((tuple(e.path), e.name, e.device_type, e.device_id), {})
        run = runs.setdefault(e.stream_id, [0, 0])
        run[0] += e.end_ns - e.start_ns
        run[1] += 1
    return out


def _runs(path: tuple, node, streams: dict) -> list:
    """A tree node's kernel runs: one per device; per stream too where the trace holds the launches."""
    runs = []
    for (device_type, device_id), (time_ns, count) in sorted(node.kernels.items()):
        device = pprof.device_labels(device_type, device_id)
        by_stream = streams.get((path[:-1], node.name, device_type, device_id))
        if by_stream and sum(t for t, _ in by_stream.values()) <= time_ns and sum(
                c for _, c in by_stream.values()) <= count:
            for stream, (t, c) in sorted(by_stream.items()):
                runs.append((device + (pprof.stream_label(device_type, stream),), t, c))
                time_ns -= t
                count -= c
            if not (time_ns or count):
                continue
        runs.append((device, time_ns, count))  # what no event accounts for (or all of it) keeps the device label
    return runs


def document(profile) -> tuple[bytes, list[str], int]:
    """The profile as pprof bytes, the notes to say, the number of samples."""
    from .._version import __version__

    streams = _streams(profile)

    def children(item):
        node, path = item
        return [(c, path + (c.name,)) for c in node.children.values()]

    def site(item):
        node, path = item
        return pprof.Site(node.name, node.inner, node.metrics, _runs(path, node, streams))

    head = f"proton-profiler {__version__}: session {profile.name}, context {profile.context}, data {profile.data}"
    if getattr(profile, "backend", None):
        head += f", backend {profile.backend}"
    comments = [head]
    for what, value in (("dropped", profile.dropped), ("untimed", profile.untimed),
                        ("unobserved (ns)", profile.unobserved_ns)):
        if value:
            comments.append(f"ROOT {what}: {value}")
    timeline = _timeline_note(profile)
    if timeline:
        comments.append(timeline)
    time_nanos, duration = _span(profile.name)
    data, notes, count = pprof.encode((profile.tree.root, ()), children, site, comments=comments,
                                      devices=profile.device_info(), time_nanos=time_nanos, duration_nanos=duration)
    return data, ([timeline] if timeline else []) + notes, count


def _timeline_note(profile) -> str:
    """What of a trace session has no place in pprof (its totals per path do): said, not dropped silently."""
    trace = getattr(profile, "trace", None)
    if trace is None:
        return ""
    scopes, slices = len(trace.scopes), len(getattr(trace, "kernel_slices", ()))
    if not (scopes or slices):
        return ""
    what = " and ".join(part for part in (f"{scopes} scope events" if scopes else "",
                                          f"{slices} in-kernel slices" if slices else "") if part)
    return (f"pprof keeps totals per call path: the trace's timeline ({what}) is not in it; "
            "output_format='chrome_trace' writes it")


def write(profile, path: str) -> None:
    data, notes, _ = document(profile)
    with open(path, "wb") as f:
        f.write(data)
    for note in notes:  # ``path`` is the temporary file the write renames: name the session instead
        log.warn(f"{profile.name}.{EXTENSION}: {note}")


@hookimpl
def proton_session_started(session):
    with _LOCK:
        _SPAN_START[session.name] = time.time_ns()


@hookimpl
def proton_register_sinks(register):
    register("pprof", write, extension=EXTENSION, data=("tree", "trace"),
             description="call tree as gzipped pprof profile.proto (go tool pprof, Parca, Pyroscope)")
