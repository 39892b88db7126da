"""GPU: NVTX ranges from torch.cuda.nvtx and from native code become scopes of the kernels under CUPTI."""

from __future__ import annotations

import pytest

import proton_core as proton
from proton_core.testing import child, gpu_missing_reason, load_profile

from nvtxtest import run_thread

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_missing_reason() is not None, reason=f"needs an NVIDIA GPU with CUPTI: {gpu_missing_reason()}"),
]


def kernels_below(node) -> int:
    """Kernel launches in the subtree (kernel nodes carry a device_id)."""
    own = int(node["metrics"]["count"]) if "device_id" in node["metrics"] else 0
    return own + sum(kernels_below(c) for c in node["children"])


def test_torch_nvtx_ranges_nest_inside_proton_scopes_with_exact_counts(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    proton.start(str(tmp_path / "p"), backend="cupti")
    with proton.scope("outer"):
        torch.cuda.nvtx.range_push("fwd")
        with proton.scope("layer"):
            torch.cuda.nvtx.range_push("attn")
            for _ in range(7):
                x.add_(1)
            torch.cuda.nvtx.range_pop()
        for _ in range(3):
            x.mul_(2)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    proton.finalize()
    root = load_profile(str(tmp_path / "p.hatchet"))[0]
    assert kernels_below(child(root, "outer", "fwd", "layer", "attn")) == 7
    fwd = child(root, "outer", "fwd")
    assert kernels_below(fwd) == 10
    assert [c["frame"]["name"] for c in child(root, "outer")["children"]] == ["fwd"]


def test_graph_replay_keeps_the_capture_time_nvtx_path(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.zeros(1024, device="cuda")
    proton.start(str(tmp_path / "g"), backend="cupti")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.cuda.nvtx.range_push("captured")
        for _ in range(5):
            x.add_(1)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    with proton.scope("replay"):
        for _ in range(4):
            graph.replay()
    torch.cuda.synchronize()
    proton.finalize()
    root = load_profile(str(tmp_path / "g.hatchet"))[0]
    assert kernels_below(child(root, "replay", "<captured_at>", "captured")) == 20


def test_native_ranges_without_the_gil_tag_kernels_through_the_backend(tmp_path, client):
    """Ranges pushed while the GIL is released (ctypes) are interned natively and set in CUPTI's recorder."""
    from proton_cupti import _cupti

    if not hasattr(_cupti, "_test_launch_noop"):
        pytest.skip("proton-profiler-cupti built without PROTON_CUPTI_TESTING (the noop launcher)")
    proton.start(str(tmp_path / "n"), backend="cupti")
    with proton.scope("step"):
        assert client.client_push(b"nccl") == 0  # ctypes.CDLL releases the GIL: the native path
        assert _cupti._test_launch_noop(6) == ""
        assert client.client_pop() == 0
        assert _cupti._test_launch_noop(2) == ""
    run_thread(client, ["worker"])  # a thread that never held the GIL: no kernels, no crash
    proton.finalize()
    root = load_profile(str(tmp_path / "n.hatchet"))[0]
    assert child(root, "step", "nccl", "proton_noop")["metrics"]["count"] == 6
    assert child(root, "step", "proton_noop")["metrics"]["count"] == 2
