"""Metric columns: raw metrics by name and the derived forms of the viewer, one list per column.

Values in a profile are exclusive per node.  Inclusive metrics are summed
over each subtree before deriving (``cpu_time``, ``(exc)`` and ``(pty)``
metrics are not: a parent's CPU time already covers its children's).  A node
with nothing to show has NaN, which the renderer prints as ``-``: an inclusive
metric that no node of a subtree carries stays NaN rather than becoming 0.
"""

from __future__ import annotations

import math
import re
import sys

from ..inclusive import is_inclusive
from ..inclusive import kind as kind_of
from .errors import MissingMetric, ViewerError
from .peaks import peak_bandwidth, peak_flops

NAN = math.nan
MAX = sys.float_info.max
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
PREFIXES = {"": 1.0, "g": 1e9, "t": 1e12}
WIDTHS = (8, 16, 32, 64)

_TIME = re.compile(r"^(avg_)?(cpu_)?time/(s|ms|us|ns)$")
_FLOP = re.compile(r"^([gt]?)flop(8|16|32|64)?/s$")
_BYTE = re.compile(r"^([gt]?)byte/s$")
_PERCENT = re.compile(r"^(.+)/%$")

DERIVED_HELP = """derived metrics (computed from the profile's raw metrics):
  time/s|ms|us|ns            GPU time, summed over each subtree
  avg_time/s|ms|us|ns        time / count
  cpu_time/s|ms|us|ns        host time of cpu_timed_scope (exclusive, not summed)
  avg_cpu_time/s|ms|us|ns    cpu_time / count of the same node
  [g|t]flop[8|16|32|64]/s    flops<width> / time (plain flop/s: 'flops', or all widths)
  [g|t]byte/s                bytes / time
  util                       max(sum_w flops_w / peak_w, bytes / peak_bandwidth) / time, per kernel
  <metric>/%                 percent of the whole profile's <metric> (e.g. time/%, samples/%, stall_wait/%)

intra-kernel scopes (backend="instrumentation"): cycles, scope_calls and warps are per scope node
  cycles                     cycles of the scope summed over warps and calls (not summed up the tree:
                             a scope's cycles already cover the scopes nested in it)
  normalized_cycles          cycles / warps: the scope's average cycles per warp

instruction samples (mode="pcsampling"): samples and stall_<reason> are plain counts, summed
like time; --lines REGEX lists a kernel's samples per source line"""


def base_name(key: str) -> str:
    return key.split("(")[0].strip().lower()


def _spelling(name: str) -> str:
    """A name compared without case or blanks: 'm (exc)' and 'M(exc)' are one metric."""
    return "".join(name.split()).lower()


def find_raw(name: str, keys) -> str | None:
    """The profile key for a user-given name: exact up to case and blanks, or without its unit."""
    want = _spelling(name)
    for key in keys:
        if want == _spelling(key):
            return key
    for key in keys:
        if want == _spelling(base_name(key)):
            return key
    return None


def subtree_sums(values, order, parent) -> list:
    """Per node, ``values`` summed over its subtree (of the nodes in ``order``); NaN where none has a value."""
    sums = list(values)
    for i in reversed(order):  # every child before its parent
        v = sums[i]
        if v == v:
            p = parent[i]
            if p >= 0:
                s = sums[p]
                sums[p] = v if s != s else s + v
    return finite(sums)


def finite(values: list) -> list:
    """``values`` with sums past the largest double clamped to it, as the writer clamps (decision 0180):
    every number shown or exported (JSON has no Infinity) stays a number."""
    if math.inf in values or -math.inf in values:  # one C-level scan in the common case
        values = [MAX if v == math.inf else -MAX if v == -math.inf else v for v in values]
    return values


class Columns:
    """Computes requested columns over a shaped table: ``compute(metric)`` -> a value per node (NaN: none)."""

    def __init__(self, table, order, parent) -> None:
        self.table = table
        self.order = order  # pre-order of the nodes shown
        self.parent = parent
        self.keys = table.metric_keys()
        self._sums: dict[str, list] = {}

    # --------------------------------------------------------- raw values ----
    def value(self, key: str):
        """Per node: the subtree's sum for inclusive keys, the node's own value for the others."""
        if not self.table.is_inclusive(key):
            return finite(self.table.cols[key])  # files merged (or diffed) can sum past a double
        sums = self._sums.get(key)
        if sums is None:
            sums = self._sums[key] = subtree_sums(self.table.cols[key], self.order, self.parent)
        return sums

    def total(self, key: str) -> float:
        """The whole profile's amount of ``key``: the root's sum, or every shown node's for exclusive ones."""
        if self.table.is_inclusive(key):
            return self.value(key)[self.table.root]
        col = self.table.cols[key]
        return sum(v for v in (col[i] for i in self.order) if v == v)

    def need(self, metric: str, name: str) -> str:
        key = find_raw(name, self.keys)
        if key is None:
            have = ", ".join(self.keys) or "none"
            raise MissingMetric(f"metric {metric!r} needs '{name}' but the profile has only: {have}", needs=name)
        return key

    @staticmethod
    def seconds_per_unit(key: str) -> float:
        m = re.search(r"\((s|ms|us|ns)\)", key)
        return TIME_UNITS[m.group(1) if m else "ns"]

    # ------------------------------------------------------------- columns ----
    def compute(self, metric: str) -> list:
        """Values of ``metric`` per node; MissingMetric if the profile lacks its sources, ViewerError if malformed."""
        return finite(self._compute(metric))

    def _compute(self, metric: str) -> list:
        key = find_raw(metric, self.keys)
        if key is not None:  # a raw metric as named, even where it looks like a derived form
            return list(self.value(key))
        m = _TIME.match(metric)
        if m:
            return self._time(metric, *m.groups())
        m = _FLOP.match(metric)
        if m:
            prefix, width = m.groups()
            if width:
                keys = [self.need(metric, f"flops{width}")]
            else:
                plain = find_raw("flops", self.keys)
                keys = [plain] if plain else [k for w in WIDTHS if (k := find_raw(f"flops{w}", self.keys))]
                if not keys:
                    self.need(metric, "flops")
            return self._rate(metric, keys, PREFIXES[prefix])
        m = _BYTE.match(metric)
        if m:
            return self._rate(metric, [self.need(metric, "bytes")], PREFIXES[m.group(1)])
        if metric == "util":
            return self._util()
        if metric == "normalized_cycles":
            return self._per_warp(metric)
        m = _PERCENT.match(metric)
        if m:
            inner = m.group(1)
            key = find_raw(inner, self.keys)
            if key is None:
                if _TIME.match(inner) or _FLOP.match(inner) or _BYTE.match(inner):
                    raise ViewerError(f"metric {metric!r}: take the percent of a raw metric, e.g. time/%")
                self.need(metric, inner)
            total = self.total(key)
            if not total or total != total:
                return [NAN] * self.table.size
            scale = 100.0 / total
            return [v * scale for v in self.value(key)]
        raise MissingMetric(
            f"unknown metric {metric!r}: use -l to list this profile's metrics, or a derived form such as time/ms"
        )

    def _time(self, metric, avg, cpu, unit):
        key = self.need(metric, "cpu_time" if cpu else "time")
        factor = self.seconds_per_unit(key) / TIME_UNITS[unit]
        times = self.value(key)
        if not avg:
            return [v * factor for v in times]
        count = self.need(metric, "count")
        counts = self.table.cols[count] if cpu else self.value(count)  # a scope's own calls for its cpu_time
        return [t * factor / n if n else NAN for t, n in zip(times, counts)]  # n NaN: t / NaN is NaN

    def _per_warp(self, metric):
        """A node's own cycles over its own warps (both per scope node, never subtree sums)."""
        cycles = self.table.cols[self.need(metric, "cycles")]
        warps = self.table.cols[self.need(metric, "warps")]
        return [c / w if w and w == w else NAN for c, w in zip(cycles, warps)]

    def _present_sum(self, keys):
        """Per node, the sum of ``keys`` that have a value there (NaN where none has)."""
        out = list(self.value(keys[0]))
        for key in keys[1:]:
            out = [a + b if a == a and b == b else (a if a == a else b) for a, b in zip(out, self.value(key))]
        return out

    def _rate(self, metric, keys, scale):
        time_key = self.need(metric, "time")
        per = self.seconds_per_unit(time_key) * scale
        amounts = self._present_sum(keys)
        return [a / (t * per) if t else NAN for a, t in zip(amounts, self.value(time_key))]

    def _util(self):
        time_key = self.need("util", "time")
        flops = {w: k for w in WIDTHS if (k := find_raw(f"flops{w}", self.keys))}
        byte_key = find_raw("bytes", self.keys)
        if not flops and byte_key is None:
            self.need("util", "flops<8|16|32|64> or bytes")
        table, devices = self.table, self.table.devices
        peaks: dict = {}
        for i in self.order:  # every device's peaks up front: one clear error, not NaNs
            device = table.device(i)
            if device is not None and device not in peaks and device[1] in devices.get(device[0], {}):
                info = devices[device[0]][device[1]]
                peaks[device] = ({w: peak_flops(device[0], info, w) for w in flops},
                                 peak_bandwidth(device[0], info) if byte_key is not None else None)
        times = self.value(time_key)
        per = self.seconds_per_unit(time_key)
        flop_values = {w: self.value(k) for w, k in flops.items()}
        byte_values = self.value(byte_key) if byte_key is not None else None
        out = [NAN] * table.size
        for i in self.order:
            device = table.device(i)
            if device not in peaks:
                continue
            flop_peaks, bandwidth = peaks[device]
            seconds = times[i] * per
            if not seconds or seconds != seconds:
                continue
            compute = sum(v / flop_peaks[w] for w, col in flop_values.items() if (v := col[i]) == v)
            memory = byte_values[i] / bandwidth if byte_values is not None and byte_values[i] == byte_values[i] else 0.0
            out[i] = max(compute, memory) / seconds
        return out


def default_metrics(table, keys: list[str]) -> list[str]:
    """Columns shown without ``-m``: ``time/ns``, with ``samples`` beside it in a sampled profile
    (``samples`` alone where no kernel has a time: a profile of samples only); else ``cpu_time/ns``, the
    metric that covers a host-only profile (as ``--html`` opens on it); else the first metric."""
    time_key, samples_key = find_raw("time", keys), find_raw("samples", keys)
    if samples_key is None:
        if time_key:
            return ["time/ns"]
        return ["cpu_time/ns"] if find_raw("cpu_time", keys) else [keys[0]]
    timed = time_key is not None and any(v == v and v != 0 for v in table.cols[time_key])
    return ["time/ns", samples_key] if timed else [samples_key]


KIND_WORDS = {"inc": "inclusive", "exc": "exclusive", "pty": "property"}


def describe(keys: list[str], kernels_with_lines=(), kinds: dict | None = None) -> list[str]:
    """Lines for ``-l``: raw metrics with their kind, then derived forms this profile supports,
    and the kernels ``--lines`` can list.  ``kinds``: what the file says of keys their spelling
    does not tell (:attr:`proton_core.model.table.Table.kinds`)."""
    lines = ["metrics in this profile:"]
    for key in keys:
        kind = KIND_WORDS[kind_of(key, kinds)]
        lines.append(f"  {key:<28} {kind}")
    derived = []
    has = lambda name: find_raw(name, keys) is not None  # noqa: E731
    if has("time"):
        derived += ["time/s|ms|us|ns", "time/%"]
        if has("count"):
            derived.append("avg_time/s|ms|us|ns")
        widths = [w for w in WIDTHS if has(f"flops{w}")]
        derived += [f"[g|t]flop{w}/s" for w in widths]
        if widths or has("flops"):
            derived.append("[g|t]flop/s")
        if has("bytes"):
            derived.append("[g|t]byte/s")
        if widths or has("bytes"):
            derived.append("util")
    if has("cpu_time"):
        derived += ["cpu_time/s|ms|us|ns"]
        if has("count"):
            derived.append("avg_cpu_time/s|ms|us|ns")
    if has("cycles") and has("warps"):
        derived.append("normalized_cycles")
    if has("samples"):
        derived.append("samples/%")
    derived += [f"{key.split('(')[0].strip()}/%" for key in keys
                if key.startswith("stall_") and is_inclusive(key, kinds)]
    lines.append("derived metrics available: " + (", ".join(derived) if derived else "none"))
    if kernels_with_lines:
        shown = list(kernels_with_lines)
        more = f" (+{len(shown) - 5} more)" if len(shown) > 5 else ""
        lines.append(f"per-line listing: --lines REGEX, for kernels: {', '.join(shown[:5])}{more}")
    return lines
