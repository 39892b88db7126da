"""``--speedscope``: the shown tree in speedscope's file format (https://www.speedscope.app).

One *evented* profile per additive metric, all sharing one frame list: a
frame opens, its children follow one after another, then its own width, and it
closes.  Evented rather than sampled because a sampled profile repeats every
stack whole (quadratic in a deep tree) where events are two per frame.
Speedscope's "left heavy" view then aggregates as a flame graph does.
"""

from __future__ import annotations

import json
import re
import sys

from .._version import __version__
from .flame import Frames

MAX = sys.float_info.max
SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds", "B": "bytes"}


def unit(key: str) -> str:
    """speedscope's unit for a metric key such as ``time (ns)`` or ``bytes (B)``; 'none' otherwise."""
    m = re.search(r"\((ns|us|ms|s|B)\)", key)
    if m:
        return UNITS[m.group(1)]
    return "bytes" if key.split("(")[0].strip().lower() == "bytes" else "none"


def events(frames: Frames, own: list[float]) -> tuple[list[dict], float]:
    """Open/close events of every frame with a width, laid out left to right; and the end value."""
    n = len(frames.order)
    children: list[list[int]] = [[] for _ in range(n)]
    for p in range(1, n):
        children[frames.parent[p]].append(p)
    total = list(own)
    for p in range(n - 1, 0, -1):  # pre-order positions: children after their parent
        total[frames.parent[p]] += total[p]
    out, at, stack = [], 0.0, [(0, False)]
    while stack:
        p, closing = stack.pop()
        if closing:
            at = min(at + own[p], MAX)  # a layout past the largest double stays a number (JSON has no inf)
            out.append({"type": "C", "frame": p, "at": at})
            continue
        if total[p] <= 0:
            continue
        out.append({"type": "O", "frame": p, "at": at})
        stack.append((p, True))
        stack.extend((c, False) for c in reversed(children[p]))
    return out, at


def document(view) -> dict:
    frames = Frames(view)
    index: dict[str, int] = {}
    frame_of = [index.setdefault(n, len(index)) for n in frames.names]
    profiles = []
    for key, own in zip(frames.metrics, frames.widths):
        evs, end = events(frames, own)
        for e in evs:
            e["frame"] = frame_of[e["frame"]]
        profiles.append({"type": "evented", "name": key, "unit": unit(key), "startValue": 0, "endValue": end,
                         "events": evs})
    return {
        "$schema": SCHEMA,
        "name": view.root_words or view.table.path,
        "exporter": f"proton-view {__version__}",
        "activeProfileIndex": 0,
        "shared": {"frames": [{"name": n} for n in index]},
        "profiles": profiles,
    }, len(frames.order)


def write(view, path: str) -> int:
    """Write the speedscope file; returns the number of frames in the shown tree."""
    doc, count = document(view)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"), allow_nan=False)
    return count
