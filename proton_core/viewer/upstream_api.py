"""Upstream Proton's Python viewer API (``triton.profiler.viewer``), on llnl-hatchet GraphFrames.

Code written against Triton's viewer calls ``get_raw_metrics``, ``derive_metrics``,
``filter_frames``, ``parse`` ... and works on the ``GraphFrame`` they return.
These are the same calls with the same results (Triton 3.6's behaviour), built
on :func:`~proton_core.viewer.graphframe.load_graphframe` (which reads our files
and upstream's, and knows which metrics add up) and on
:mod:`~proton_core.viewer.peaks` for ``util`` (decision 0240).

The terminal viewer (``proton-view``) does not use this module; it is for
scripts and notebooks, and for upstream's own tests under the import alias.

Names and shapes follow upstream:

- *inclusive metrics* are the file's metrics that add up the tree
  (``"time (ns)"``, ``"count"``, ``"flops8"``, ``"bytes"``): after
  ``gf.update_inclusive_columns()`` each has a ``"<name> (inc)"`` column;
- *exclusive metrics* are the other metric columns (``"cpu_time (ns)"``,
  ``(exc)``/``(pty)`` metrics), one value per node;
- a derived metric is named ``"<metric> (inc)"`` when computed from inclusive
  columns (``"time/ms (inc)"``, ``"tflop8/s (inc)"``), bare otherwise
  (``"util"``, a percentage of an exclusive metric).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import namedtuple

from .errors import MissingMetric, ViewerError
from .graphframe import LABELS, load_graphframe
from .peaks import peak_bandwidth, peak_flops

__all__ = [
    "FLOPS_WIDTHS", "FactorDict", "apply_diff_profile", "derivable_metrics", "derive_metrics", "emit_warnings",
    "filter_frames", "format_frames", "get_min_time_bytes", "get_min_time_flops", "get_raw_metrics",
    "match_available_metrics", "parse", "print_tree", "read", "show_metrics",
]

#: Operand widths of the ``flops<width>`` metrics (upstream's launch hook's list).
FLOPS_WIDTHS = (8, 16, 32, 64)


class MetricNotFound(MissingMetric, RuntimeError):
    """A metric the profile lacks; a RuntimeError as upstream raises, and one of the viewer's errors."""


FactorDict = namedtuple("FactorDict", ["name", "factor"])
_SECONDS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _per_second(name: str, prefix: str = "") -> FactorDict:
    return FactorDict(name, {f"{prefix}{name}/{unit}": f for unit, f in _SECONDS.items()})


time_factor_dict = _per_second("time")
avg_time_factor_dict = FactorDict("avg_time", {f"avg_{k}": v for k, v in time_factor_dict.factor.items()})
cpu_time_factor_dict = _per_second("cpu_time")
avg_cpu_time_factor_dict = FactorDict("avg_cpu_time",
                                      {f"avg_{k}": v for k, v in cpu_time_factor_dict.factor.items()})
bytes_factor_dict = FactorDict("bytes", {"byte/s": 1, "gbyte/s": 1e9, "tbyte/s": 1e12})


def _rates() -> dict:
    """Rate metrics (``byte/s``, ``tflop8/s``, ...) -> the raw metric they divide by time, and the scale."""
    table = {key: bytes_factor_dict for key in bytes_factor_dict.factor}
    for width in ("", *map(str, FLOPS_WIDTHS)):
        scales = {f"flop{width}/s": 1, f"gflop{width}/s": 1e9, f"tflop{width}/s": 1e12}
        table.update({key: FactorDict(f"flops{width}", scales) for key in scales})
    return table


#: upstream's name for the table of rate metrics
derivable_metrics = _rates()
_TIMES = {**{k: (time_factor_dict, False) for k in time_factor_dict.factor},
          **{k: (avg_time_factor_dict, True) for k in avg_time_factor_dict.factor},
          **{k: (cpu_time_factor_dict, False) for k in cpu_time_factor_dict.factor},
          **{k: (avg_cpu_time_factor_dict, True) for k in avg_cpu_time_factor_dict.factor}}


def _bare(metric: str) -> str:
    """A metric's name without its unit, lower case: ``"time (ns)"`` -> ``"time"``."""
    return metric.split("(")[0].strip().lower()


def match_available_metrics(metrics, inclusive_metrics, exclusive_metrics) -> list:
    """The columns holding ``metrics`` (names, case-insensitive, with or without unit): an inclusive
    metric's ``"(inc)"`` column, an exclusive metric's own column.  MetricNotFound for a name the
    profile lacks."""
    wanted = [metrics] if isinstance(metrics, str) else list(metrics or [])
    inclusive = list(inclusive_metrics)
    found = []
    for metric in wanted:
        key = metric.lower()
        for raw in inclusive + [m for m in exclusive_metrics if m not in inclusive]:
            if key in (raw, raw.lower(), _bare(raw)):
                found.append(f"{raw} (inc)" if raw in inclusive else raw)
                break
        else:
            raise MetricNotFound(f"metric {metric!r} is not in this profile; the --list flag lists its metrics",
                                 needs=metric)
    if not found:
        raise MetricNotFound("no metric was asked for")
    return found


def _path_of(file):
    """(path, temporary?) for a path or an open file; a file without a path on disk is copied to one."""
    if isinstance(file, (str, bytes, os.PathLike)):
        return os.fsdecode(file), False
    if isinstance(file, (list, dict)):  # the tree itself, as proton.data.get returns it (upstream's test_get_data)
        with tempfile.NamedTemporaryFile("w", suffix=".hatchet", delete=False) as out:
            json.dump(file, out)
        return out.name, True
    name = getattr(file, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        return name, False
    data = file.read()
    mode = "wb" if isinstance(data, bytes) else "w"
    with tempfile.NamedTemporaryFile(mode, suffix=".hatchet", delete=False) as out:
        out.write(data)
    return out.name, True


def get_raw_metrics(file):
    """``(gf, inclusive_metrics, exclusive_metrics, device_info)`` of a profile (an open file or a path).

    ``gf`` holds each node's own values (call ``gf.update_inclusive_columns()``
    for the ``(inc)`` columns, as :func:`read` does); upstream's launch-metadata
    scopes are left out.  ``device_info`` is the file's ``{device type: {device
    id: {arch, num_sms, ...}}}``.
    """
    from ..formats.hatchet import read_document

    path, temporary = _path_of(file)
    try:
        gf = load_graphframe(path, inclusive=False)
        device_info = read_document(path)[1]
    finally:
        if temporary:
            os.unlink(path)
    inclusive = list(gf.exc_metrics)  # hatchet's "exc_metrics": those it sums into "(inc)" columns
    frame = gf.dataframe
    exclusive = [c for c in frame.columns if c not in LABELS and c not in inclusive and _is_metric(frame[c])]
    return gf, inclusive, exclusive, device_info


def read(filename):
    """:func:`get_raw_metrics` of the file at ``filename``, inclusive columns computed."""
    gf, inclusive, exclusive, device_info = get_raw_metrics(filename)
    if not inclusive + exclusive:
        raise ViewerError(f"{filename}: no metrics found in the profile")
    gf.update_inclusive_columns()
    return gf, inclusive, exclusive, device_info


def _is_metric(column) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return is_numeric_dtype(column) and not is_bool_dtype(column)


def _device_rows(df, device_type: str, device_id: str):
    """Rows of one device: its id, and its type where the frame has that column."""
    rows = df["device_id"].astype(str) == str(device_id)
    if "device_type" in df.columns:
        rows &= (df["device_type"] == device_type) | df["device_type"].isna()
    return rows


def _devices(device_info):
    for device_type, devices in (device_info or {}).items():
        for device_id, info in (devices or {}).items():
            yield device_type, device_id, info


def get_min_time_flops(df, device_info):
    """The least time (s) each node's ``flops<width>`` take at its device's peak, one ``min_time`` column."""
    import pandas as pd

    result = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    if "device_id" not in df.columns:
        return result
    for device_type, device_id, info in _devices(device_info):
        rows = _device_rows(df, device_type, device_id)
        for width in FLOPS_WIDTHS:
            column = f"flops{width}"
            if column in df.columns and rows.any():
                peak = peak_flops(device_type, info, width)
                result.loc[rows, "min_time"] += df.loc[rows, column].fillna(0) / peak
    return result


def get_min_time_bytes(df, device_info):
    """The least time (s) each node's ``bytes`` take at its device's peak bandwidth, one ``min_time`` column."""
    import pandas as pd

    result = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    if "device_id" not in df.columns or "bytes" not in df.columns:
        return result
    for device_type, device_id, info in _devices(device_info):
        rows = _device_rows(df, device_type, device_id)
        if rows.any():
            result.loc[rows, "min_time"] += df.loc[rows, "bytes"].fillna(0) / peak_bandwidth(device_type, info)
    return result


def _seconds(df, column: str, factors: FactorDict):
    """The values of a time column (``"time (ns) (inc)"``) in seconds, by the unit its name gives."""
    unit = column.split("(")[1].split(")")[0].strip() if "(" in column else ""
    if unit not in _SECONDS:
        raise ViewerError(f"metric {column!r} has no time unit (s, ms, us or ns) in its name")
    return df[column] * _SECONDS[unit]


def derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info) -> list:
    """Add each of ``metrics`` to ``gf.dataframe`` (derived where it is a derived form) and return the
    column names, which also join ``gf.inc_metrics``/``gf.exc_metrics``.

    ``time/<unit>``, ``cpu_time/<unit>``, ``avg_time/<unit>`` (over ``count``),
    ``[g|t]flop[<width>]/s``, ``[g|t]byte/s``, ``util`` (the larger of the
    FLOP-bound and byte-bound least time over the node's time; NaN off device),
    ``<metric>/%`` (of the root's value for an inclusive metric, of the sum
    for an exclusive one), or a raw metric's name.  Expects inclusive columns
    (``gf.update_inclusive_columns()``).
    """
    import numpy as np

    df = gf.dataframe

    def column(name):
        return match_available_metrics(name, inclusive_metrics, exclusive_metrics)[0]

    derived = []
    for metric in metrics:
        if metric == "util":
            busy = get_min_time_flops(df, device_info)["min_time"].combine(
                get_min_time_bytes(df, device_info)["min_time"], max)
            df["util"] = busy / _seconds(df, column("time"), time_factor_dict)
            if "device_id" in df.columns:
                df.loc[df["device_id"].isna(), "util"] = np.nan
            derived.append("util")
        elif metric in derivable_metrics:
            source, scales = derivable_metrics[metric]
            seconds = _seconds(df, column("time"), time_factor_dict)
            df[f"{metric} (inc)"] = df[column(source)] / seconds / scales[metric]
            derived.append(f"{metric} (inc)")
        elif metric in _TIMES:
            factors, average = _TIMES[metric]
            value = _seconds(df, column(factors.name.replace("avg_", "")), factors)
            if average:
                value = value / df[column("count")]
            df[f"{metric} (inc)"] = value / factors.factor[metric]
            derived.append(f"{metric} (inc)")
        elif "/" in metric:
            name, unit = metric.split("/", 1)
            if unit != "%":
                raise ViewerError(f"metric {metric!r}: unit {unit!r} is not one the viewer derives")
            source = column(name)
            inclusive = source.endswith("(inc)")
            total = df[source].iloc[0] if inclusive else df[source].sum()
            name = f"{metric} (inc)" if inclusive else metric
            df[name] = df[source] / total * 100.0
            derived.append(name)
        else:
            derived.append(column(metric))
    for name in derived:
        target = gf.inc_metrics if name.endswith("(inc)") else gf.exc_metrics
        if name not in target:
            target.append(name)
    return derived


def format_frames(gf, format):
    """Shorten frame names of the form ``path/file:line@function`` in place: ``file_function_line``
    (``file:line@function``), ``function_line`` (``line@function``), ``file_function``
    (``file@function``); ``full`` or None keeps them.  A name without ``@`` (a scope, a kernel) stays
    as it is under ``file_function`` too, where upstream writes ``ROOT@ROOT``."""

    def file_function(name):
        if "@" not in name:
            return name
        return f"{name.split('/')[-1].split(':')[0]}@{name.split('@')[-1].split(':')[0]}"

    shorten = {
        "file_function_line": lambda name: name.split("/")[-1],
        "function_line": lambda name: name.split(":")[-1],
        "file_function": file_function,
    }.get(format)
    if shorten is not None:
        gf.dataframe["name"] = gf.dataframe["name"].map(lambda name: shorten(name) if isinstance(name, str) else name)
    return gf


def filter_frames(gf, include=None, exclude=None, threshold=None, metric=None):
    """A GraphFrame of the paths through frames whose name matches ``include`` (a regular expression),
    without frames matching ``exclude`` and what is under them, and without frames whose ``metric``
    is below ``threshold``; the graph squashed (inclusive columns recomputed)."""
    from hatchet.query import NegationQuery, ObjectQuery

    if include:
        gf = gf.filter(ObjectQuery(["*", {"name": include}, "*"]), squash=True)
    if exclude:
        gf = gf.filter(NegationQuery(ObjectQuery([{"name": exclude}, "*"])), squash=True)
    if threshold:
        if not metric:
            raise ViewerError("a threshold needs the metric it applies to")
        gf = gf.filter(ObjectQuery(["*", {metric: f">= {threshold}"}]), squash=True)
    return gf


def emit_warnings(gf, metrics) -> None:
    """Say so where inclusive bytes went negative (an overflow in the program's counter)."""
    import numpy as np

    if "bytes (inc)" in metrics and len(gf.dataframe) and np.nanmin(gf.dataframe["bytes (inc)"].values) < 0:
        print("Warning: Negative byte values detected, this is usually the result of a datatype overflow\n")


def print_tree(gf, metrics, depth=100, format=None, print_sorted=False) -> None:
    """Print the tree with ``metrics`` (hatchet's renderer); with ``print_sorted``, every frame but the root
    by its first metric, largest first."""
    gf = format_frames(gf, format)
    print(gf.tree(metric_column=metrics, expand_name=True, depth=depth, render_header=False))
    if print_sorted:
        print("Sorted kernels by metric " + metrics[0])
        ordered = gf.dataframe.sort_values(by=[metrics[0]], ascending=False)
        for _, row in ordered.iloc[1:].iterrows():
            name = str(row["name"])
            print("{:105} {:.4}".format(name[:100] + "..." if len(name) > 100 else name, row[metrics[0]]))
    emit_warnings(gf, metrics)


def parse(metrics, filename, include=None, exclude=None, threshold=None):
    """``(gf, columns)``: the profile with ``metrics`` derived, filtered as :func:`filter_frames` does by the
    first of them."""
    gf, inclusive, exclusive, device_info = read(filename)
    columns = derive_metrics(gf, metrics, inclusive, exclusive, device_info)
    return filter_frames(gf, include, exclude, threshold, columns[0]), columns


def apply_diff_profile(gf, derived_metrics, diff_file, metrics, include, exclude, threshold):
    """``gf`` minus the profile in ``diff_file`` (same metrics derived and filters applied), node by node."""
    other, _ = parse(metrics, diff_file, include, exclude, threshold)
    inclusive = [m for m in derived_metrics if m.endswith("(inc)")]
    exclusive = [m for m in derived_metrics if not m.endswith("(inc)")]
    for frame in (gf, other):
        frame.inc_metrics, frame.exc_metrics = list(inclusive), list(exclusive)
    return gf.sub(other)


def show_metrics(file_name) -> None:
    """Print the profile's inclusive and exclusive metrics, without units."""
    _, inclusive, exclusive, _ = get_raw_metrics(file_name)
    for title, names in (("inclusive", inclusive), ("exclusive", exclusive)):
        print(f"Available {title} metrics:")
        for name in names:
            print(f"- {_bare(name)}")

