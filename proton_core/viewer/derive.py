"""Metric columns: raw metrics by name and the derived forms of the viewer.

Values in a profile are exclusive per node.  Inclusive metrics are summed
over each subtree before deriving (``cpu_time``, ``(exc)`` and ``(pty)``
metrics are not: a parent's CPU time already covers its children's).
"""

from __future__ import annotations

import re

from ..formats.hatchet import Node, Profile
from ..inclusive import is_inclusive, subtree_sums
from .peaks import peak_bandwidth, peak_flops
from .profile import ViewerError

NAN = float("nan")
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
  <metric>/%                 percent of the whole profile's <metric> (e.g. time/%)"""


def base_name(key: str) -> str:
    return key.split("(")[0].strip().lower()


def find_raw(name: str, keys) -> str | None:
    """The profile key for a user-given name: exact, case-insensitive, or without its unit."""
    low = name.strip().lower()
    for key in keys:
        if low == key.lower():
            return key
    for key in keys:
        if low == base_name(key):
            return key
    return None


class Columns:
    """Computes the requested columns into ``node.values`` for a profile."""

    def __init__(self, profile: Profile, root: Node) -> None:
        self.profile = profile
        self.root = root
        self.keys = profile.metric_keys()
        self.incl: dict[int, dict[str, float]] = {}
        self._sum_subtrees()

    # --------------------------------------------------------- raw values ----
    def _sum_subtrees(self) -> None:
        inclusive = [k for k in self.keys if is_inclusive(k)]
        sums = subtree_sums(self.root, inclusive, lambda n, k: n.metrics.get(k, 0), lambda n: n.children)
        for node in self.root.walk():
            values = {k: v for k, v in node.metrics.items() if k in self.keys}
            values.update(sums[id(node)])
            self.incl[id(node)] = values

    def value(self, node: Node, key: str):
        return self.incl[id(node)].get(key, NAN if not is_inclusive(key) else 0)

    def total(self, key: str) -> float:
        """The whole profile's amount of ``key``: ROOT's inclusive sum, or every node's for exclusive ones."""
        if is_inclusive(key):
            return self.value(self.root, key)
        return sum(n.metrics.get(key, 0) for n in self.root.walk())

    def need(self, metric: str, name: str) -> str:
        key = find_raw(name, self.keys)
        if key is None:
            have = ", ".join(self.keys) or "none"
            raise ViewerError(f"metric {metric!r} needs '{name}' but the profile has only: {have}")
        return key

    def seconds(self, key: str, value: float) -> float:
        m = re.search(r"\((s|ms|us|ns)\)", key)
        return value * TIME_UNITS[m.group(1) if m else "ns"]

    # ------------------------------------------------------------- columns ----
    def compute(self, metric: str):
        """Fill ``node.values[metric]`` on every node; raise ViewerError if it cannot be derived."""
        fn = self.column(metric)
        for node in self.root.walk():
            try:
                node.values[metric] = float(fn(node))
            except ZeroDivisionError:
                node.values[metric] = NAN

    def column(self, metric: str):
        m = _TIME.match(metric)
        if m:
            avg, cpu, unit = m.groups()
            key = self.need(metric, "cpu_time" if cpu else "time")
            count = self.need(metric, "count") if avg else None
            scale = TIME_UNITS[unit]

            def time_column(node):
                t = self.seconds(key, self.value(node, key)) / scale
                if count is None:
                    return t
                n = self.value(node, count) if not cpu else node.metrics.get(count, 0)
                return t / n if n else NAN

            return time_column
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
        m = _PERCENT.match(metric)
        if m:
            inner = m.group(1)
            key = find_raw(inner, self.keys)
            if key is None:
                if _TIME.match(inner) or _FLOP.match(inner) or _BYTE.match(inner):
                    raise ViewerError(f"metric {metric!r}: take the percent of a raw metric, e.g. time/%")
                self.need(metric, inner)
            total = self.total(key)
            return lambda node: self.value(node, key) / total * 100.0
        key = find_raw(metric, self.keys)
        if key is None:
            raise ViewerError(
                f"unknown metric {metric!r}: use -l to list this profile's metrics, or a derived form such as time/ms"
            )
        return lambda node: self.value(node, key)

    def _rate(self, metric, keys, scale):
        time_key = self.need(metric, "time")

        def rate(node):
            seconds = self.seconds(time_key, self.value(node, time_key))
            return sum(self.value(node, k) for k in keys) / seconds / scale

        return rate

    def _util(self):
        time_key = self.need("util", "time")
        flops = {w: k for w in WIDTHS if (k := find_raw(f"flops{w}", self.keys))}
        byte_key = find_raw("bytes", self.keys)
        if not flops and byte_key is None:
            self.need("util", "flops<8|16|32|64> or bytes")
        devices = self.profile.devices
        for node in self.root.walk():  # check every device up front: one clear error, not NaNs
            device = node.device
            if device is not None and device[1] in devices.get(device[0], {}):
                info = devices[device[0]][device[1]]
                for width in flops:
                    peak_flops(device[0], info, width)
                if byte_key is not None:
                    peak_bandwidth(device[0], info)

        def util(node):
            device = node.device
            info = devices.get(device[0], {}).get(device[1]) if device else None
            if info is None:
                return NAN
            seconds = self.seconds(time_key, self.value(node, time_key))
            compute = sum(self.value(node, k) / peak_flops(device[0], info, w) for w, k in flops.items())
            memory = self.value(node, byte_key) / peak_bandwidth(device[0], info) if byte_key else 0.0
            return max(compute, memory) / seconds

        return util


def describe(profile: Profile) -> list[str]:
    """Lines for ``-l``: raw metrics with their kind, then derived forms this profile supports."""
    keys = profile.metric_keys()
    lines = ["metrics in this profile:"]
    for key in keys:
        kind = "inclusive" if is_inclusive(key) else ("property" if key.endswith("(pty)") else "exclusive")
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
    lines.append("derived metrics available: " + (", ".join(derived) if derived else "none"))
    return lines

