"""Shaping a table for display: the filters of ``-i``, ``-e``, ``-t``, ``-d``, each one pass over the tree.

They cut children lists in place; nodes cut off stay in the table, unreached.
"""

from __future__ import annotations

import re

from .errors import ViewerError

#: Upstream's Triton hook records launch-metadata work under this scope; it is not user work.
METADATA_SCOPE = "__proton_launch_metadata"


def compile_regex(pattern: str, option: str):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ViewerError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from None


def _matcher(table, regex):
    """``matches(i)``, searching each distinct name once (kernel names repeat by the thousand)."""
    seen: dict[str, bool] = {}
    names = table.names

    def matches(i: int) -> bool:
        name = names[i]
        hit = seen.get(name)
        if hit is None:
            hit = seen[name] = regex.search(name) is not None
        return hit

    return matches


def drop_metadata(table) -> None:
    """Hide upstream's ``__proton_launch_metadata`` frames, as upstream's viewer does."""
    if METADATA_SCOPE in table.names:
        _drop(table, lambda i: table.names[i] == METADATA_SCOPE)


def exclude(table, regex) -> None:
    """Drop every frame matching ``regex`` with its subtree."""
    _drop(table, _matcher(table, regex))


def _drop(table, gone) -> None:
    order, _ = table.walk()
    kids = table.kids
    for i in order:  # a dropped node's children are never reached: its subtree goes with it
        ks = kids[i]
        if ks:
            kept = [k for k in ks if not gone(k)]
            if len(kept) != len(ks):
                kids[i] = kept or None


def include(table, regex) -> None:
    """Keep only paths through a frame matching ``regex``, with that frame's whole subtree."""
    matches = _matcher(table, regex)
    order, _ = table.walk()
    kids = table.kids
    keep = bytearray(table.size)
    under_match = bytearray(table.size)  # inside a matching frame's subtree: kept whole
    root = table.root
    for i in order:  # parents before children; the root itself is never matched
        if under_match[i] or (i != root and matches(i)):
            under_match[i] = keep[i] = 1
            for k in kids[i] or ():
                under_match[k] = 1
    for i in reversed(order):  # children before parents
        if not under_match[i]:
            ks = kids[i]
            if ks:
                kept = [k for k in ks if keep[k]]
                kids[i] = kept or None
                keep[i] = 1 if kept else 0


def prune_depth(table, depth: int) -> None:
    """Keep ``depth`` levels below the root."""
    frontier = [table.root]
    kids = table.kids
    for _ in range(depth):
        frontier = [k for i in frontier for k in (kids[i] or ())]
    for i in frontier:
        kids[i] = None


def prune_threshold(table, values, threshold: float) -> None:
    """Hide frames whose ``values[i]`` is below ``threshold`` (or blank) unless a descendant passes."""
    order, _ = table.walk()
    kids = table.kids
    passes = bytearray(table.size)
    for i in reversed(order):  # children before parents
        ks = kids[i]
        if ks:
            kept = [k for k in ks if passes[k]]
            if len(kept) != len(ks):
                kids[i] = kept or None
            if kept:
                passes[i] = 1
                continue
        v = values[i]
        if v >= threshold:  # NaN (no value) compares False
            passes[i] = 1
