"""PC sampling's native bookkeeping without a GPU: sample buffers built as CUPTI fills them
(CUpti_PCSamplingData / CUpti_PCSamplingPCData, in the test bindings), kernel records fed as the
activity buffers would, and the attribution of samples to call paths, kernels and lines."""

import pytest

from proton_core.plugin_api import NODE_CAPTURED_AT, NODE_CONTEXT
from cupti_helpers import CorrelationIds
from proton_core.testing import chains

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(
    not hasattr(_cupti, "_test_pcs_reset"),
    reason="proton_cupti._cupti was built without its test bindings (PROTON_CUPTI_TESTING=OFF)")

STALLED = "smsp__pcsamp_warps_issue_stalled_"
#: A stall table as cuptiPCSamplingGetStallReasons gives it: (CUPTI index, name); indexes are CUPTI's, not 0..n.
REASONS = [
    (3, STALLED + "long_scoreboard"),
    (4, STALLED + "long_scoreboard_not_issued"),
    (7, STALLED + "selected"),
    (9, STALLED + "math_pipe_throttle"),
    (12, "smsp__pcsamp_sample_count_extra"),
]
LONG, LONG_NI, SELECTED, MATH = 3, 4, 7, 9


corr = CorrelationIds(50_000)


NODES = []  # every node delivered since the fixture reset the recorder (a node is delivered once)


@pytest.fixture
def rec():
    NODES.clear()
    _cupti._test_reset()
    _cupti.configure(False, False, [], [])
    _cupti.set_epoch(0)
    _cupti.set_context(0)
    yield _cupti
    _cupti._test_pcs_reset("")
    _cupti.set_epoch(0)
    _cupti._test_reset()


def launch(rec, context, kernel, time_ns, device=0, epoch=1, graph_node=0):
    """One launch on this thread under `context` and its kernel record; returns the correlation id."""
    rec.set_epoch(epoch)
    rec.set_context(context)
    c = corr()
    rec._test_launch(c)
    rec._test_kernel(c, kernel, device=device, start=1000, end=1000 + time_ns, graph_node_id=graph_node)
    return c


def flushed(rec):
    """(every node delivered so far, this flush's kernel records, its PC sampling metrics)."""
    nodes, records, events, dropped, devices, metrics = rec._test_flush(True)
    NODES.extend(nodes)
    return list(NODES), records, metrics


def by_key(nodes_seen, metrics):
    """(epoch, context id of the node, kernel, device, line) -> {metric: value}."""
    ctx = {nid: v for nid, parent, kind, v in nodes_seen if kind == NODE_CONTEXT}
    out = {}
    for epoch, node, kernel, device, sub_path, values in metrics:
        assert isinstance(sub_path, tuple) and len(sub_path) == 1
        key = (epoch, ctx.get(node, node), kernel, device, sub_path[0])
        assert key not in out, key
        out[key] = dict(values)
    return out


# ------------------------------------------------------------------ names ----
def test_stall_reason_names_are_shortened_consistently(rec):
    assert rec._test_pcs_stall_metric(STALLED + "long_scoreboard") == "stall_long_scoreboard"
    assert rec._test_pcs_stall_metric(STALLED + "long_scoreboard_not_issued") == "stall_long_scoreboard_not_issued"
    assert rec._test_pcs_stall_metric("smsp__pcsamp_sample_count") == "stall_sample_count"
    assert rec._test_pcs_stall_metric("branch_resolving") == "stall_branch_resolving"
    assert rec._test_pcs_not_issued(STALLED + "barrier_not_issued")
    assert not rec._test_pcs_not_issued(STALLED + "barrier")


def test_line_names(rec):
    assert rec._test_pcs_line_name(42, "kern.py", "/home/u") == "/home/u/kern.py:42"
    assert rec._test_pcs_line_name(7, "k.py", "/home/u/") == "/home/u/k.py:7"
    assert rec._test_pcs_line_name(3, "/abs/k.py", "/home/u") == "/abs/k.py:3"  # CUPTI gave an absolute file
    assert rec._test_pcs_line_name(3, "k.py", "") == "k.py:3"
    assert rec._test_pcs_line_name(0, "k.py", "/d") == ""  # no line: the caller names the PC by offset
    # with the function at that PC: upstream's spelling, which upstream's test_pcsampling looks for
    assert rec._test_pcs_line_name(42, "kern.py", "/home/u", "matmul_kernel") == "/home/u/kern.py:42@matmul_kernel"
    assert rec._test_pcs_line_name(5, "", "/d") == ""
    assert rec._test_pcs_sass_name(0x1A0) == "sass+0x1a0"
    assert rec._test_pcs_sass_name(0) == "sass+0x0"


@pytest.mark.parametrize("count, weights, shares", [
    (10, [1, 1, 1], [4, 3, 3]),
    (100, [3, 1], [75, 25]),
    (5, [1, 2, 2], [1, 2, 2]),
    (7, [0, 0], [4, 3]),           # all-zero weights: even
    (1, [1, 1], [1, 0]),           # ties: the lower index
    (3, [1, 998, 1], [0, 3, 0]),
    (0, [5, 6], [0, 0]),
    (2**40 + 1, [2**62, 2**62], [2**39 + 1, 2**39]),  # no overflow
])
def test_split_preserves_the_total(rec, count, weights, shares):
    assert rec._test_pcs_split(count, weights) == shares


# --------------------------------------------------------- serialized ----
def test_serialized_samples_go_to_their_launch_exactly(rec):
    rec._test_pcs_reset("serialized")
    c1 = launch(rec, 5, "kA", 300)
    c2 = launch(rec, 9, "kA", 100)
    rec._test_pcs_ingest([
        (0xC0DE, "kA", 0x10, c1, [(LONG, 6), (LONG_NI, 4)]),
        (0xC0DE, "kA", 0x20, c1, [(SELECTED, 2)]),
        (0xC0DE, "kA", 0x20, c2, [(SELECTED, 5), (MATH, 1)]),
    ], REASONS, total_samples=18)
    rec._test_pcs_attribute(False)
    nodes, records, metrics = flushed(rec)
    got = by_key(nodes, metrics)
    # The cubin 0xC0DE was never registered: lines are SASS offsets.
    assert got == {
        (1, 5, "kA", 0, "sass+0x10"): {"samples": 6, "stall_long_scoreboard": 6, "stall_long_scoreboard_not_issued": 4},
        (1, 5, "kA", 0, "sass+0x20"): {"samples": 2, "stall_selected": 2},
        (1, 9, "kA", 0, "sass+0x20"): {"samples": 6, "stall_selected": 5, "stall_math_pipe_throttle": 1},
    }
    # Kernel records are untouched by sampling: same count and time as without it.
    ctx = {nid: v for nid, _, kind, v in nodes if kind == NODE_CONTEXT}
    assert sorted((ctx[r[1]], r[2], r[4], r[5]) for r in records) == [(5, "kA", 300, 1), (9, "kA", 100, 1)]
    assert flushed(rec)[2] == []  # delivered once
    stats = rec.pcsampling_stats()
    assert (stats["samples_in"], stats["attributed"], stats["total_samples"]) == (14, 14, 18)


def test_serialized_samples_wait_for_their_record_then_drop_at_a_complete_flush(rec):
    rec._test_pcs_reset("serialized")
    rec.set_epoch(1)
    rec.set_context(3)
    early = corr()
    rec._test_launch(early)
    rec._test_pcs_ingest([(1, "kB", 0x40, early, [(LONG, 3)])], REASONS)
    rec._test_pcs_attribute(False)  # the record is still in an activity buffer: kept
    assert flushed(rec)[2] == []
    assert rec.pcsampling_stats()["pending_samples"] == 3
    rec._test_kernel(early, "kB", start=0, end=50)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 3, "kB", 0, "sass+0x40"): {"samples": 3, "stall_long_scoreboard": 3}}
    orphan = corr()  # a launch whose record never comes (CUPTI dropped it)
    rec._test_pcs_ingest([(1, "kB", 0x40, orphan, [(LONG, 8)])], REASONS)
    rec._test_pcs_attribute(True)  # complete flush: every record came, so these cannot be placed
    assert flushed(rec)[2] == []
    stats = rec.pcsampling_stats()
    assert (stats["unattributed"], stats["pending_samples"], stats["pending_keys"]) == (8, 0, 0)


def test_samples_of_kernels_launched_outside_any_session_are_dropped(rec):
    rec._test_pcs_reset("serialized")
    c = launch(rec, 4, "kC", 100, epoch=0)  # deactivated: epoch 0
    rec._test_pcs_ingest([(1, "kC", 0x0, c, [(SELECTED, 9)])], REASONS)
    rec._test_pcs_attribute(False)
    assert flushed(rec)[2] == []
    assert rec.pcsampling_stats()["unsessioned"] == 9


def test_graph_replay_samples_land_under_the_capture_path(rec):
    rec._test_pcs_reset("serialized")
    rec.set_epoch(1)
    rec.set_context(21)  # where the graph was captured
    rec._test_graph_node(777)
    replay = launch(rec, 22, "kG", 500, graph_node=777)  # cuGraphLaunch's correlation id, the node's record
    rec._test_pcs_ingest([(1, "kG", 0x80, replay, [(MATH, 4)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, records, metrics = flushed(rec)
    ((epoch, node, kernel, device, sub_path, values),) = metrics
    assert (epoch, kernel, sub_path, dict(values)) == (1, "kG", ("sass+0x80",),
                                                       {"samples": 4, "stall_math_pipe_throttle": 4})
    chain = chains(nodes)[node]
    assert [kind for kind, _ in chain] == [NODE_CONTEXT, NODE_CAPTURED_AT, NODE_CONTEXT]
    assert (chain[0][1], chain[2][1]) == (22, 21)
    assert [r[1] for r in records] == [node]  # the kernel's time is filed at the same node


# --------------------------------------------------------- continuous ----
def test_continuous_splits_a_function_by_gpu_time_of_its_launches(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 5, "kA", 300)
    launch(rec, 5, "kA", 100)
    launch(rec, 9, "kA", 100)
    # Continuous records carry no correlation id (0).
    rec._test_pcs_ingest([(2, "kA", 0x30, 0, [(LONG, 10)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {
        (1, 5, "kA", 0, "sass+0x30"): {"samples": 8, "stall_long_scoreboard": 8},  # 400 of 500 ns
        (1, 9, "kA", 0, "sass+0x30"): {"samples": 2, "stall_long_scoreboard": 2},
    }
    # More samples of kA and no new launch (its records came earlier): the last split holds.
    rec._test_pcs_ingest([(2, "kA", 0x30, 0, [(LONG, 5)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {
        (1, 5, "kA", 0, "sass+0x30"): {"samples": 4, "stall_long_scoreboard": 4},
        (1, 9, "kA", 0, "sass+0x30"): {"samples": 1, "stall_long_scoreboard": 1},
    }
    # New launches from one path only: its samples are that path's alone (exact).
    launch(rec, 9, "kA", 100)
    rec._test_pcs_ingest([(2, "kA", 0x30, 0, [(LONG, 7), (LONG_NI, 7)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {
        (1, 9, "kA", 0, "sass+0x30"): {"samples": 7, "stall_long_scoreboard": 7, "stall_long_scoreboard_not_issued": 7},
    }


def test_continuous_keeps_devices_apart(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 5, "kD", 100, device=0)
    launch(rec, 6, "kD", 100, device=1)
    rec._test_pcs_ingest([(2, "kD", 0x0, 0, [(SELECTED, 6)])], REASONS, device=1)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 6, "kD", 1, "sass+0x0"): {"samples": 6, "stall_selected": 6}}


def test_continuous_samples_without_launches_wait_then_drop(rec):
    rec._test_pcs_reset("continuous")
    rec._test_pcs_ingest([(2, "kE", 0x10, 0, [(SELECTED, 4)])], REASONS)
    rec._test_pcs_attribute(False)
    assert flushed(rec)[2] == [] and rec.pcsampling_stats()["pending_samples"] == 4
    launch(rec, 8, "kE", 10)  # its record arrives after its samples
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 8, "kE", 0, "sass+0x10"): {"samples": 4, "stall_selected": 4}}
    rec._test_pcs_ingest([(2, "kNever", 0x10, 0, [(SELECTED, 2)])], REASONS)
    rec._test_pcs_attribute(True)
    assert flushed(rec)[2] == [] and rec.pcsampling_stats()["unattributed"] == 2


def test_continuous_launches_while_deactivated_take_their_share_away(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 5, "kF", 300)
    launch(rec, 5, "kF", 100, epoch=0)  # deactivated session: epoch 0
    rec._test_pcs_ingest([(2, "kF", 0x0, 0, [(MATH, 8)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 5, "kF", 0, "sass+0x0"): {"samples": 6, "stall_math_pipe_throttle": 6}}
    assert rec.pcsampling_stats()["unsessioned"] == 2


# ----------------------------------------------------------- buffers ----
def test_unknown_stall_index_zero_counts_and_buffer_totals(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 1, "kH", 10)
    rec._test_pcs_ingest([
        (3, "kH", 0x0, 0, [(99, 2), (LONG, 0)]),   # index 99 is not in the context's table
        (3, "kH", 0x10, 0, [(LONG, 0)]),           # nothing sampled: no record kept
    ], REASONS, total_samples=40, dropped_samples=3, non_user_samples=5)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 1, "kH", 0, "sass+0x0"): {"samples": 2, "stall_unknown_99": 2}}
    stats = rec.pcsampling_stats()
    assert (stats["total_samples"], stats["dropped_samples"], stats["non_user_samples"], stats["pc_records"]) == \
        (40, 3, 5, 2)


def test_memory_stays_bounded_by_distinct_pcs_not_by_samples(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 2, "kLong", 1000)
    buffer = [(4, "kLong", pc * 16, 0, [(LONG, 1), (SELECTED, 2)]) for pc in range(50)]
    for _ in range(400):  # 400 drains of the same 50 PCs
        rec._test_pcs_ingest(buffer, REASONS)
    stats = rec.pcsampling_stats()
    assert stats["pending_keys"] == 50 and stats["samples_in"] == 400 * 50 * 3
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    got = by_key(nodes, metrics)
    assert len(got) == 50
    assert all(v == {"samples": 1200, "stall_long_scoreboard": 400, "stall_selected": 800} for v in got.values())
    stats = rec.pcsampling_stats()
    assert (stats["pending_keys"], stats["out_keys"]) == (0, 0)


def test_flush_without_metrics_keeps_its_five_elements(rec):
    rec._test_pcs_reset("continuous")
    launch(rec, 1, "kI", 10)
    assert len(rec._test_flush()) == 5
    assert len(rec._test_flush(True)) == 6


def test_batch_carries_kernel_metrics(rec):
    from proton_cupti.backend import batch_from

    rec._test_pcs_reset("serialized")
    c = launch(rec, 5, "kJ", 100)
    rec._test_pcs_ingest([(1, "kJ", 0x8, c, [(SELECTED, 3)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, records, events, dropped, devices, metrics = rec._test_flush(True)
    batch = batch_from(nodes, records, events, dropped, devices, {}, lambda d: {}, kernel_metrics=metrics)
    ((epoch, node, kernel, device, sub_path, values),) = batch.kernel_metrics
    assert (epoch, kernel, device, sub_path) == (1, "kJ", 0, ("sass+0x8",))
    assert dict(values) == {"samples": 3, "stall_selected": 3}
    assert node == records[0][1]


def test_samples_for_epochs_the_core_retired_are_never_delivered(rec):
    """After a complete flush the core retires older epochs: late samples for them are counted, not sent."""
    rec._test_pcs_reset("continuous")
    launch(rec, 5, "kR", 100, epoch=1)
    rec._test_pcs_ingest([(2, "kR", 0x0, 0, [(SELECTED, 4)])], REASONS)
    rec._test_pcs_attribute(True)
    rec.set_epoch(2)
    assert rec._test_max_epoch() == 2
    rec.set_epoch(0)
    assert rec._test_max_epoch() == 2  # deactivation does not lower it
    rec._test_pcs_retire_below(2)      # what flush_all does after a complete flush that began in epoch 2
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(1, 5, "kR", 0, "sass+0x0"): {"samples": 4, "stall_selected": 4}}
    rec._test_pcs_ingest([(2, "kR", 0x0, 0, [(SELECTED, 3)])], REASONS)  # decoded late, no new launch
    rec._test_pcs_attribute(False)
    # The last split named epoch 1 only: it is gone, so these wait for kR's next launches (continuous
    # collection's approximation; with the range restarted at each complete flush none come late).
    assert flushed(rec)[2] == [] and rec.pcsampling_stats()["pending_samples"] == 3
    launch(rec, 5, "kR", 100, epoch=2)
    rec._test_pcs_ingest([(2, "kR", 0x0, 0, [(SELECTED, 6)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(2, 5, "kR", 0, "sass+0x0"): {"samples": 9, "stall_selected": 9}}
    # A retired epoch still named in a current split: its share is counted late, not delivered.
    rec._test_pcs_reset("continuous")
    launch(rec, 5, "kS", 100, epoch=3)
    launch(rec, 6, "kS", 100, epoch=4)
    rec._test_pcs_retire_below(4)
    rec._test_pcs_ingest([(2, "kS", 0x0, 0, [(SELECTED, 10)])], REASONS)
    rec._test_pcs_attribute(False)
    nodes, _, metrics = flushed(rec)
    assert by_key(nodes, metrics) == {(4, 6, "kS", 0, "sass+0x0"): {"samples": 5, "stall_selected": 5}}
    assert rec.pcsampling_stats()["late"] == 5
