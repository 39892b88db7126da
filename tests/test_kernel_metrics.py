"""Metrics measured inside kernels (``Batch.kernel_metrics``): filed below the kernel's node by the core.

Driven through the synthetic backend, which aggregates them per (epoch, node, kernel, device,
sub_path) as a native backend does while draining its sample buffers.
"""

import json
import random
from collections import Counter

import pytest

import proton_core as proton
from proton_core.formats import hatchet
from proton_core.plugin_api import close_op, open_op
from proton_core.session import MANAGER
from proton_core.testing import child, load_profile

LINE = "/src/kern.py:42"
OTHER = "/src/kern.py:57"


def frames(literal):
    return [c["frame"]["name"] for c in literal["children"]]


def metrics(literal, *path):
    """A node's metrics without its kernel labels."""
    found = child(literal, *path)["metrics"]
    return {k: v for k, v in found.items() if k not in ("device_id", "device_type")}


def test_metrics_land_under_context_kernel_and_line_summed_across_launches_and_flushes(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("step"):
        fake.launch("gemm", 1000, inner=[((LINE,), {"samples": 3, "stall_long_scoreboard": 2, "stall_wait": 1}),
                                         ((OTHER,), {"samples": 1, "stall_wait": 1})])
        fake.launch("gemm", 1000, inner=[((LINE,), {"samples": 2, "stall_long_scoreboard": 2})])
    proton.data.get(sid, 0)  # a flush between launches: the next ones add to the same nodes
    with proton.scope("step"):
        fake.launch("gemm", 1000, inner=[((LINE,), [("samples", 5), ("stall_barrier", 5)]),
                                         ((), {"samples": 4}),  # the kernel node itself
                                         (("helper", "/src/lib.py:7"), {"samples": 6, "stall_wait": 6})])
    with proton.scope("other"):
        fake.launch("gemm", 1000, inner=[((LINE,), {"samples": 7})])
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    kernel = child(root, "step", "gemm")
    assert kernel["metrics"]["count"] == 3 and kernel["metrics"]["time (ns)"] == 3000
    assert kernel["metrics"]["samples"] == 4
    assert frames(kernel) == [LINE, OTHER, "helper"]
    assert metrics(kernel, LINE) == {"samples": 10, "stall_long_scoreboard": 4, "stall_wait": 1, "stall_barrier": 5}
    assert metrics(kernel, OTHER) == {"samples": 1, "stall_wait": 1}
    assert metrics(kernel, "helper") == {}
    assert metrics(kernel, "helper", "/src/lib.py:7") == {"samples": 6, "stall_wait": 6}
    assert metrics(root, "other", "gemm", LINE) == {"samples": 7}
    # places inside a kernel are marked as such; the kernel and its scopes are ordinary frames
    assert child(kernel, LINE)["frame"] == {"name": LINE, "type": "in_kernel"}
    assert child(kernel, "helper")["frame"]["type"] == "in_kernel"
    assert kernel["frame"]["type"] == "function" and child(root, "step")["frame"]["type"] == "function"


def test_samples_without_kernel_records_and_properties_replaced(tmp_path, fake):
    """A sampling backend may deliver no record for a kernel: its node exists anyway, its device is known."""
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s"):
        fake.backend.sample("k", [((LINE,), {"samples": 2, "occupancy (pty)": 0.5})], device=1)
        fake.backend.sample("k", [((LINE,), {"samples": 1, "occupancy (pty)": 0.75})], device=1)
    proton.finalize()
    root, devices = load_profile(tmp_path / "p.hatchet")
    kernel = child(root, "s", "k")
    assert "count" not in kernel["metrics"] and "device_id" not in kernel["metrics"]
    assert metrics(kernel, LINE) == {"samples": 3, "occupancy (pty)": 0.75}
    assert list(devices["CUDA"]) == ["1"]


def test_a_triton_op_renames_the_kernel_node_for_its_lines_too(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s"):
        open_op("matmul_op")
        fake.launch("matmul_kernel_0d1d", 500, inner=[((LINE,), {"samples": 9})])
        close_op()
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert frames(child(root, "s")) == ["matmul_op"]
    assert child(root, "s", "matmul_op")["metrics"]["count"] == 1
    assert metrics(root, "s", "matmul_op", LINE) == {"samples": 9}


def test_metrics_go_to_the_phase_current_at_launch(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[((LINE,), {"samples": 2})])
    fake.launch("k", inner=[((LINE,), {"samples": 3})])
    proton.data.advance_phase(sid)  # not delivered yet: they stay in phase 0
    fake.launch("k", inner=[((LINE,), {"samples": 10}), ((OTHER,), {"samples": 1})])
    # data.get returns the tree as the file holds it: the sample count under upstream's key (decision 0247)
    assert metrics(proton.data.get(sid, 0)[0], "k", LINE) == {"num_samples": 5}
    assert frames(child(proton.data.get(sid, 0)[0], "k")) == [LINE]
    assert metrics(proton.data.get(sid, 1)[0], "k", LINE) == {"num_samples": 10}
    proton.finalize(sid)  # the phases merged, with the inner nodes kept inner
    kernel = child(load_profile(tmp_path / "p.hatchet")[0], "k")
    assert metrics(kernel, LINE) == {"samples": 15} and metrics(kernel, OTHER) == {"samples": 1}
    assert {c["frame"]["type"] for c in kernel["children"]} == {"in_kernel"}


def test_two_sessions_get_what_each_was_active_for(tmp_path, fake):
    a = proton.start(str(tmp_path / "a"), backend="fake")
    fake.launch("k", inner=[((LINE,), {"samples": 1})])
    b = proton.start(str(tmp_path / "b"), backend="fake", context="python")
    for samples in (2, 4):  # one line of code: one python-context path in b
        fake.launch("k", inner=[((LINE,), {"samples": samples})])
        proton.deactivate(a)
    proton.finalize(a)
    proton.finalize(b)
    assert metrics(load_profile(tmp_path / "a.hatchet")[0], "k", LINE) == {"samples": 3}
    root_b = load_profile(tmp_path / "b.hatchet")[0]
    lines = [node for node in _walk(root_b) if node["frame"]["name"] == LINE]
    assert [n["metrics"]["samples"] for n in lines] == [6]  # under this test's python frames, below k
    assert all(n["frame"]["type"] == "in_kernel" for n in lines)


def _walk(literal):
    stack = [literal]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node["children"])


def test_entries_of_a_retired_epoch_are_counted_as_dropped_and_named(tmp_path, fake, caplog):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[((LINE,), {"samples": 1})])
    old_epoch = fake.backend.epoch
    proton.data.advance_phase(sid)
    assert proton.data.is_phase_complete(sid, 0)  # this flush retires the old epoch
    with fake.backend.lock:  # a backend that hands entries over one flush too late
        fake.backend.kernel_metrics[(old_epoch, 0, "late", 0, (LINE,))] = {"samples": 5}
        fake.backend.kernel_metrics[(old_epoch, 0, "late", 0, (OTHER,))] = {"samples": 5}
    proton.finalize(sid)
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert frames(root) == ["k"] and metrics(root, "k", LINE) == {"samples": 1}
    assert root["metrics"]["dropped"] == 2
    assert any("delivered 2 in-kernel metric entries after the flush" in r.getMessage() for r in caplog.records)


def test_entries_for_a_cleared_phase_are_counted_as_dropped(tmp_path, fake, caplog):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[((LINE,), {"samples": 1}), ((OTHER,), {"samples": 1})])
    proton.data.advance_phase(sid)
    proton.data.clear(sid, 0)  # before its entries were delivered
    proton.finalize(sid)
    root = load_profile(tmp_path / "p.hatchet")[0]
    assert root["children"] == [] and root["metrics"]["dropped"] == 1 + 2  # the kernel record and two entries
    assert any("2 in-kernel metric entries arrived for phases already cleared" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("name, why", [("bad name!", "is malformed"), ("count", "clashes with the reserved name")])
def test_a_bad_metric_name_fails_the_flush_in_one_line_and_keeps_the_rest(tmp_path, fake, name, why):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", inner=[((LINE,), {"samples": 1, name: 2}), ((OTHER,), {"samples": 4})])
    with pytest.raises(proton.ProtonError) as info:
        proton.data.get(sid, 0)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("backend 'fake' delivered an in-kernel metric with a bad name: ")
    assert f"metric name {name!r}" in message and why in message
    root = proton.data.get(sid, 0)[0]  # the rest of that flush was filed: the record and the good entry
    assert root["children"][0]["metrics"]["count"] == 1
    assert frames(child(root, "k")) == [OTHER] and metrics(root, "k", OTHER) == {"num_samples": 4}  # as the file holds it


def test_trace_sessions_keep_them_in_their_tree(tmp_path, fake):
    proton.start(str(tmp_path / "t"), backend="fake", data="trace")
    with proton.scope("s"):
        fake.launch("k", 100, inner=[((LINE,), {"samples": 3})])
    (path,) = proton.finalize(output_format="hatchet")
    assert metrics(load_profile(path)[0], "s", "k", LINE) == {"samples": 3}
    proton.start(str(tmp_path / "t2"), backend="fake", data="trace")
    fake.launch("k", 100, inner=[((LINE,), {"samples": 3})])
    (path,) = proton.finalize()  # the Chrome trace has no place for them: the kernel event alone
    events = json.load(open(path))["traceEvents"]
    assert [e["name"] for e in events if e.get("ph") == "X" and e["name"] in ("k", LINE)] == ["k"]


def test_hatchet_round_trip_keeps_inner_nodes_and_their_metrics(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s"):
        fake.launch("k", 100, device=0, inner=[((LINE,), {"samples": 3, "stall_wait": 3})])
        fake.launch("k", 200, device=1, inner=[(("callee", OTHER), {"samples": 2.5})])
    proton.finalize()
    read = hatchet.read(tmp_path / "p.hatchet")
    (scope,) = read.root.children
    kernels = scope.children  # one sibling per device; the places hang under the first
    assert [(k.name, k.metrics["device_id"], k.metrics["time (ns)"], k.inner) for k in kernels] == [
        ("k", "0", 100, False), ("k", "1", 200, False)]
    line, callee = kernels[0].children
    assert (line.name, line.inner, line.metrics) == (LINE, True, {"samples": 3, "stall_wait": 3})
    assert (callee.name, callee.inner, callee.metrics) == ("callee", True, {})
    (other,) = callee.children
    assert (other.name, other.inner, other.metrics, other.children) == (OTHER, True, {"samples": 2.5}, [])
    assert kernels[1].children == [] and scope.inner is False
    assert read.metric_keys() == ["count", "time (ns)", "samples", "stall_wait"]
    # written again from what was read, node for node: the same document
    doc = load_profile(tmp_path / "p.hatchet")
    assert _literal(read.root) == _strip(doc[0])


def _literal(node):
    kind = "in_kernel" if node.inner else "function"
    return {"frame": {"name": node.name, "type": kind}, "metrics": node.metrics,
            "children": [_literal(c) for c in node.children]}


def _strip(literal):
    return {"frame": literal["frame"], "metrics": literal["metrics"],
            "children": [_strip(c) for c in literal["children"]]}


def recorded_buffer(n=20000, seed=7):
    """A recorded sample buffer: (scope, kernel, line, stall reason) per sample, as a PC-sampling drain yields."""
    rng = random.Random(seed)
    scopes, kernels = ["fwd", "bwd", "opt"], ["gemm", "softmax"]
    lines = [f"/src/kern.py:{n}" for n in (10, 11, 12, 40)] + ["sass+0x1a0", "sass+0x2c0"]
    stalls = ["stall_long_scoreboard", "stall_wait", "stall_barrier", "stall_long_scoreboard_not_issued"]
    return [(rng.choice(scopes), rng.choice(kernels), rng.choice(lines), rng.choice(stalls)) for _ in range(n)]


def test_a_recorded_sample_buffer_stays_aggregated_over_several_drains(tmp_path, fake):
    samples = recorded_buffer()
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    drains = [samples[i:i + 5000] for i in range(0, len(samples), 5000)]
    for chunk in drains:
        for scope, kernel, line, stall in chunk:
            with proton.scope(scope):
                fake.backend.sample(kernel, [((line,), {"samples": 1, stall: 1})])
        distinct = {(s, k, line) for s, k, line, _ in chunk}
        assert len(fake.backend.kernel_metrics) == len(distinct)  # the backend keeps totals, not samples
        MANAGER.flush(MANAGER.sessions[sid].backend_state)
        assert fake.backend.kernel_metrics == {}
    tree = MANAGER.sessions[sid].profile.tree
    inner_nodes = [node for _, node in tree.root.walk() if node.inner]
    assert len(inner_nodes) == len({(s, k, line) for s, k, line, _ in samples}) == 36
    assert len(tree.kernel_nodes) == 36 + 6  # the flush's node cache: one per line and one per kernel node
    proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    want = Counter((s, k, line) for s, k, line, _ in samples)
    want_stalls = Counter(samples)
    for (scope, kernel, line), count in want.items():
        got = metrics(root, scope, kernel, line)
        assert got["samples"] == count
        assert {k: v for k, v in got.items() if k != "samples"} == {
            stall: c for (s, k, li, stall), c in want_stalls.items() if (s, k, li) == (scope, kernel, line)}
    assert sum(n["metrics"].get("samples", 0) for n in _walk(root)) == 20000
