"""llnl-hatchet stays the analysis path: a profile as a ``hatchet.GraphFrame``.

The terminal viewer no longer draws with hatchet (its renderer is quadratic in
the nodes); for pandas-style analysis, hatchet queries and its own plots, load
the file here.  The root's ``metadata`` and the device info are not nodes and
stay out of the graph; upstream's ``__proton_launch_metadata`` frames too.

hatchet learns which columns add up from the root's metrics alone, and takes
``"time"`` as the column ``tree()`` draws; neither fits a Proton profile, so
both are set here (decision 0221): the metrics that add up get inclusive
columns, and the default metric is the one that covers the profile.
"""

from __future__ import annotations

from ..formats import keys as file_keys
from ..formats.hatchet import METADATA_KEY, read_document
from ..inclusive import is_inclusive
from .errors import ViewerError
from .shape import METADATA_SCOPE

INSTALL_HINT = "llnl-hatchet is not installed: pip install proton-profiler[viewer]"
#: Columns that label a node, never metrics.
LABELS = ("name", "device_id", "device_type")


def _import_hatchet():
    try:
        import hatchet
        from hatchet import GraphFrame  # noqa: F401  (a different 'hatchet' package lacks it)
    except Exception:
        raise ViewerError(INSTALL_HINT) from None
    return hatchet


def _base(key: str) -> str:
    return key.split("(")[0].strip().lower()


def covering_metric(keys, carried) -> str | None:
    """The metric that covers a profile: GPU ``time`` where a node has it, else ``cpu_time``, else the
    metric most nodes carry (the first of ``keys`` on a tie); None without metrics.

    ``carried(key)`` is how many nodes have a value (not 0) for ``key``.  A
    picture or table drawn by a metric only two nodes carry shows two nodes.
    """
    keys = list(keys)
    counts = {key: carried(key) for key in keys}
    for wanted in ("time", "cpu_time"):
        for key in keys:
            if _base(key) == wanted and counts[key]:
                return key
    best = None
    for key in keys:
        if best is None or counts[key] > counts[best]:
            best = key
    return best


def _metric_kinds(root: dict) -> dict:
    """Kinds of an upstream file's keys its root does not mark (those never add up); ``{}`` for ours,
    whose keys are spelled with their kind (decision 0210)."""
    if file_keys.is_ours(root.get(METADATA_KEY)):
        return {}
    found: dict[str, None] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        found.update(dict.fromkeys(node.get("metrics") or {}))
        stack.extend(k for k in node.get("children") or () if isinstance(k, dict))
    return file_keys.upstream_kinds(found, (root.get("metrics") or {}).keys())


def load_graphframe(path, inclusive: bool = True):
    """The hatchet file at ``path`` as a ``hatchet.GraphFrame``.

    Values in the file are exclusive; with ``inclusive`` (the default) every
    metric that adds up (GPU time, count, flops, bytes, user metrics) gets its
    inclusive column (``"time (ns) (inc)"``, ``"flops (inc)"``, ...), as
    upstream's viewer computes them; ``cpu_time``, ``(exc)`` and ``(pty)``
    metrics stay per node.  ``gf.default_metric`` (what ``gf.tree()`` draws)
    is the column of the metric that covers the profile: GPU time, else
    ``cpu_time``.  Raises ViewerError if llnl-hatchet is missing,
    :class:`~proton_core.formats.hatchet.HatchetError` for a file that is not a profile.
    """
    hatchet = _import_hatchet()
    root, _devices = read_document(path)
    root = dict(root)
    kinds = _metric_kinds(root)
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
    frame = graph.dataframe
    metrics = [c for c in frame.columns if c not in LABELS and _numeric(frame[c])]
    graph.exc_metrics = [m for m in metrics if is_inclusive(m, kinds)]  # hatchet sums these into "<m> (inc)"
    graph.inc_metrics = []
    if inclusive:
        graph.update_inclusive_columns()
    default = covering_metric(metrics, lambda m: int((frame[m].fillna(0) != 0).sum()))
    if default is not None:
        graph.default_metric = f"{default} (inc)" if inclusive and default in graph.exc_metrics else default
    return graph


def _numeric(column) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return is_numeric_dtype(column) and not is_bool_dtype(column)
