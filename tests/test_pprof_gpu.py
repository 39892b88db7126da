"""pprof output of real CUDA kernels (CUPTI): the same numbers as the hatchet file of the same run.

Run on the GPU machine (``scripts/gpu_check.sh`` runs ``-m gpu``); skipped elsewhere with the reason.
"""

from __future__ import annotations

import pytest

import proton_core as proton
from proton_core.formats import pprof_read

pytestmark = pytest.mark.gpu




@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return torch


def by_path(profile) -> dict:
    out = {}
    for s in profile.samples:
        key = (s.path, frozenset(s.labels.items()))
        assert key not in out
        out[key] = {t: v for t, v in s.values.items() if v}
    return out


def test_pprof_of_cuda_kernels_equals_the_hatchet_of_the_same_run(tmp_path, torch):
    from proton_core.viewer import main

    proton.start(str(tmp_path / "direct"), backend="cupti", output_format="pprof")
    proton.start(str(tmp_path / "file"), backend="cupti")
    x = torch.randn(512, 512, device="cuda")
    stream = torch.cuda.Stream()
    with proton.scope("step"):
        for _ in range(20):
            y = x @ x
        with proton.scope("side"), torch.cuda.stream(stream):
            for _ in range(10):
                y.add_(1)
    torch.cuda.synchronize()
    proton.finalize()
    assert main(["--pprof", str(tmp_path / "conv.pb.gz"), str(tmp_path / "file.hatchet")]) == 0
    direct = pprof_read.read(tmp_path / "direct.pb.gz")
    converted = pprof_read.read(tmp_path / "conv.pb.gz")
    assert by_path(direct) == by_path(converted)
    side = [s for s in direct.samples if s.path[:2] == ("step", "side")]
    assert sum(s.values["gpu_kernel_launches"] for s in side) == 10
    assert all(s.labels.get("cuda_device") == str(torch.cuda.current_device()) for s in direct.samples)
    assert direct.total("gpu_kernel_launches") >= 30 and direct.total("gpu_kernel_time") > 0


def test_pprof_of_instruction_sampling_splits_every_line_by_stall_reason(tmp_path, torch):
    x = torch.ones(1 << 22, device="cuda")
    proton.start(str(tmp_path / "pc"), backend="cupti", mode="pcsampling", output_format="pprof")
    with proton.scope("loop"):
        for _ in range(50):
            x.mul_(1.0001)
    torch.cuda.synchronize()
    proton.finalize()
    p = pprof_read.read(tmp_path / "pc.pb.gz")
    assert ("gpu_pcsample", "count") in p.sample_types
    kernels = [s for s in p.samples if s.values["gpu_kernel_launches"]]
    assert sum(s.values["gpu_kernel_launches"] for s in kernels) == 50
    sampled = [s for s in p.samples if s.values.get("gpu_pcsample")]
    assert sampled and p.total("gpu_pcsample") > 0
    assert all("stall_reason" in s.labels and s.path[0] == "loop" for s in sampled)
