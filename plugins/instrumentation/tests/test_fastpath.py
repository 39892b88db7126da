"""The NumPy batch decoder gives exactly what the per-launch Python decoder gives, or declines.

Random launches (regular ones, and ones with every irregularity the exact path handles: wrapped rings,
CTAs that never ran, unpaired and crossed records, unknown scope ids, clock wrap-around, selective
warps, folded granularities) go through ``Collector.add_many`` and, separately, through
``Collector.add`` one by one; totals, their order, ``dropped`` and ``untimed`` must be identical.
"""

import random

import pytest

from instr_buffers import block_bytes, launch as synth_launch, scope
from proton_instrumentation import fastpath
from proton_instrumentation.collect import Collector
from proton_instrumentation.mode import parse_mode
from proton_instrumentation.registry import KernelInfo
from proton_instrumentation.runtime import Launch

pytest.importorskip("numpy")

NAMES = [(0, "a"), (1, "b"), (2, "c")]
PARENTS = [(1, 0), (2, 1)]


class Props:
    def properties(self, device):
        return {"sm_clock_khz": 1_755_000 if device else 2_000_000, "info": {"arch": "90"}}


def info_for(mode="default", num_warps=4, buffer_bytes=512, names=NAMES, name="k"):
    m = parse_mode(mode)
    return KernelInfo(name, block_bytes(buffer_bytes, num_warps), num_warps, m, list(names), list(PARENTS))


def make_launch(info, data, epoch=1, node=1, device=0):
    return Launch(info, epoch, node, device, None, len(data), 7, 0)


def nested(rng, t, depth=0):
    """A balanced random nesting of scopes 0 > 1 > 2, starting at cycle t: (records, end cycle)."""
    recs = []
    for _ in range(rng.randint(1, 3)):
        sid = depth
        recs.append((sid, 0, t))
        t += rng.randint(1, 50)
        if depth < 2 and rng.random() < 0.6:
            inner, t = nested(rng, t, depth + 1)
            recs += inner
        t += rng.randint(1, 50)
        recs.append((sid, 1, t))
        t += rng.randint(0, 20)
    return recs, t


def regular_cta(rng, warps, base=0):
    return {w: nested(rng, base + rng.randint(0, 1000))[0] for w in warps}


def spoil(rng, ctas, warps):
    """One irregularity the fast path must decline (or handle identically)."""
    kind = rng.choice(["drop", "swap", "unknown", "missing", "extra_end", "empty_warp", "cross"])
    c = rng.randrange(len(ctas))
    if ctas[c] is None:
        return kind
    w = rng.choice(list(warps))
    recs = ctas[c].get(w, [])
    if kind == "drop" and recs:
        del recs[rng.randrange(len(recs))]
    elif kind == "swap" and len(recs) > 1:
        i = rng.randrange(len(recs) - 1)
        recs[i], recs[i + 1] = recs[i + 1], recs[i]
    elif kind == "unknown":
        t = recs[-1][2] + 5 if recs else 5
        recs += [(9, 0, t), (9, 1, t + 7)]
    elif kind == "missing":
        ctas[c] = None
    elif kind == "extra_end":
        recs.append((0, 1, (recs[-1][2] if recs else 0) + 3))
    elif kind == "empty_warp":
        ctas[c][w] = []
    elif kind == "cross":
        t = recs[-1][2] + 5 if recs else 5
        recs += [(0, 0, t), (1, 0, t + 1), (0, 1, t + 2), (1, 1, t + 3)]
    return kind


def totals(items, many):
    col = Collector(Props())
    if many:
        col.add_many(items)
    else:
        for item in items:
            col.add(*item)
    return col


def same(items):
    """Identical totals (integers: any order of summing gives the same), metric order within an entry
    too, and the batch ``take`` delivers identical (time included: derived from the summed cycles)."""
    fast, slow = totals(items, True), totals(items, False)
    assert fast.records == slow.records
    assert {k: list(v.items()) for k, v in fast.metrics.items()} == {k: list(v.items()) for k, v in slow.metrics.items()}
    assert (fast.dropped, fast.untimed, fast.devices) == (slow.dropped, slow.untimed, slow.devices)
    a, b = totals(items, True).take([]), totals(items, False).take([])
    assert sorted(a.records) == sorted(b.records) and sorted(a.kernel_metrics) == sorted(b.kernel_metrics)
    return fast


@pytest.mark.parametrize("mode, num_warps", [
    ("default", 4), ("default:granularity=warp_group", 8), ("default:granularity=cta", 4),
    ("default:granularity=warp_2", 4), ("default:optimizations=clock32", 4),
    ("default:sampling_strategy=selective:sampling_options=0,2", 4),
])
def test_regular_launches_take_the_fast_path_with_identical_totals(mode, num_warps):
    rng = random.Random(mode)
    info = info_for(mode, num_warps, buffer_bytes=4096)
    segs = info.mode.segments(num_warps)
    items = []
    for i in range(12):
        ctas = [regular_cta(rng, segs, base=(1 << 32) - 300 if i % 3 == 0 else 0) for _ in range(rng.randint(1, 4))]
        data = synth_launch(ctas, num_warps=num_warps, buffer_bytes=4096, segments=segs,
                            clock32="clock32" in mode)
        items.append((make_launch(info, data, epoch=1 + i % 2, node=1 + i % 3, device=i % 2), data))
    fast = same(items)
    assert fast.fast == len(items)


def test_clock_wraps_are_unwrapped_per_warp_like_the_exact_path():
    info = info_for("default:optimizations=clock32")
    recs = scope(0, (1 << 32) - 10, (1 << 32) + 30) + scope(1, (1 << 32) + 40, (1 << 32) + 90)
    data = synth_launch([{w: list(recs) for w in range(4)}], num_warps=4, buffer_bytes=512, clock32=True)
    fast = same([(make_launch(info, data), data)] * 3)
    assert fast.fast == 3
    assert dict(fast.metrics)[(1, 1, "k", 0, ("a",))]["cycles (exc)"] == 3 * 4 * 40


@pytest.mark.parametrize("seed", range(40))
def test_irregular_batches_fall_back_and_match(seed):
    rng = random.Random(seed)
    mode = rng.choice(["default", "default:granularity=warp_group", "default:granularity=cta"])
    num_warps = rng.choice([4, 8])
    buffer_bytes = rng.choice([1024, 4096])  # 1024: some rings wrap
    info = info_for(mode, num_warps, buffer_bytes=buffer_bytes)
    segs = info.mode.segments(num_warps)
    items = []
    for _ in range(rng.randint(2, 6)):
        ctas = [regular_cta(rng, segs) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.5:
            spoil(rng, ctas, segs)
        data = synth_launch(ctas, num_warps=num_warps, buffer_bytes=buffer_bytes)
        items.append((make_launch(info, data), data))
    same(items)


def test_a_wrapped_ring_falls_back():
    info = info_for(buffer_bytes=256)  # 8 records per warp
    many = {w: [r for i in range(10) for r in scope(0, 100 * i, 100 * i + 10)] for w in range(4)}
    data = synth_launch([many], num_warps=4, buffer_bytes=256)
    fast = same([(make_launch(info, data), data)] * 2)
    assert fast.fast == 0 and fast.dropped == 2 * 4 * 12


def test_unknown_scope_ids_and_kernels_mixed_in_one_batch():
    a = info_for(name="a", buffer_bytes=4096)
    b = info_for(name="b", names=[(0, "a")], buffer_bytes=4096)  # b's ids 1, 2 are not in its table
    data = synth_launch([regular_cta(random.Random(1), range(4))], num_warps=4, buffer_bytes=4096)
    items = [(make_launch(a, data), data), (make_launch(b, data), data), (make_launch(a, data), data),
             (make_launch(b, data), data)]
    fast = same(items)
    assert fast.fast == 2  # a's two launches; b's go the exact way


def test_tables_decline_duplicate_paths():
    assert not fastpath.KernelTables(info_for(names=[])).ok
    assert fastpath.KernelTables(info_for()).ok
