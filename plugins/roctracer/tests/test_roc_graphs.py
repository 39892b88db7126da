"""HIP graphs as CUDA graphs are on CUPTI: each kernel of a graph launch is filed under
<launch path>/<captured_at>/<path where it was captured>, matched by its ordinal in the launch."""

import pytest

import proton_core as proton
from proton_core.testing import child, child_names, load_profile

CAPTURED_AT = "<captured_at>"


def kernels(node):
    return {c["frame"]["name"]: c["metrics"] for c in node["children"] if "device_id" in c["metrics"]}


def test_graph_kernels_keep_their_capture_paths(script, tmp_path):
    sim = script
    sim.script(seed=99)  # records out of order: placed by dispatch, not by arrival
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("capture"):
        sim.lib.simrocm_capture_begin(5)
        with proton.scope("attn"):
            sim.launch("k0", stream=5, module=True)  # Triton's hipModuleLaunchKernel
        with proton.scope("mlp"):
            sim.launch("k1", stream=5)
            sim.launch("eager", stream=6, duration_ns=3)  # another stream: not captured, runs now
        graph = sim.lib.simrocm_capture_end(5)
    exec_ = sim.lib.simrocm_instantiate(graph)
    with proton.scope("replay"):
        for _ in range(2):
            sim.lib.simrocm_graph_launch(exec_, 5, 1, 10)  # on GPU 1; kernel i runs (i + 1) * 10 ns
    proton.finalize()
    root, _ = load_profile(str(tmp_path / "p.hatchet"))
    assert kernels(child(root, "capture", "mlp"))["eager"]["count"] == 1
    assert "attn" not in child_names(child(root, "capture"))  # captured there, never dispatched there
    at = child(root, "replay", CAPTURED_AT, "capture")
    k0 = kernels(child(at, "attn"))["k0"]
    k1 = kernels(child(at, "mlp"))["k1"]
    assert (k0["count"], k0["time (ns)"], k0["device_id"]) == (2, 20, "1")
    assert (k1["count"], k1["time (ns)"]) == (2, 40)
    assert child_names(child(root, "replay")) == [CAPTURED_AT]


def test_a_graph_captured_before_the_session_is_filed_at_its_launch(script, tmp_path):
    sim = script
    sim.lib.simrocm_capture_begin(8)
    sim.launch("g", stream=8)
    exec_ = sim.lib.simrocm_instantiate(sim.lib.simrocm_capture_end(8))
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("replay"):
        sim.lib.simrocm_graph_launch(exec_, 8, 0, 7)
    proton.finalize()
    root, _ = load_profile(str(tmp_path / "p.hatchet"))
    assert kernels(child(root, "replay"))["g"]["time (ns)"] == 7
