"""llnl-hatchet stays the analysis path: a profile as a ``hatchet.GraphFrame``.

The terminal viewer no longer draws with hatchet (its renderer is quadratic in
the nodes); for pandas-style analysis, hatchet queries and its own plots, load
the file here.  The root's ``metadata`` and the device info are not nodes and
stay out of the graph; upstream's ``__proton_launch_metadata`` frames too.
"""

from __future__ import annotations

from ..formats.hatchet import METADATA_KEY, read_document
from .errors import ViewerError
from .shape import METADATA_SCOPE

INSTALL_HINT = "llnl-hatchet is not installed: pip install proton-profiler[viewer]"


def _import_hatchet():
    try:
        import hatchet
        from hatchet import GraphFrame  # noqa: F401  (a different 'hatchet' package lacks it)
    except Exception:
        raise ViewerError(INSTALL_HINT) from None
    return hatchet


def load_graphframe(path, inclusive: bool = True):
    """The hatchet file at ``path`` as a ``hatchet.GraphFrame``.

    Values in the file are exclusive; with ``inclusive`` (the default) the
    frame's inclusive columns (``"time (ns) (inc)"``, ...) are computed too,
    as upstream's viewer does.  Raises ViewerError if llnl-hatchet is missing,
    :class:`~proton_core.formats.hatchet.HatchetError` for a file that is not a profile.
    """
    hatchet = _import_hatchet()
    root, _devices = read_document(path)
    root = dict(root)
    root.pop(METADATA_KEY, None)
    stack = [root]
    while stack:  # iteratively: Python-context trees can be deeper than the recursion limit
        node = stack.pop()
        kids = node.get("children") or []
        kept = [k for k in kids if isinstance(k, dict) and (k.get("frame") or {}).get("name") != METADATA_SCOPE]
        if len(kept) != len(kids):
            node["children"] = kept
        stack.extend(kept)
    graph = hatchet.GraphFrame.from_literal([root])
    if inclusive:
        graph.update_inclusive_columns()
    return graph
