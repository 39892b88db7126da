"""On an AMD GPU with ROCm 6.2+ (never run here: no AMD GPU was available when this was written).

    python3 -m pytest -m amdgpu plugins/roctracer/tests

Each case runs in a process of its own: rocprofiler-sdk must be configured before the process's
first GPU call, and takes one tool per process.  torch for ROCm is the GPU client.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.amdgpu


def run(body, tmp_path, env=None):
    code = textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=dict(os.environ, **(env or {})))
    return out


def torch_rocm_or_skip():
    torch = pytest.importorskip("torch")
    if not getattr(torch.version, "hip", None):
        pytest.skip("torch is not a ROCm build")


def test_kernels_per_scope_and_device_info(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, torch
        proton.start("p", backend="rocprofiler")          # before the first GPU call
        a = torch.zeros(1024, device="cuda")
        torch.cuda.synchronize()
        with proton.scope("s"):
            for _ in range(10):
                a.add_(1.0)
        torch.cuda.synchronize()
        proton.finalize()
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    root, devices = json.load(open(tmp_path / "p.hatchet"))
    s = [c for c in root["children"] if c["frame"]["name"] == "s"][0]
    counts = [c["metrics"]["count"] for c in s["children"] if "device_id" in c["metrics"]]
    assert sum(counts) == 10
    info = devices["HIP"]["0"]
    assert info["arch"].startswith("gfx") and info["num_sms"] > 0 and info["clock_rate"] > 0


def test_automatic_choice_is_rocprofiler(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, torch
        proton.start("p")
        torch.ones(4, device="cuda").sum().item()
        proton.finalize()
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    root, _ = json.load(open(tmp_path / "p.hatchet"))
    assert root["metadata"]["backend"] == "rocprofiler"


def test_too_late_says_what_to_do(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, torch
        from proton_core.plugin_api import ProtonError
        torch.zeros(1, device="cuda"); torch.cuda.synchronize()   # the runtime made its queues first
        try:
            proton.start("p", backend="rocprofiler")
            print("started")
        except ProtonError as exc:
            print(exc)
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "proton_roctracer.attach()" in out.stdout, out.stdout


def test_attach_early_then_start_later(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, proton_roctracer, torch
        proton_roctracer.attach()
        a = torch.zeros(16, device="cuda"); torch.cuda.synchronize()
        proton.start("p", backend="rocprofiler")
        a.add_(1.0); torch.cuda.synchronize()
        proton.finalize()
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    root, _ = json.load(open(tmp_path / "p.hatchet"))
    assert sum(c["metrics"].get("count", 0) for c in root["children"] if "device_id" in c["metrics"]) == 1


def test_roctx_ranges_are_scopes(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, torch
        proton.start("p", backend="rocprofiler")
        a = torch.zeros(16, device="cuda")
        torch.cuda.nvtx.range_push("forward")   # roctxRangePushA on ROCm
        a.add_(1.0)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        proton.finalize()
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    root, _ = json.load(open(tmp_path / "p.hatchet"))
    assert "forward" in [c["frame"]["name"] for c in root["children"]]


def test_hip_visible_devices_name_the_device(tmp_path):
    torch_rocm_or_skip()
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two AMD GPUs")
    out = run("""
        import proton_core as proton, torch
        proton.start("p", backend="rocprofiler")
        torch.ones(4, device="cuda:0").sum().item()
        proton.finalize()
    """, tmp_path, env={"HIP_VISIBLE_DEVICES": "1"})
    assert out.returncode == 0, out.stderr
    root, devices = json.load(open(tmp_path / "p.hatchet"))
    assert {c["metrics"]["device_id"] for c in root["children"] if "device_id" in c["metrics"]} == {"0"}
    assert set(devices["HIP"]) == {"0"}


def test_hip_graph_kernels_under_their_capture_path(tmp_path):
    torch_rocm_or_skip()
    out = run("""
        import proton_core as proton, torch
        proton.start("p", backend="rocprofiler")
        a = torch.zeros(1024, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            a.add_(1.0)                                  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with proton.scope("capture"):
            with torch.cuda.graph(g):
                a.add_(1.0)
        with proton.scope("replay"):
            for _ in range(3):
                g.replay()
        torch.cuda.synchronize()
        proton.finalize()
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    root, _ = json.load(open(tmp_path / "p.hatchet"))
    replay = [c for c in root["children"] if c["frame"]["name"] == "replay"][0]
    at = [c for c in replay["children"] if c["frame"]["name"] == "<captured_at>"]
    assert at, [c["frame"]["name"] for c in replay["children"]]
    capture = [c for c in at[0]["children"] if c["frame"]["name"] == "capture"][0]
    assert sum(c["metrics"].get("count", 0) for c in capture["children"] if "device_id" in c["metrics"]) == 3
