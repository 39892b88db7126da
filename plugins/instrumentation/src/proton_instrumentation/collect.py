"""From copied-back launches to what one flush delivers (aggregated, never one entry per record).

Per launch: decode its buffer with the options the kernel was compiled with, then add into totals
keyed like the core's routing: ``(epoch, node, kernel, device)`` for the kernel record (count 1, time
= the in-kernel globaltimer span from the first CTA's entry to the last CTA's final copy: the
instrumented kernel's own duration) and ``(..., sub_path)`` for the per-scope metrics. With tracing,
each interval becomes a slice on a track per (launch, CTA, unit), placed at the launch's host time
plus its offset inside the launch; at most :data:`MAX_SLICES_PER_LAUNCH` per launch, the rest counted.

The launches of one kernel in a batch (one copy of an arena region, :mod:`.buffers`) are decoded
together by :mod:`.fastpath` when their records are regular (the common case), with results
identical to the exact per-launch path, which takes the rest.

Every loss is counted in ``dropped`` (records overwritten by a full ring, unpaired records, CTAs with
no header, launches that could not be decoded) and explained once per kernel and kind with one line.
"""

from __future__ import annotations

import re

from proton_core.plugin_api import Batch, ProtonError, warn

from . import fastpath
from .aggregate import CYCLES, CALLS, TIME, WARPS, _ns_per_cycle, kernel_metrics, trace_slices
from .decode import decode_launch

MAX_SLICES_PER_LAUNCH = 200_000


def track_name(cta: int, unit: int, sm: int | None, fold: int | None) -> str:
    where = f"CTA {cta}" + (f" (SM {sm})" if sm is not None else "")
    if fold is None:
        return where
    if fold == 1:
        return f"{where} warp {unit}"
    if fold == 4:
        return f"{where} warp group {unit}"
    return f"{where} warps {unit * fold}-{unit * fold + fold - 1}"


class Collector:
    """Totals since the last flush; ``take()`` hands them over as a Batch and starts afresh."""

    def __init__(self, device, trace: bool = False) -> None:
        self.device = device
        self.trace = trace
        self.warned: set = set()
        self.tables: dict[int, fastpath.KernelTables] = {}  # id(KernelInfo) -> its tables for the fast path
        self.fast = 0  #: launches the fast path decoded (the rest took the exact path)
        self._reset()

    def _reset(self) -> None:
        self.records: dict[tuple, list] = {}
        self.metrics: dict[tuple, dict] = {}
        self.slices: list = []
        self.dropped = 0
        self.untimed = 0
        self.devices: dict[str, dict] = {}

    def warn_once(self, key, line: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            warn(line)

    def add(self, launch, data) -> None:
        """Decode one launch's host bytes and add them to the totals (the exact path)."""
        info, mode = launch.info, launch.info.mode
        n_cta = launch.nbytes // info.cta_bytes
        try:
            result = decode_launch(data, kernel=info.name, num_warps=info.num_warps, cta_bytes=info.cta_bytes,
                                   segments=mode.segments(info.num_warps), clock_bits=mode.clock_bits, n_cta=n_cta)
        except ProtonError as exc:
            self.dropped += 1
            self.warn_once((info.name, "decode"), f"{exc}; that launch is left out (counted in 'dropped')")
            return
        c = result.counters
        self.dropped += c.overwritten + c.truncated + c.unmatched + c.unclosed + c.missing_ctas
        for line in result.problems():
            self.warn_once((info.name, re.sub(r"\d+", "#", line)), line)
        span = (max(h.copy_end_ns for h in result.ctas) - min(h.start_ns for h in result.ctas)) if result.ctas else 0
        key, khz = self._add_record(launch, span)
        self._add_metrics(key, kernel_metrics(result.intervals, info.names, info.parents,
                                              granularity=mode.granularity, sm_clock_khz=khz))
        if self.trace:
            self._add_slices(launch, result, khz)

    def add_batch(self, data, start: int, launches) -> None:
        """One batch's host bytes ``data`` (the arena region from offset ``start``) and its launches in
        commit order: each launch's bytes are ``data[launch.offset - start:][:launch.nbytes]``."""
        offsets = [launch.offset - start for launch in launches]
        self.add_many([(launch, data[o:o + launch.nbytes]) for launch, o in zip(launches, offsets)],
                      whole=data, offsets=offsets)

    def add_many(self, items, whole=None, offsets=None) -> None:
        """``[(launch, data)]`` in launch order: the same totals as :meth:`add` one by one.

        Launches of one kernel go through :func:`.fastpath.aggregate` together when there are
        several and no trace is kept; whatever it declines takes the exact path. With ``whole`` (a
        buffer holding every item's data) and ``offsets`` (of each item's data in it), launches lying
        back to back in ``whole`` are read as one array."""
        if self.trace or fastpath.np is None or len(items) < 2:
            for launch, data in items:
                self.add(launch, data)
            return
        groups: dict[int, list[int]] = {}
        for i, (launch, _) in enumerate(items):
            key = id(launch.info)
            group = groups.get(key)
            if group is None:
                groups[key] = [i]
            else:
                group.append(i)
        for idx in groups.values():
            if len(idx) >= 2:
                info = items[idx[0]][0].info
                tables = self.tables.get(id(info))
                if tables is None or tables.info is not info:
                    tables = self.tables[id(info)] = fastpath.KernelTables(info)
                if len(idx) == len(items):
                    sub, sub_offsets = items, offsets
                else:
                    sub = [items[i] for i in idx]
                    sub_offsets = None if offsets is None else [offsets[i] for i in idx]
                routes, keys = self._routes(sub)
                out = fastpath.aggregate(sub, tables, routes, whole, sub_offsets)
                if out is not None:
                    self._add_fast(info.name, routes, keys, *out)
                    self.fast += len(sub)
                    continue
            for i in idx:
                self.add(*items[i])

    @staticmethod
    def _routes(items):
        """Each launch's route number (first appearance order) and the routes' (epoch, node, device)."""
        index: dict[tuple, int] = {}
        routes = []
        keys = []
        for launch, _ in items:
            key = (launch.epoch, launch.node, launch.device)
            r = index.get(key)
            if r is None:
                r = index[key] = len(keys)
                keys.append(key)
            routes.append(r)
        return routes, keys

    def _add_fast(self, kernel, routes, keys, spans, entries) -> None:
        """Add :func:`.fastpath.aggregate`'s per-route sums."""
        np = fastpath.np
        timed = np.maximum(spans, 0)
        if len(keys) == 1:
            span_sums, counts = [int(timed.sum())], [len(routes)]
        else:
            r = np.asarray(routes, dtype=np.int64)
            sums = np.zeros(len(keys), dtype=np.int64)
            np.add.at(sums, r, timed)
            span_sums, counts = sums.tolist(), np.bincount(r, minlength=len(keys)).tolist()
        self.untimed += int((spans <= 0).sum())
        route_keys = [self._add_totals((epoch, node, kernel, device), device, span, count)
                      for (epoch, node, device), span, count in zip(keys, span_sums, counts)]
        for route, path, cycles, calls, warps in entries:
            self._add_metrics(route_keys[route], ((path, ((CYCLES, cycles), (CALLS, calls), (WARPS, warps))),))

    def _add_record(self, launch, span):
        device = launch.device
        key = self._add_totals((launch.epoch, launch.node, launch.info.name, device), device, max(span, 0), 1)
        if span <= 0:
            self.untimed += 1
        return key, self.device.properties(device)["sm_clock_khz"]

    def _add_totals(self, key, device, span, count):
        """Add ``count`` launches taking ``span`` ns in all to the kernel record ``key``."""
        record = self.records.get(key)
        if record is None:
            self.devices[str(device)] = self.device.properties(device).get("info", {})
            record = self.records[key] = [0, 0]
        record[0] += span
        record[1] += count
        return key

    def _add_metrics(self, key, entries) -> None:
        """Sum ``[(sub_path, ((name, value), ...))]`` into the totals of ``key``; the time metric is left
        out: :meth:`take` derives it from the summed cycles (cycles at the device's clock)."""
        for sub_path, metrics in entries:
            totals = self.metrics.get(key + (sub_path,))
            if totals is None:
                totals = self.metrics[key + (sub_path,)] = {}
            for name, value in metrics:
                if name != TIME:
                    totals[name] = totals.get(name, 0) + value

    def _add_slices(self, launch, result, khz) -> None:
        info, fold = launch.info, launch.info.mode.fold_warps
        sms = {h.cta: h.sm for h in result.ctas}
        tracks = trace_slices(result.intervals, info.names, result.ctas, granularity=info.mode.granularity,
                              sm_clock_khz=khz)
        total = 0
        for (cta, unit), slices in sorted(tracks.items()):
            track = track_name(cta, unit, sms.get(cta), fold)
            for name, start, end in slices:
                total += 1
                if total <= MAX_SLICES_PER_LAUNCH:
                    self.slices.append((launch.epoch, launch.node, info.name, launch.device, launch.launch_id, track,
                                        name, launch.launch_ns + start, launch.launch_ns + end))
        if total > MAX_SLICES_PER_LAUNCH:
            self.dropped += total - MAX_SLICES_PER_LAUNCH
            self.warn_once((info.name, "slices"), f"kernel {info.name}: more than {MAX_SLICES_PER_LAUNCH} trace slices "
                           "in one launch; the rest are left out of the trace (counted in 'dropped')")

    def take(self, nodes) -> Batch:
        ns: dict = {}
        for k, v in self.metrics.items():
            if CYCLES in v:
                device = k[3]
                if device not in ns:
                    ns[device] = _ns_per_cycle(self.device.properties(device)["sm_clock_khz"])
                v[TIME] = v[CYCLES] * ns[device]
        batch = Batch(nodes=nodes, device_type="CUDA", dropped=self.dropped, untimed=self.untimed,
                      records=[(*k, v[0], v[1]) for k, v in self.records.items()],
                      kernel_metrics=[(*k, tuple(v.items())) for k, v in self.metrics.items()],
                      devices={"CUDA": dict(self.devices)} if self.devices else {})
        batch.kernel_slices = self.slices
        self._reset()
        return batch
