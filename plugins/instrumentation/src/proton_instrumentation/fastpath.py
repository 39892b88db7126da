"""Many launches of one kernel decoded at once with NumPy, for the common case; else None (exact path).

The pure-Python decoder (:mod:`.decode`) costs microseconds per record, which would put hundreds
of microseconds per launch on the launching thread now that copies are retired as they complete.
This module computes the same per-launch totals as ``decode_launch`` + ``kernel_metrics`` for a
batch of launches of one :class:`~.registry.KernelInfo`, vectorized, **only when the answer is
provably identical**; it returns None (the caller then decodes each launch with the exact path)
whenever any launch of the batch has:

- a CTA block without the preamble, a CTA id that is not its block index, or a record-buffer size
  that does not give ``cta_bytes`` (missing CTAs and layout errors: the exact path counts/raises);
- a ring that wrapped (overwritten records);
- records of a warp that are not a balanced sequence of starts and ends whose brackets match by
  scope id (the exact path's stack would count unmatched/unclosed records);
- a scope id missing from the kernel's names table (its path would depend on dynamic nesting).

For a balanced, id-matched sequence, grouping the records of a warp by nesting level (a start's
level is the depth before it, an end's the depth after it) and taking them in order gives exactly
the start/end pairs the exact path's stack forms, and counters all zero. Clocks are unwrapped per
warp as ``unwrap_clock`` does (each decrease adds one period), folding into units takes the k-th
occurrence of a scope per warp as ``fold_intervals`` does (order: start, then longer first).

Results are summed per *route* (the caller numbers launches by where their totals go: epoch,
context node, device), not per launch, so a batch of hundreds of launches costs a few NumPy calls
and no Python per launch: ``(spans, entries)`` with ``spans`` the per-launch globaltimer span
(int64 array, the last CTA's end minus the first CTA's entry) and ``entries`` a list of ``(route,
sub_path, cycles, calls, warps)`` in route order, then path order. Sums of integers do not depend on
the order of launches, so they equal the exact path's per-launch sums; time in ns is derived from
the summed cycles by the collector, for either path.
"""

from __future__ import annotations

try:
    import numpy as np
except ImportError:  # pragma: no cover - torch brings numpy; without it every launch takes the exact path
    np = None

from .aggregate import ScopeNames
from .decode import CLOCK_HI_MASK, HEADER_BYTES, PREAMBLE, RECORD_BYTES, SCOPE_MASK, SCOPE_SHIFT, cta_block_bytes

#: at most this many scope ids (8 bits in the tag)
MAX_IDS = SCOPE_MASK + 1


class KernelTables:
    """Per kernel, computed once: the path of each known scope id and its rank in path order."""

    def __init__(self, info) -> None:
        self.info = info  # held: the cache is keyed by id(info)
        table = ScopeNames(info.names, info.parents)
        ids = sorted(table.names)
        self.paths = {i: table.path(i) for i in ids}
        self.ok = bool(np is not None and ids and max(ids) < MAX_IDS and len(set(self.paths.values())) == len(ids))
        if self.ok:
            self.known = np.zeros(MAX_IDS, dtype=bool)
            self.known[ids] = True
            self.rank = np.zeros(MAX_IDS, dtype=np.int64)
            for r, i in enumerate(sorted(ids, key=lambda i: self.paths[i])):
                self.rank[i] = r
            self.by_rank = sorted(ids, key=lambda i: self.paths[i])


def aggregate(items, tables: KernelTables, routes, whole=None, offsets=None):
    """``items``: [(launch, data)] of one kernel; ``routes``: each launch's route number (ints from 0).
    With ``whole`` and ``offsets`` (item ``i``'s data is ``whole[offsets[i]:]``), launches that lie
    back to back are viewed as one array instead of one per launch.
    Returns ``(spans, entries)`` (see the module doc) or None for the exact path."""
    if not tables.ok:
        return None
    info = tables.info
    mode = info.mode
    cta = info.cta_bytes
    num_warps = info.num_warps
    segs = mode.segments(num_warps)
    nseg = len(segs)
    if cta <= 0 or cta % 4 or not nseg:
        return None
    n_ctas = [launch.nbytes // cta for launch, _ in items]
    if min(n_ctas) <= 0:
        return None
    words = cta // 4
    head = HEADER_BYTES // 4
    seg0 = head + num_warps
    arrays = []
    if whole is None:
        for (launch, data), n in zip(items, n_ctas):
            if len(data) < n * cta:
                return None
            arrays.append(np.frombuffer(data, dtype="<u4", count=n * words).reshape(n, words))
    else:
        limit = len(whole)
        run_at, run_rows, expected = -1, 0, -1
        for (launch, data), n, off in zip(items, n_ctas, offsets):
            if len(data) < n * cta or off + n * cta > limit:
                return None
            if off != expected:  # not right after the previous launch: a new run
                if run_rows:
                    arrays.append(np.frombuffer(whole, dtype="<u4", count=run_rows * words,
                                                offset=run_at).reshape(run_rows, words))
                run_at, run_rows = off, 0
            run_rows += n
            expected = off + n * cta
        arrays.append(np.frombuffer(whole, dtype="<u4", count=run_rows * words, offset=run_at).reshape(run_rows, words))
    # headers and index words of every CTA (small), without copying the record areas
    blocks = np.concatenate([a[:, :seg0] for a in arrays]) if len(arrays) > 1 else arrays[0][:, :seg0]
    rows = blocks.shape[0]
    n_launch = len(items)
    first_row = np.cumsum([0] + n_ctas[:-1])
    row_launch = np.repeat(np.arange(n_launch), n_ctas)
    if not (blocks[:, 0] == PREAMBLE).all():
        return None
    if not (blocks[:, 1] == np.arange(rows) - first_row[row_launch]).all():
        return None
    buffer_bytes = int(blocks[0, 3])
    seg_bytes = buffer_bytes // nseg
    if (not (blocks[:, 3] == buffer_bytes).all() or cta_block_bytes(buffer_bytes, num_warps) != cta
            or buffer_bytes % nseg or seg_bytes < RECORD_BYTES or seg_bytes % RECORD_BYTES):
        return None
    capacity = seg_bytes // RECORD_BYTES
    written = (blocks[:, [head + w for w in segs]] // 2).astype(np.int64)  # (rows, nseg) records per warp
    if (written > capacity).any():
        return None

    # spans: the last CTA's copy end minus the first CTA's entry, per launch (globaltimer ns < 2**63)
    u64 = blocks[:, 4:10].astype(np.uint64)
    start_ns = (u64[:, 0] | (u64[:, 1] << np.uint64(32))).astype(np.int64)
    end_ns = (u64[:, 4] | (u64[:, 5] << np.uint64(32))).astype(np.int64)
    spans = np.maximum.reduceat(end_ns, first_row) - np.minimum.reduceat(start_ns, first_row)
    most = int(written.max())
    if most == 0:
        return spans, []
    row_route = np.asarray(routes, dtype=np.int64)[row_launch]

    # only the first `most` record slots of each segment (no ring wrapped: they are in time order)
    end = seg0 + nseg * seg_bytes // 4
    parts = [a[:, seg0:end].reshape(a.shape[0], nseg, capacity, 2)[:, :, :most, :] for a in arrays]
    slots = np.concatenate(parts) if len(parts) > 1 else parts[0]
    mask = np.arange(most) < written[:, :, None]
    tags = slots[..., 0][mask].astype(np.int64)  # warp by warp (g = row * nseg + k), each in time order
    low = slots[..., 1][mask].astype(np.int64)
    counts = written.ravel()
    n = tags.size
    g = np.repeat(np.arange(rows * nseg), counts)
    ends = np.cumsum(counts)
    first = np.repeat(ends - counts, counts)  # index of the first record of each record's warp

    bits = mode.clock_bits
    raw = (((tags & CLOCK_HI_MASK) << 32) | low) & ((1 << bits) - 1)
    dec = np.zeros(n, dtype=np.int64)
    dec[1:] = (raw[1:] < raw[:-1]) & (g[1:] == g[:-1])
    cum = np.cumsum(dec)
    cycles = raw + ((cum - cum[first]) << bits)

    is_end = (tags >> 31) == 1
    sid = (tags >> SCOPE_SHIFT) & SCOPE_MASK
    delta = np.where(is_end, -1, 1)
    cs = np.cumsum(delta)
    depth = cs - (cs[first] - delta[first])  # depth after each record, within its warp
    if (depth < 0).any() or (depth[ends[counts > 0] - 1] != 0).any():
        return None
    level = np.where(is_end, depth, depth - 1)
    order = np.argsort(g * (int(level.max()) + 1) + level, kind="stable")  # by warp, then level, in time order
    s, e = order[0::2], order[1::2]
    if is_end[s].any() or not is_end[e].all() or (sid[s] != sid[e]).any():
        return None
    iv_sid = sid[s]
    if not tables.known[iv_sid].all():
        return None
    iv_g = g[s]
    iv_start, iv_end = cycles[s], cycles[e]
    iv_row = iv_g // nseg

    rank = tables.rank[iv_sid]  # the scope's place in path order
    fold = mode.fold_warps
    if fold == 1:
        unit = iv_g
        dur = iv_end - iv_start
        key = row_route[iv_row] * MAX_IDS + rank
    else:
        warp = np.asarray(segs, dtype=np.int64)[iv_g % nseg]
        u = np.zeros_like(warp) if fold is None else warp // fold + 1
        # occurrence k of the scope in its warp, in (start, longer first) order
        o = np.lexsort((-iv_end, iv_start, iv_sid, iv_g))
        gs = iv_g[o] * MAX_IDS + iv_sid[o]
        new = np.ones(gs.size, dtype=bool)
        new[1:] = gs[1:] != gs[:-1]
        pos = np.arange(gs.size)
        occ = np.empty_like(pos)
        occ[o] = pos - np.maximum.accumulate(np.where(new, pos, 0))
        unit = iv_row * (num_warps + 2) + u
        group = np.lexsort((occ, rank, unit))
        gkey = np.stack([unit[group], rank[group], occ[group]])
        starts = np.flatnonzero(np.concatenate(([True], (gkey[:, 1:] != gkey[:, :-1]).any(axis=0))))
        lo = np.minimum.reduceat(iv_start[group], starts)
        hi = np.maximum.reduceat(iv_end[group], starts)
        unit = unit[group][starts]
        dur = hi - lo
        key = row_route[unit // (num_warps + 2)] * MAX_IDS + rank[group][starts]

    # per (route, scope): summed cycles, calls, distinct units (a unit key includes its CTA row, so
    # units of different launches never coincide); keys sorted = route order, then path order
    units = rows * (max(nseg, num_warps) + 2) + 1  # more than any unit key
    o = np.argsort(key * units + unit, kind="stable")
    pair = (key * units + unit)[o]
    ks = key[o]
    kb = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
    total = np.add.reduceat(dur[o], kb)
    calls = np.diff(np.append(kb, ks.size))
    distinct = np.concatenate(([1], (pair[1:] != pair[:-1]).astype(np.int64)))
    warps = np.add.reduceat(distinct, kb)

    paths, by_rank = tables.paths, tables.by_rank
    entries = []
    for k, c, calls_k, w in zip(ks[kb].tolist(), total.tolist(), calls.tolist(), warps.tolist()):
        route, r = divmod(k, MAX_IDS)
        entries.append((route, paths[by_rank[r]], c, calls_k, w))
    return spans, entries
