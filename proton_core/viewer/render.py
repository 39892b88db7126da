"""Printing: the call tree with a header, and the sorted kernel list; one pass over the shown nodes.

Numbers stand in aligned columns left of the tree, so a value is found by its
header whatever the depth; a node without a value shows ``-``.  Lines are
made a block at a time with list comprehensions: a million lines in about a second.
"""

from __future__ import annotations

BLANK = "-"
#: Deeper than this, lines stop indenting and say their level: a deep Python stack is not
#: a quadratic wall of glyphs.
MAX_INDENT = 64


def _cell(value: float) -> str:
    return BLANK if value != value else f"{value:.3f}"


def column_width(header: str, values, nodes) -> int:
    """The widest printed cell: the largest and smallest values are the longest at fixed precision."""
    present = [v for v in map(values.__getitem__, nodes) if v == v]
    width = max(len(header), len(BLANK))
    if present:
        width = max(width, len(_cell(max(present))), len(_cell(min(present))))
    return width


def header_line(headers: list[str], widths: list[int], label: str = "name") -> str:
    return "  ".join(f"{h:>{w}}" for h, w in zip(headers, widths)) + "  " + label


def rows(columns, widths, nodes) -> list[str]:
    """The numbers part of each line for ``nodes``: one ``%`` format per line, NaN turned into ``-``."""
    fmt = "  ".join(f"%{w}.3f" for w in widths)
    values = zip(*(map(col.__getitem__, nodes) for col in columns))
    out = [fmt % v for v in values]
    return [r.replace("nan", "  " + BLANK) if "nan" in r else r for r in out]  # digits never spell nan


def layout(table) -> tuple[list[int], list[str]]:
    """Pre-order of the reachable nodes and each one's tree glyphs (``│  ├─ ``); the root's are empty.

    Glyph strings are built once per parent and shared by its children.
    Below MAX_INDENT levels the glyphs stop growing and the line says its level.
    """
    kids = table.kids
    order, glyphs = [], []
    visit, mark = order.append, glyphs.append
    stack = [(table.root, "", "", 0)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        i, line, inner, depth = pop()
        visit(i)
        mark(line)
        ks = kids[i]
        if ks:
            depth += 1
            if depth > MAX_INDENT:
                level = f"[level {depth + 1}] "
                mid, end, mid_inner, end_inner = inner + "├─ " + level, inner + "└─ " + level, inner, inner
            else:
                mid, end, mid_inner, end_inner = inner + "├─ ", inner + "└─ ", inner + "│  ", inner + "   "
            push((ks[-1], end, end_inner, depth))
            if len(ks) > 1:
                extend([(k, mid, mid_inner, depth) for k in reversed(ks[:-1])])
    return order, glyphs


def tree_lines(table, columns: list, headers: list[str], root_words: str, name_of, chunk: int = 50000):
    """Blocks of text: the header line, then the root (with ``root_words``) and every reachable node.

    ``name_of(name)`` is how a name is printed.  Lines are made ``chunk``
    nodes at a time, so memory does not grow with the output.
    """
    order, glyphs = layout(table)
    widths = [column_width(h, c, order) for h, c in zip(headers, columns)]
    names = table.names
    shown = {n: name_of(n) for n in {names[i] for i in order}}
    yield header_line(headers, widths)
    for start in range(0, len(order), chunk):
        nodes = order[start:start + chunk]
        lines = [r + "  " + g + shown[names[i]]
                 for r, g, i in zip(rows(columns, widths, nodes), glyphs[start:start + chunk], nodes)]
        if start == 0 and root_words:
            lines[0] += " — " + root_words
        yield "\n".join(lines)


def sorted_kernels(table, first) -> list[int]:
    """``--print-sorted``'s nodes: every frame of the tree but the root, largest first, as upstream lists them.

    Upstream's viewer sorts its whole frame table (scopes, Python frames,
    kernels, the places inside a kernel) by the first metric and leaves out
    the first row, meaning the root; here the root is left out by name, since
    with an exclusive metric (``cpu_time``) the largest row need not be it.
    The list is taken after ``-i``/``-e``/``-t`` and before ``-d``, as
    upstream's.  Frames without a value for the first metric come last; ties
    keep tree order.
    """
    order, _ = table.walk()
    root = table.root
    frames = [i for i in order if i != root]
    valued = [i for i in frames if first[i] == first[i]]
    valued.sort(key=first.__getitem__, reverse=True)  # stable: ties keep tree order
    return valued + [i for i in frames if first[i] != first[i]]


def kernel_lines(table, leaves: list[int], columns: list, headers: list[str], name_of):
    """The sorted list: a title (upstream's words), a header, a line per frame (name first)."""
    printed = {n: name_of(n) for n in {table.names[i] for i in leaves}}
    shown = [printed[table.names[i]] for i in leaves]
    width = max([len(n) for n in shown] + [len("name")])
    widths = [max(12, column_width(h, c, leaves)) for h, c in zip(headers, columns)]
    yield f"kernels sorted by {headers[0]}:"
    yield f"{'name':<{width}}  " + "  ".join(f"{h:>{w}}" for h, w in zip(headers, widths))
    yield from (f"{name:<{width}}  {row}" for name, row in zip(shown, rows(columns, widths, leaves)))
