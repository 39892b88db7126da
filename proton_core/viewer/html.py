"""``--html``: one self-contained page with an interactive flame graph of the shown tree.

The page is the bundle built from ``js/`` (d3-flame-graph and the d3 modules
it uses, in ``static/``), the profile as a JSON block, and the bundle's licence
texts: no network, no npm at run time.  The page opens on the first of the
block's metrics: the one ``-m`` names first, else the one that covers the
profile (GPU time, else ``cpu_time``; decision 0222), so no frame is drawn
zero-wide only because the page opened on a metric few frames carry.
"""

from __future__ import annotations

import html as _html
import json
import os
from pathlib import Path

from .._version import __version__
from .derive import find_raw
from .flame import Frames
from .graphframe import covering_metric

STATIC = Path(__file__).with_name("static")
BUNDLE = STATIC / "flamegraph.bundle.js"
LICENSES = STATIC / "THIRD_PARTY_LICENSES.txt"
RANKS_SCRIPT = STATIC / "ranks.js"  # the per-rank bars of a distributed run's page

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="proton-view {version}">
<title>{title}</title>
</head>
<body>
<div id="proton-app"></div>
<script id="proton-data" type="application/json">{data}</script>
<script id="third-party-licenses" type="text/plain">{licenses}</script>
<script>{bundle}</script>
{extra}</body>
</html>
"""


def _numbers(values) -> list:
    """JSON has no NaN: a missing value is null."""
    return [None if v != v else v for v in values]


def opening_metric(view, frames: Frames) -> int:
    """Which of ``frames.metrics`` the page opens on: ``-m``'s first where it names one of them, else the
    metric that covers the profile: GPU time where a frame has it, else ``cpu_time``, else the one most
    frames carry."""
    metrics = frames.metrics
    if view.args.metrics:
        first = view.headers[0]
        key = find_raw(first, metrics) or find_raw(first.split("/")[0], metrics)
        if key is not None:
            return metrics.index(key)
    cols, order = view.table.cols, frames.order

    def carried(key: str) -> int:
        col = cols[key]
        return sum(1 for i in order if (v := col[i]) == v and v != 0)

    return metrics.index(covering_metric(metrics, carried))


def page_data(view, frames: Frames) -> dict:
    """The JSON the page reads: flat arrays over the frames in pre-order (any depth, no nesting)."""
    first = opening_metric(view, frames)
    ranked = [first] + [k for k in range(len(frames.metrics)) if k != first]  # the page opens on metrics[0]
    index: dict[str, int] = {}
    name_ids = [index.setdefault(n, len(index)) for n in frames.names]
    calc, order = view.calc, frames.order
    tips = list(view.headers) + [k for k in calc.keys if k not in view.headers]
    tip_values = list(view.columns) + [calc.value(k) for k in calc.keys if k not in view.headers]
    return {
        "title": os.path.basename(view.table.path) or "profile",
        "subtitle": view.root_words,
        "diff": frames.diff,
        "names": list(index),
        "name": name_ids,
        "parent": frames.parent,
        "metrics": [frames.metrics[k] for k in ranked],
        "value": [frames.widths[k] for k in ranked],
        "delta": [frames.deltas[k] for k in ranked] if frames.diff else None,
        "tips": tips,
        "tip": [_numbers(values[i] for i in order) for values in tip_values],
    }


def rank_data(view, frames: Frames) -> dict | None:
    """Of a distributed run's merged view: each rank's value of the compared metric per frame, for the page's
    per-rank bars (``static/ranks.js``); None otherwise."""
    if not getattr(view, "rank_columns", None):
        return None
    return {"metric": view.headers[0], "ranks": list(view.merged.ranks),
            "values": [_numbers(col) for col in view.rank_values(frames.order)]}


def _script_safe(text: str) -> str:
    """Text that cannot close the <script> element it sits in."""
    return text.replace("</", "<\\/")


def write(view, path: str) -> int:
    """Write the page to ``path``; returns the number of frames in it."""
    frames = Frames(view)
    content = page_data(view, frames)
    ranks = rank_data(view, frames)
    extra = ""
    if ranks is not None:
        content["ranks"] = ranks
        extra = f'<script id="proton-ranks-script">{_script_safe(RANKS_SCRIPT.read_text(encoding="utf-8"))}</script>\n'
    data = json.dumps(content, separators=(",", ":"), allow_nan=False)
    page = PAGE.format(
        version=__version__,
        title=_html.escape(f"{os.path.basename(view.table.path)} - proton-view"),
        data=_script_safe(data),
        licenses=_script_safe(LICENSES.read_text(encoding="utf-8")),
        bundle=_script_safe(BUNDLE.read_text(encoding="utf-8")),
        extra=extra,
    )
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return len(frames.order)
