"""GPU: metrics given while torch captures a CUDA graph count once per replay, under ``<captured_at>`` (decision 0320).

A Triton kernel with launch_metadata (plain ``bytes``, tensor ``flops``) and scopes with plain, tensor and
1-d tensor metrics are captured 10 times into one graph, replayed N times under a scope; several sessions
and periodic phases as upstream's test_tensor_metrics_cudagraph, test_multiple_sessions_cudagraph_metric_kernels
and test_periodic_flushing_cudagraph check them.
"""

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("proton_cupti", reason="proton-profiler-cupti is not installed")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import proton_core as proton  # noqa: E402
from proton_core.testing import child, load_profile  # noqa: E402

CAPTURED = "<captured_at>"
ITERS = 10


def metadata_fn(grid, metadata, args):
    x = args["x"]
    return {"name": "foo_test", "bytes": x.numel() * x.element_size(), "flops": x.sum()}


@triton.jit(launch_metadata=metadata_fn)
def foo(x, y, z):
    tl.store(z, tl.load(y) + tl.load(x))


def step():
    with proton.scope("scope_a", metrics={"bytes": 16}):
        a = torch.ones((2, 2), device="cuda")
    with proton.metadata_state():
        a_sum = a.sum()
    with proton.scope("scope_b", metrics={"sum": a_sum}):
        b = torch.ones((2, 2), device="cuda")
    c = a + b
    foo[(1,)](a, b, c)
    with proton.metadata_state():
        d = torch.arange(4, device="cuda")
    with proton.scope("scope_d", metrics={"vec": d}):
        d * 2


def load(path):
    return load_profile(str(path))[0]


@pytest.mark.parametrize("replays", [1, 3])
def test_captured_metrics_count_per_replay(tmp_path, replays):
    proton.start(str(tmp_path / "p"), backend="cupti", context="shadow", hook="triton")
    step()  # warm: compiles foo, fills the caches the capture must not use
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(ITERS):
            step()
    with proton.scope("test0"):
        for _ in range(replays):
            graph.replay()
    torch.cuda.synchronize()
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    assert child(root, "scope_a")["metrics"]["bytes"] == 16  # the warm step only: nothing at the capture
    captured = child(root, "test0", CAPTURED)
    foo_test = child(captured, "foo_test")["metrics"]
    assert foo_test["count"] == replays * ITERS
    assert (foo_test["bytes"], foo_test["flops"]) == (replays * 160, replays * 40)
    assert child(captured, "scope_a")["metrics"]["bytes"] == replays * 160
    assert child(captured, "scope_b")["metrics"]["sum"] == replays * 40.0
    assert child(captured, "scope_d")["metrics"]["vec"] == [0, replays * 10, replays * 20, replays * 30]


def test_sessions_and_periodic_parts(tmp_path):
    x = torch.ones((2, 2), device="cuda")
    z = torch.empty_like(x)
    foo[(1,)](x, x, z)
    parts = proton.start(str(tmp_path / "parts"), backend="cupti", hook="triton", mode="periodic_flushing")
    other = proton.start(str(tmp_path / "other"), backend="cupti", hook="triton")
    proton.deactivate(other)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with proton.scope("scope_a", metrics={"bytes": 16}):
            foo[(1,)](x, x, z)
    proton.activate(other)  # records the replays, but was not recording at the capture: kernels, no metrics
    with proton.scope("test0"):
        for i in range(30):
            if i and i % 10 == 0:
                proton.data.advance_phase(session=parts)
            graph.replay()
    torch.cuda.synchronize()
    written = [p for p in proton.finalize(parts) if ".part_" in p]
    proton.finalize(other)
    assert len(written) == 3
    for path in written:
        scope_a = child(load(path), "test0", CAPTURED, "scope_a")
        assert scope_a["metrics"]["bytes"] == 160
        foo_test = child(scope_a, "foo_test")["metrics"]
        assert (foo_test["count"], foo_test["bytes"], foo_test["flops"]) == (10, 160, 40)
    scope_a = child(load(tmp_path / "other.hatchet"), "test0", CAPTURED, "scope_a")
    assert "bytes" not in scope_a["metrics"]
    foo_test = child(scope_a, "foo_test")["metrics"]
    assert foo_test["count"] == 30 and "flops" not in foo_test and "bytes" not in foo_test
