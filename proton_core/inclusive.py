"""Inclusive sums: the one rule for which metrics add up a call tree.

Profiles store each node's own (exclusive) values; the data model and the
viewer both want totals per subtree, so both sum through here.  Exclusive
``(exc)`` metrics, properties ``(pty)`` and host ``cpu_time`` (a parent's
already covers its children's) are never summed.
"""

from __future__ import annotations


def kind(key: str, kinds: dict | None = None) -> str:
    """``"inc"``, ``"exc"`` or ``"pty"``: from ``kinds`` (what a file says of its keys) where it names
    ``key``, else from the spelling (decision 0210: upstream's files cut the suffix, their root tells)."""
    if kinds:
        found = kinds.get(key)
        if found is not None:
            return found
    if key.endswith("(pty)"):
        return "pty"
    if key.endswith("(exc)") or key.startswith("cpu_time"):
        return "exc"
    return "inc"


def is_inclusive(key: str, kinds: dict | None = None) -> bool:
    """Whether ``key`` adds up from children into their parents (``kinds``: as :func:`kind`)."""
    if kinds and key in kinds:
        return kinds[key] == "inc"
    return not (key.endswith(("(exc)", "(pty)")) or key.startswith("cpu_time"))


def subtree_sums(root, keys, value, children) -> dict:
    """``{id(node): {key: node's value plus its descendants'}}`` for ``root`` and every node below it.

    ``value(node, key)`` is a node's own amount and ``children(node)`` its
    children, so any tree shape fits.  Iterative: Python-context trees can be
    thousands of levels deep.
    """
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(children(node))
    sums: dict[int, dict] = {}
    for node in reversed(order):  # every child before its parent
        kids = [sums[id(c)] for c in children(node)]
        sums[id(node)] = {k: value(node, k) + sum(s[k] for s in kids) for k in keys}
    return sums
