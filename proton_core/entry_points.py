"""Proton's entry points, read from the installed distributions once per process.

Every group Proton reads (``proton``: plugins; ``proton.on_import``: steps run
at import) comes from one pass over the distributions, made at the first need,
``import proton_core``.  Only the ``entry_points.txt`` files that name a
``proton`` group are parsed: a fraction of what ``importlib.metadata.entry_points()``
costs, which parses every distribution's.
"""

from __future__ import annotations

import re
from importlib import metadata

#: What a distribution's entry_points.txt holds when it declares a Proton group (``[proton]``, ``[proton.x]``).
_SECTION = "[proton"

_found: list | None = None  # [(distribution, [its Proton entry points])], in path order


def _scan() -> list:
    global _found
    if _found is None:
        found = []
        for dist in metadata.distributions():
            text = dist.read_text("entry_points.txt")
            if not text or _SECTION not in text:
                continue
            eps = [ep for ep in dist.entry_points if ep.group == "proton" or ep.group.startswith("proton.")]
            if eps:
                found.append((dist, eps))
        _found = found
    return _found


def select(group: str) -> list:
    """The entry points of ``group``.  A distribution found twice on the path counts once, the first (as
    ``importlib.metadata.entry_points`` has it); its name is read only where two offer one entry-point name."""
    out, owners = [], {}
    for dist, eps in _scan():
        mine = [ep for ep in eps if ep.group == group]
        if any(ep.name in owners and _same(owners[ep.name], dist) for ep in mine):
            continue
        for ep in mine:
            owners.setdefault(ep.name, dist)
        out += mine
    return out


def _same(a, b) -> bool:
    """Whether two distributions are one, installed twice (names compared as the packaging rules normalize them)."""
    return a is b or _normalized(a.name) == _normalized(b.name)


def _normalized(name: str | None) -> str:
    return re.sub(r"[-_.]+", "-", name or "").lower()
