import pytest

import proton_core as proton
from instr_buffers import block_bytes, launch, scope
from proton_core.plugin_api import ProtonError, metric_name
from proton_core.testing import child, load_profile
from proton_instrumentation.aggregate import (METRIC_NAMES, ScopeNames, fold_intervals, kernel_metrics, scope_stats,
                                              trace_slices)
from proton_instrumentation.decode import Interval, decode_launch
from proton_instrumentation.mode import parse_mode

W, B = 4, 512  # 16 records per warp
CY, CA, WA, TI = METRIC_NAMES
GHZ2 = 2_000_000  # kHz: 0.5 ns per cycle


def decoded(ctas, num_warps=W, buffer_bytes=B):
    return decode_launch(launch(ctas, num_warps=num_warps, buffer_bytes=buffer_bytes), kernel="k",
                         num_warps=num_warps, cta_bytes=block_bytes(buffer_bytes, num_warps))


def loops(warp):
    """3 iterations of 'fast' (100 cycles) then 3 of 'slow' (400 cycles), shifted per warp."""
    t, recs = 1000 * warp, []
    for _ in range(3):
        recs += scope(0, t, t + 100)
        t += 150
    for _ in range(3):
        recs += scope(1, t, t + 400)
        t += 450
    return recs


def test_one_x_and_four_x_loops():
    res = decoded([{w: loops(w) for w in range(W)}] * 2)
    out = kernel_metrics(res.intervals, [(0, "fast"), (1, "slow")], [], sm_clock_khz=GHZ2)
    assert out == [(("fast",), ((CY, 2400), (CA, 24), (WA, 8), (TI, 1200.0))),
                   (("slow",), ((CY, 9600), (CA, 24), (WA, 8), (TI, 4800.0)))]
    fast, slow = (dict(m)[CY] for _, m in out)
    assert slow / fast == 4
    stats = scope_stats(res.intervals, [(0, "fast"), (1, "slow")], sm_clock_khz=GHZ2)
    assert [s.avg_cycles_per_warp for s in stats] == [300.0, 1200.0]


def test_metric_names_are_valid_and_count_is_reserved():
    assert METRIC_NAMES == ("cycles (exc)", "scope_calls (exc)", "warps (exc)", "scope_time (ns)(exc)")
    assert [metric_name(n).key for n in METRIC_NAMES] == list(METRIC_NAMES)
    with pytest.raises(ProtonError, match="reserved"):
        metric_name("count")


NAMES = [(0, "outer"), (2, "inner2"), (1, "inner")]  # as get_scope_id_names gives them
PARENTS = [(1, 0), (2, 0)]  # as get_scope_id_parents gives them


def test_nested_paths_from_static_tables():
    recs = [(0, 0, 0), (1, 0, 10), (1, 1, 30), (2, 0, 40), (2, 1, 45), (1, 0, 50), (1, 1, 70), (0, 1, 100)]
    res = decoded([{0: recs, 3: recs}])
    out = dict(kernel_metrics(res.intervals, NAMES, PARENTS, sm_clock_khz=1_000_000))
    assert list(out) == [("outer",), ("outer", "inner"), ("outer", "inner2")]
    assert out[("outer",)] == ((CY, 200), (CA, 2), (WA, 2), (TI, 200.0))
    assert out[("outer", "inner")] == ((CY, 80), (CA, 4), (WA, 2), (TI, 80.0))
    assert out[("outer", "inner2")] == ((CY, 10), (CA, 2), (WA, 2), (TI, 10.0))


def test_unknown_scope_id_uses_dynamic_parent():
    ivs = [Interval(0, 0, 0, 0, 100, 0, None), Interval(0, 0, 7, 10, 20, 1, 0)]
    assert [p for p, _ in kernel_metrics(ivs, NAMES, PARENTS, sm_clock_khz=1)] == [("outer",), ("outer", "scope_7")]
    assert ScopeNames([(0, "a"), (1, "b")], [(0, 1), (1, 0)]).path(0) == ("b", "a")  # a cyclic table ends


def group_recs(warp):
    return scope(0, 10 + warp, 100 + warp) + scope(0, 200 + warp, 210 + 2 * warp)


def test_warp_group_and_cta_folding():
    res = decoded([{w: group_recs(w) for w in range(8)}] * 2, num_warps=8, buffer_bytes=8 * 64)
    names = [(0, "s")]
    per_warp = dict(kernel_metrics(res.intervals, names, granularity="warp", sm_clock_khz=1_000_000))
    assert per_warp[("s",)][:3] == ((CY, 2 * (8 * 90 + 8 * 10 + 28)), (CA, 32), (WA, 16))
    mode = parse_mode("default:granularity=warp_group")
    groups = dict(kernel_metrics(res.intervals, names, granularity=mode.fold_warps, sm_clock_khz=1_000_000))
    # group 0 (warps 0-3): 10..103 and 200..216; group 1 (warps 4-7): 14..107 and 204..224
    assert groups[("s",)] == ((CY, 2 * (93 + 16 + 93 + 20)), (CA, 8), (WA, 4),
                              (TI, 444.0))
    assert fold_intervals(res.intervals, "warp_group")[:2] == [Interval(0, 0, 0, 10, 103, 0, None),
                                                               Interval(0, 0, 0, 200, 216, 0, None)]
    cta = dict(kernel_metrics(res.intervals, names, granularity="cta", sm_clock_khz=1_000_000))
    assert cta[("s",)][:3] == ((CY, 2 * (97 + 24)), (CA, 4), (WA, 2))
    assert fold_intervals(res.intervals, "cta")[0] == Interval(0, -1, 0, 10, 107, 0, None)
    with pytest.raises(ProtonError, match="granularity 'block' is not valid"):
        fold_intervals(res.intervals, "block")


def test_bad_clock_rate():
    with pytest.raises(ProtonError, match="SM clock rate 0 kHz"):
        kernel_metrics([], NAMES, sm_clock_khz=0)


def test_trace_slices_per_track():
    recs = [(0, 0, 500), (1, 0, 510), (1, 1, 530), (0, 1, 600)]
    res = decoded([{0: recs, 1: [(1, 0, 520), (1, 1, 540)]}, {2: [(1, 0, 7000), (1, 1, 7100)]}])
    out = trace_slices(res.intervals, NAMES, res.ctas, sm_clock_khz=GHZ2)
    assert out == {(0, 0): [("outer", 0.0, 50.0), ("inner", 5.0, 15.0)],
                   (0, 1): [("inner", 10.0, 20.0)],
                   (1, 2): [("inner", 1000.0, 1050.0)]}  # CTA 1 entered 1000 ns after CTA 0
    assert trace_slices(res.intervals, NAMES, res.ctas, granularity="cta", sm_clock_khz=GHZ2)[(0, -1)][0] == \
        ("outer", 0.0, 50.0)


def test_metrics_file_under_the_kernel_through_the_core(tmp_path, fake):
    res = decoded([{w: loops(w) for w in range(W)}])
    inner = kernel_metrics(res.intervals, [(0, "fast"), (1, "slow")], sm_clock_khz=GHZ2)
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("kern", 1000, inner=inner)
    fake.launch("kern", 1000, inner=inner)
    proton.finalize()
    kernel = child(load_profile(tmp_path / "p.hatchet")[0], "kern")
    assert child(kernel, "slow")["metrics"][CY] == 2 * 4800
    assert child(kernel, "fast")["metrics"][CA] == 24
    assert child(kernel, "fast")["metrics"][TI] == 1200.0
