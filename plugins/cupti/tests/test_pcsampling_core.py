"""mode="pcsampling" end to end without a GPU: the cupti backend's Python shell over the native recorder
and sample store (test bindings in place of CUPTI), through proton_core sessions into the .hatchet file:
the tree reads scope / kernel / file:line with samples and stall reasons, kernel nodes keep their counts."""

import dataclasses

import pytest

import proton_core as proton
from cupti_helpers import CorrelationIds, child, kernel_node, load, sampled_lines
from proton_core.testing import get_plugins

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(not hasattr(_cupti, "_test_pcs_reset"),
                                reason="proton_cupti._cupti was built without PROTON_CUPTI_TESTING=ON")

from proton_cupti import pcsampling  # noqa: E402
from proton_cupti.backend import CuptiBackend, batch_from  # noqa: E402

STALLED = "smsp__pcsamp_warps_issue_stalled_"
REASONS = [(0, STALLED + "long_scoreboard"), (1, STALLED + "long_scoreboard_not_issued"), (2, STALLED + "wait")]


class RecorderBackend(CuptiBackend):
    """The cupti backend minus CUPTI: the recorder and the sample store, fed by the test."""

    def __init__(self) -> None:  # no driver, no libcupti
        self.native = _cupti
        self._devices = {}
        self._started = False
        self.context_setter = _cupti.set_context

    def start(self, mode):
        options = pcsampling.parse_mode(mode)
        _cupti._test_reset()
        _cupti._test_pcs_reset(options.collection if options else "")
        self._pcs = options

    def stop(self):
        self._pcs = None
        _cupti._test_pcs_reset("")

    def flush(self):
        flushed = _cupti._test_flush(self._pcs is not None)
        return batch_from(*flushed[:5], self._devices, lambda device: {},
                          kernel_metrics=flushed[5] if len(flushed) > 5 else None)

    def drain(self):
        return None


@pytest.fixture
def recorder_backend(monkeypatch):
    registry = get_plugins().backends
    entry = registry.get("cupti")
    monkeypatch.setitem(registry.items, "cupti", dataclasses.replace(entry, factory=RecorderBackend,
                                                                     available=lambda: None))
    yield
    _cupti._test_pcs_reset("")
    _cupti.set_epoch(0)
    _cupti._test_reset()


corr = CorrelationIds(400_000)


def kernel_with_samples(kernel, time_ns, pcs, collection):
    """One launch on this thread (in the current scope) with its record and its samples."""
    c = corr()
    _cupti._test_launch(c)
    _cupti._test_kernel(c, kernel, start=0, end=time_ns)
    scope = c if collection == "serialized" else 0
    _cupti._test_pcs_ingest([(0x77, kernel, pc, scope, reasons) for pc, reasons in pcs], REASONS)


@pytest.mark.parametrize("collection", ["continuous", "serialized"])
def test_tree_reads_scope_kernel_line(tmp_path, recorder_backend, collection):
    proton.start(str(tmp_path / "p"), backend="cupti", mode=f"pcsampling:collection={collection}")
    with proton.scope("outer"):
        with proton.scope("inner"):
            kernel_with_samples("kHot", 900, [(0x10, [(0, 6), (1, 2)]), (0x20, [(2, 3)])], collection)
            kernel_with_samples("kHot", 100, [(0x10, [(0, 1)])], collection)
    with proton.scope("other"):
        kernel_with_samples("kCold", 50, [(0x30, [(2, 4)])], collection)
    _cupti._test_pcs_attribute(False)
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    hot = kernel_node(child(root, "outer", "inner"), "kHot")
    assert (hot["metrics"]["count"], hot["metrics"]["time (ns)"]) == (2, 1000)  # the kernel node as normal mode
    lines = sampled_lines(hot)
    assert lines == {
        "sass+0x10": {"samples": 7, "stall_long_scoreboard": 7, "stall_long_scoreboard_not_issued": 2},
        "sass+0x20": {"samples": 3, "stall_wait": 3},
    }
    assert all(c["frame"]["type"] == "in_kernel" for c in hot["children"])
    cold = kernel_node(child(root, "other"), "kCold")
    assert cold["metrics"]["count"] == 1 and sampled_lines(cold) == {"sass+0x30": {"samples": 4, "stall_wait": 4}}


def test_samples_follow_the_session_that_launched(tmp_path, recorder_backend):
    """Two sessions, one deactivated while a kernel ran: its samples only in the active one."""
    a = proton.start(str(tmp_path / "a"), backend="cupti", mode="pcsampling:collection=serialized")
    b = proton.start(str(tmp_path / "b"), backend="cupti", mode="pcsampling:collection=serialized")
    with proton.scope("both"):
        kernel_with_samples("kX", 10, [(0x0, [(2, 5)])], "serialized")
    proton.deactivate(b)
    with proton.scope("only_a"):
        kernel_with_samples("kX", 10, [(0x0, [(2, 8)])], "serialized")
    _cupti._test_pcs_attribute(False)
    proton.finalize(b)
    proton.finalize(a)
    root_a, _ = load(tmp_path / "a.hatchet")
    root_b, _ = load(tmp_path / "b.hatchet")
    assert sampled_lines(kernel_node(child(root_a, "only_a"), "kX"))["sass+0x0"]["samples"] == 8
    assert sampled_lines(kernel_node(child(root_a, "both"), "kX"))["sass+0x0"]["samples"] == 5
    assert sampled_lines(kernel_node(child(root_b, "both"), "kX"))["sass+0x0"]["samples"] == 5
    assert [c["frame"]["name"] for c in root_b["children"]] == ["both"]
