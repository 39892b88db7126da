"""Reading hatchet profiles into a small tree the viewer can filter and diff.

Both our files and upstream Proton's share the schema ``[root, device_info]``
with exclusive values per node; upstream files may carry extra metrics, node
types and keys, so anything not understood is skipped rather than rejected.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field

#: Keys that label a kernel node rather than measure it.
LABEL_KEYS = ("device_id", "device_type")
#: Upstream's Triton hook records launch-metadata work under this scope; it is not user work.
METADATA_SCOPE = "__proton_launch_metadata"


class ViewerError(Exception):
    """Bad input for proton-viewer; the message is one line saying what to do."""


class Node:
    __slots__ = ("name", "metrics", "children", "values")

    def __init__(self, name: str, metrics: dict | None = None, children=None) -> None:
        self.name = name
        self.metrics: dict = metrics or {}  # exclusive raw values, as in the file
        self.children: list[Node] = children or []
        self.values: dict[str, float] = {}  # displayed columns, filled by derive

    @property
    def device(self):
        """(device_type, device_id) of a kernel node, else None."""
        if "device_id" not in self.metrics:
            return None
        return (str(self.metrics.get("device_type", "")), str(self.metrics["device_id"]))

    def key(self):
        """Identity among siblings: a kernel run on two devices is two nodes."""
        return (self.name, self.metrics.get("device_id"))

    def walk(self):
        """Pre-order, iteratively (Python-context trees can be deep)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def copy(self) -> "Node":
        return Node(self.name, dict(self.metrics), [c.copy() for c in self.children])


@dataclass
class Profile:
    path: str
    root: Node
    devices: dict = field(default_factory=dict)

    def metric_keys(self) -> list[str]:
        """Raw metric names present anywhere, in first-seen order."""
        seen: dict[str, None] = {}
        for node in self.root.walk():
            for key in node.metrics:
                if key not in LABEL_KEYS:
                    seen.setdefault(key, None)
        return list(seen)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _not_profile(path: str, why: str) -> ViewerError:
    return ViewerError(
        f"{path} is not a Proton profile ({why}): pass a .hatchet file written by proton or Triton's proton"
    )


def _convert(literal, path: str) -> Node:
    def make(lit):
        if not isinstance(lit, dict) or not isinstance(lit.get("frame"), dict):
            raise _not_profile(path, "a node has no 'frame' object")
        name = lit["frame"].get("name")
        if not isinstance(name, str):
            raise _not_profile(path, "a node's frame has no 'name'")
        metrics = {}
        raw = lit.get("metrics") or {}
        if not isinstance(raw, dict):
            raise _not_profile(path, f"node {name!r} has 'metrics' that is not an object")
        for key, value in raw.items():
            if key in LABEL_KEYS:
                metrics[key] = str(value)
            else:
                number = _number(value)
                if number is not None:
                    metrics[key] = number
        children = lit.get("children") or []
        if not isinstance(children, list):
            raise _not_profile(path, f"node {name!r} has 'children' that is not a list")
        return Node(name, metrics), children

    root, kids = make(literal)
    stack = [(root, kids)]
    while stack:
        parent, kids = stack.pop()
        for lit in kids:
            node, grand = make(lit)
            parent.children.append(node)
            stack.append((node, grand))
    return root


def load(path: str) -> Profile:
    """Read and check a profile; raise ViewerError with a one-line reason."""
    if not os.path.exists(path):
        raise ViewerError(f"no such file: {path}")
    if os.path.isdir(path):
        raise ViewerError(f"{path} is a directory: pass a .hatchet profile file")
    try:
        with open(path, "rb") as f:
            document = json.loads(f.read().decode("utf-8"))
    except OSError as exc:
        raise ViewerError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ViewerError(f"{path} is not JSON (it is binary): pass a .hatchet profile") from None
    except json.JSONDecodeError as exc:
        raise ViewerError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): pass a .hatchet profile"
        ) from None
    devices = {}
    if isinstance(document, list) and document and isinstance(document[0], dict):
        literal = document[0]
        if len(document) > 1 and isinstance(document[1], dict):
            devices = document[1]
    elif isinstance(document, dict):  # a bare root node
        literal = document
    else:
        raise _not_profile(path, "expected a JSON list [root, device_info]")
    root = _convert(literal, path)
    return Profile(path, root, devices)


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


FRAME = re.compile(r"^(?P<file>.*):(?P<func>[^:@/]+)@(?P<line>\d+)$")


def format_frames(root: Node, style: str) -> None:
    """Shorten Python frames ``file:function@line``; other names are left alone."""
    if style == "full":
        return
    for node in root.walk():
        m = FRAME.match(node.name)
        if not m:
            continue
        base = os.path.basename(m["file"])
        if style == "file_function_line":
            node.name = f"{base}:{m['func']}@{m['line']}"
        elif style == "function_line":
            node.name = f"{m['func']}@{m['line']}"
        elif style == "file_function":
            node.name = f"{base}:{m['func']}"


def diff(a: Node, b: Node) -> Node:
    """``a - b`` per node, matching nodes by their path of names; absent nodes count as zero."""

    def sub(x: Node | None, y: Node | None) -> Node:
        name = (x or y).name
        metrics = {}
        for src in (y, x):  # labels from x win
            if src is not None:
                metrics.update({k: v for k, v in src.metrics.items() if k in LABEL_KEYS})
        keys = dict.fromkeys(k for src in (x, y) if src is not None for k in src.metrics if k not in LABEL_KEYS)
        for key in keys:
            metrics[key] = (x.metrics.get(key, 0) if x else 0) - (y.metrics.get(key, 0) if y else 0)
        node = Node(name, metrics)
        xs = {c.key(): c for c in x.children} if x else {}
        ys = {c.key(): c for c in y.children} if y else {}
        for key in dict.fromkeys(list(xs) + list(ys)):
            child = sub(xs.get(key), ys.get(key))
            node.children.append(child)
        return node

    return _no_recursion_limit(lambda: sub(a, b))


def _no_recursion_limit(fn):
    """Recursive helpers above walk deep Python call paths; give them room."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100000))
    try:
        return fn()
    finally:
        sys.setrecursionlimit(old)
