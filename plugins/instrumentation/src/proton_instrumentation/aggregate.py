"""From decoded intervals to ``Batch.kernel_metrics`` parts and trace slices (DESIGN.md §6).

Granularity is applied here on Triton 3.6, which records per warp only: the intervals of the warps
of one unit (a group of ``fold_warps`` consecutive warp ids, or the whole CTA when it is None) are
folded per scope and occurrence: the k-th interval of scope s in each warp of the unit becomes one
interval from the earliest start to the latest end.

Scope paths come from the static tables of ``get_scope_id_names`` (``[(id, name)]``) and
``get_scope_id_parents`` (``[(child, parent)]``), root first. A scope id missing from the names table
is called ``scope_<id>`` and placed under the scope that dynamically enclosed it.

Metrics per path (all sums, so the core may add them across launches and flushes): ``cycles``
(summed durations), ``scope_calls`` (intervals; ``count`` is reserved), ``warps`` (distinct units:
(cta, warp), (cta, group) or cta), ``scope_time (ns)`` (cycles at the rated SM clock, in kHz).
All are of kind ``(exc)``: a scope's measured cycles already include those of the scopes nested in
it, so readers must not add children into parents (docs/decisions/0063-instrumented-scope-metrics-exclusive.md).
The average cycles per warp is not summable: :func:`scope_stats` gives it, the viewer derives it
(``normalized_cycles``).

To check on the GPU: folding by occurrence index assumes every warp of a unit recorded the same
occurrences (false when a ring wrapped in some warps only, or with data-dependent control flow per
warp); trace times assume the CTA's first decoded record is close to its entry globaltimer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from proton_core.plugin_api import ProtonError, metric_name

from .decode import Interval
from .mode import GRANULARITIES

CYCLES, CALLS, WARPS, TIME = "cycles (exc)", "scope_calls (exc)", "warps (exc)", "scope_time (ns)(exc)"
METRIC_NAMES = (CYCLES, CALLS, WARPS, TIME)


def _fold_size(granularity) -> int | None:
    if granularity is None or isinstance(granularity, int):
        return granularity
    if granularity not in GRANULARITIES:
        raise ProtonError(f"granularity {granularity!r} is not valid: use one of {tuple(GRANULARITIES)}")
    return GRANULARITIES[granularity]


def unit_of(warp: int, fold: int | None) -> int:
    """The unit a warp belongs to: the warp itself, its group index, or -1 (the CTA)."""
    return -1 if fold is None else warp // fold


def fold_intervals(intervals, granularity="warp") -> list[Interval]:
    """Fold per-warp intervals into units of the granularity (``"warp"``: unchanged).

    ``warp`` of a folded interval is the unit index (-1: the CTA); depth and parent come from the
    first warp's interval of each occurrence.
    """
    fold = _fold_size(granularity)
    if fold == 1:
        return list(intervals)
    occurrence: dict[tuple, int] = defaultdict(int)
    groups: dict[tuple, list[Interval]] = {}
    for iv in sorted(intervals, key=lambda iv: (iv.cta, iv.warp, iv.start, -iv.end)):
        k = occurrence[(iv.cta, iv.warp, iv.scope_id)]
        occurrence[(iv.cta, iv.warp, iv.scope_id)] = k + 1
        groups.setdefault((iv.cta, unit_of(iv.warp, fold), iv.scope_id, k), []).append(iv)
    out = []
    for (cta, unit, scope_id, _), ivs in groups.items():
        first = ivs[0]
        out.append(Interval(cta, unit, scope_id, min(i.start for i in ivs), max(i.end for i in ivs), first.depth,
                            first.parent))
    out.sort(key=lambda iv: (iv.cta, iv.warp, iv.start, -iv.end))
    return out


class ScopeNames:
    """Scope id → name and → path (root first) from the compiler's static tables."""

    def __init__(self, names, parents=()):
        self.names = dict(names)
        self.parents = dict(parents)
        self._paths: dict[tuple[int, int | None], tuple[str, ...]] = {}

    def name(self, scope_id: int) -> str:
        return self.names.get(scope_id, f"scope_{scope_id}")

    def path(self, scope_id: int, dynamic_parent: int | None = None) -> tuple[str, ...]:
        key = (scope_id, None if scope_id in self.names else dynamic_parent)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        chain, seen, cur = [self.name(scope_id)], {scope_id}, self.parents.get(scope_id)
        if cur is None and scope_id not in self.names:
            cur = dynamic_parent
        while cur is not None and cur not in seen:  # seen: a cyclic table cannot loop forever
            seen.add(cur)
            chain.append(self.name(cur))
            cur = self.parents.get(cur)
        path = tuple(reversed(chain))
        self._paths[key] = path
        return path


@dataclass(frozen=True)
class ScopeStats:
    path: tuple[str, ...]
    cycles: int
    calls: int
    warps: int
    time_ns: float

    @property
    def avg_cycles_per_warp(self) -> float:
        return self.cycles / self.warps if self.warps else 0.0


def _ns_per_cycle(sm_clock_khz: float) -> float:
    if not sm_clock_khz or sm_clock_khz <= 0:
        raise ProtonError(f"SM clock rate {sm_clock_khz!r} kHz is not usable to turn cycles into ns: "
                          "pass the device's clock rate in kHz (> 0)")
    return 1e6 / sm_clock_khz


def scope_stats(intervals, names, parents=(), *, granularity="warp", sm_clock_khz: float) -> list[ScopeStats]:
    """Per scope path: cycles, calls, distinct units, time; sorted by path."""
    ns = _ns_per_cycle(sm_clock_khz)
    table = names if isinstance(names, ScopeNames) else ScopeNames(names, parents)
    cycles: dict[tuple, int] = defaultdict(int)
    calls: dict[tuple, int] = defaultdict(int)
    units: dict[tuple, set] = defaultdict(set)
    for iv in fold_intervals(intervals, granularity):
        path = table.path(iv.scope_id, iv.parent)
        cycles[path] += iv.end - iv.start
        calls[path] += 1
        units[path].add((iv.cta, iv.warp))
    return [ScopeStats(p, cycles[p], calls[p], len(units[p]), cycles[p] * ns) for p in sorted(cycles)]


def kernel_metrics(intervals, names, parents=(), *, granularity="warp", sm_clock_khz: float):
    """``[(sub_path, ((name, value), ...))]``: the ``sub_path``/``metrics`` part of ``Batch.kernel_metrics``."""
    for name in METRIC_NAMES:
        metric_name(name)  # the core's parser: fails loudly should a name become reserved
    return [(s.path, ((CYCLES, s.cycles), (CALLS, s.calls), (WARPS, s.warps), (TIME, s.time_ns)))
            for s in scope_stats(intervals, names, parents, granularity=granularity, sm_clock_khz=sm_clock_khz)]


def trace_slices(intervals, names, ctas=(), *, granularity="warp", sm_clock_khz: float):
    """``{(cta, unit): [(scope name, start_ns, end_ns)]}`` relative to the launch, time ordered.

    ``ctas``: the decoded :class:`~proton_instrumentation.decode.CtaHeader` list; a CTA's slices start
    at its entry globaltimer minus the launch's earliest, plus (cycle - the CTA's first decoded cycle)
    at the SM clock, which keeps tracks of different SMs comparable (``%clock`` is per SM).
    Without headers every CTA starts at 0.
    """
    ns = _ns_per_cycle(sm_clock_khz)
    table = names if isinstance(names, ScopeNames) else ScopeNames(names)
    folded = fold_intervals(intervals, granularity)
    entry = {c.cta: c.start_ns for c in ctas}
    t0 = min(entry.values()) if entry else 0
    first: dict[int, int] = {}
    for iv in folded:
        first[iv.cta] = min(first.get(iv.cta, iv.start), iv.start)
    out: dict[tuple[int, int], list] = defaultdict(list)
    for iv in folded:
        offset = entry.get(iv.cta, t0) - t0
        out[(iv.cta, iv.warp)].append((table.name(iv.scope_id), offset + (iv.start - first[iv.cta]) * ns,
                                       offset + (iv.end - first[iv.cta]) * ns))
    for slices in out.values():
        slices.sort(key=lambda s: (s[1], -s[2]))
    return dict(out)
