"""Shaping a read profile for display: filter, prune, diff and rename frames.

Profiles are read by :mod:`proton_core.formats.hatchet`; these helpers work
on its :class:`~proton_core.formats.hatchet.Node` tree in place.
"""

from __future__ import annotations

import math
import os
import re

from ..formats.hatchet import LABEL_KEYS, Node

#: Upstream's Triton hook records launch-metadata work under this scope; it is not user work.
METADATA_SCOPE = "__proton_launch_metadata"


class ViewerError(Exception):
    """Bad input for proton-view; the message is one line saying what to do."""


# ------------------------------------------------------------------ shaping ----
def drop_metadata(root: Node) -> None:
    for node in root.walk():
        node.children = [c for c in node.children if c.name != METADATA_SCOPE]


def compile_regex(pattern: str, option: str):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ViewerError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from None


def include(root: Node, regex) -> None:
    """Keep only paths through a frame matching ``regex`` (with that frame's whole subtree)."""

    def keep(node: Node) -> bool:
        if regex.search(node.name):
            return True
        node.children = [c for c in node.children if keep(c)]
        return bool(node.children)

    def run():
        root.children = [c for c in root.children if keep(c)]

    _no_recursion_limit(run)


def exclude(root: Node, regex) -> None:
    """Drop every frame matching ``regex`` with its subtree."""
    for node in root.walk():
        node.children = [c for c in node.children if not regex.search(c.name)]


def prune_depth(root: Node, depth: int) -> None:
    """Keep ``depth`` levels below ROOT."""
    frontier = [root]
    for _ in range(depth):
        frontier = [c for n in frontier for c in n.children]
    for node in frontier:
        node.children = []


def prune_threshold(root: Node, column: str, threshold: float) -> None:
    """Hide frames whose ``column`` is below ``threshold`` unless a descendant passes."""

    def passes(node: Node) -> bool:
        node.children = [c for c in node.children if passes(c)]
        value = node.values.get(column)
        return bool(node.children) or (value is not None and not math.isnan(value) and value >= threshold)

    _no_recursion_limit(lambda: passes(root))


#: A Python function name as frames spell it: an identifier or ``<module>``, ``<lambda>``, ...
_FUNC = r"(?P<func>[^\W\d][\w.]*|<[^<>:@/]+>)"
#: Frames as upstream spells them since Triton 3.6 (``file:line@function``), then as before (``file:function@line``).
FRAMES = (
    re.compile(rf"^(?P<file>.*[^:]):(?P<line>\d+)@{_FUNC}$"),
    re.compile(rf"^(?P<file>.*[^:]):{_FUNC}@(?P<line>\d+)$"),
)
#: What ``-f`` makes of a frame, as upstream's viewer prints it.
FRAME_STYLES = {
    "full": "{file}:{line}@{func}",
    "file_function_line": "{base}:{line}@{func}",
    "function_line": "{line}@{func}",
    "file_function": "{base}@{func}",
}


def parse_frame(name: str):
    """(file, line, function) of a Python frame in either spelling, or None for other names."""
    for pattern in FRAMES:
        m = pattern.match(name)
        if m:
            return m["file"], m["line"], m["func"]
    return None


def format_frames(root: Node, style: str) -> None:
    """Spell Python frames in upstream's ``style``; old ``file:function@line`` frames are read too.

    Other names (scopes, kernels) are left alone.
    """
    template = FRAME_STYLES[style]
    for node in root.walk():
        frame = parse_frame(node.name)
        if frame is not None:
            file, line, func = frame
            node.name = template.format(file=file, base=os.path.basename(file), line=line, func=func)


def diff(a: Node, b: Node) -> Node:
    """``a - b`` per node, matching nodes by their path of names; absent nodes count as zero."""
    return _combine(a, b, lambda key, x, y: (x or 0) - (y or 0))


def merge(a: Node, b: Node) -> Node:
    """``a + b`` per node (several phases' part files as one run); properties are taken from ``b``."""
    return _combine(a, b, lambda key, x, y: (y if y is not None else x) if key.endswith("(pty)")
                    else (x or 0) + (y or 0))


def _combine(a: Node, b: Node, value) -> Node:
    """Match nodes of two trees by their path of names and build one from ``value(key, a's, b's)``."""

    def both(x: Node | None, y: Node | None) -> Node:
        name = (x or y).name
        metrics = {}
        for src in (y, x):  # labels from x win
            if src is not None:
                metrics.update({k: v for k, v in src.metrics.items() if k in LABEL_KEYS})
        keys = dict.fromkeys(k for src in (x, y) if src is not None for k in src.metrics if k not in LABEL_KEYS)
        for key in keys:
            metrics[key] = value(key, x.metrics.get(key) if x else None, y.metrics.get(key) if y else None)
        node = Node(name, metrics)
        xs = {c.key(): c for c in x.children} if x else {}
        ys = {c.key(): c for c in y.children} if y else {}
        for key in dict.fromkeys(list(xs) + list(ys)):
            node.children.append(both(xs.get(key), ys.get(key)))
        return node

    return _no_recursion_limit(lambda: both(a, b))


PART = re.compile(r"\.part_(\d+)(?:\.[^./]*)?$")


def expand(patterns: list[str], phase: int | None = None) -> list[str]:
    """Files named, a quoted glob expanded (part files in phase order); ``phase`` keeps that part alone."""
    import glob

    files = []
    for pattern in patterns:
        if os.path.exists(pattern) or not glob.has_magic(pattern):
            files.append(pattern)
            continue
        found = glob.glob(pattern)
        if not found:
            raise ViewerError(f"no file matches {pattern!r}")
        files += sorted(found, key=lambda f: (int(PART.search(f)[1]) if PART.search(f) else -1, f))
    if phase is not None:
        files = [f for f in files if (m := PART.search(f)) and int(m[1]) == phase]
        if not files:
            raise ViewerError(f"--phase {phase}: none of the files is a part_{phase} file (name.part_{phase}.hatchet)")
    return files


def _no_recursion_limit(fn):
    """Recursive helpers above walk deep Python call paths; give them room."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100000))
    try:
        return fn()
    finally:
        sys.setrecursionlimit(old)
