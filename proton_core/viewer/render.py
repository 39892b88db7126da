"""Printing: the call tree through llnl-hatchet, and the sorted kernel list."""

from __future__ import annotations

import math

from ..formats.hatchet import Node

INSTALL_HINT = "llnl-hatchet is not installed (it draws the tree): pip install proton-profiler[viewer]"


def import_hatchet():
    """llnl-hatchet, or None when the optional viewer extra is not installed."""
    try:
        import hatchet
        from hatchet import GraphFrame  # noqa: F401  (a different 'hatchet' package lacks it)
    except Exception:
        return None
    return hatchet


def tree_text(hatchet, root: Node, columns: list[str]) -> str:
    """Render with hatchet from a literal holding only the computed columns."""

    def literal(node: Node) -> dict:
        return {
            "frame": {"name": node.name, "type": "function"},
            "metrics": {c: node.values.get(c, math.nan) for c in columns},
            "children": [literal(c) for c in node.children],
        }

    graph = hatchet.GraphFrame.from_literal([literal(root)])
    text = graph.tree(metric_column=columns, precision=3, expand_name=True, render_header=False)
    return text.decode("utf-8") if isinstance(text, bytes) else text


def sorted_kernels(root: Node, columns: list[str]) -> list[str]:
    """Kernels (leaves run on a device; every leaf if none did), largest first metric first; NaN last."""
    leaves = [n for n in root.walk() if not n.children and n is not root]
    leaves = [n for n in leaves if n.device is not None] or leaves
    first = columns[0]

    def order(node):
        value = node.values.get(first, math.nan)
        return (math.isnan(value), -value if not math.isnan(value) else 0.0)

    leaves.sort(key=order)
    width = min(max([len(n.name) for n in leaves] + [6]), 100)
    lines = [f"kernels sorted by {first}:", f"{'kernel':<{width}}  " + "  ".join(f"{c:>12}" for c in columns)]
    for node in leaves:
        name = node.name if len(node.name) <= 100 else node.name[:97] + "..."
        cells = "  ".join(f"{node.values.get(c, math.nan):>12.3f}" for c in columns)
        lines.append(f"{name:<{width}}  {cells}")
    return lines
