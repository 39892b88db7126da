"""On the GPU: a window's part holds every kernel launched inside it and none from outside (CUPTI backend;
``stop`` flushes completely before it writes)."""

import pytest

from proton_core.testing import load_profile

pytestmark = pytest.mark.gpu


def gpu_job(job: str) -> str:
    """The job's handshake, with one elementwise CUDA kernel (``x.add_(1)``) per iteration inside the scope."""
    start = 'sid = proton.start(name, backend="host", mode=mode)'
    loop = '        with proton.scope(label, {"n": 1}):\n            time.sleep(0.002)'
    assert start in job and loop in job, "the job's script changed: update this test"
    warm = ('import torch\n'
            'x = torch.zeros(1 << 16, device="cuda")\n'
            'x.add_(1)\n'
            'torch.cuda.synchronize()  # warm: no first-call kernels later\n')
    return job.replace(start, warm + start.replace('"host"', '"cupti"')).replace(
        loop, '        with proton.scope(label, {"n": 1}):\n            x.add_(1)\n            time.sleep(0.002)')


def kernel_count(node) -> int:
    return sum(c["metrics"].get("count", 0) for c in node["children"])


def test_a_window_holds_every_kernel_launched_in_it_and_no_other(start_job, ctl, job_program):
    pytest.importorskip("torch")
    program = gpu_job(job_program)
    assert program.count("x.add_(1)") == 2 and 'backend="cupti"' in program
    job = start_job("gpu", program=program)
    job.set_label("before")
    job.set_label("window")
    assert ctl("start", "--pid", job.pid)[0] == 0
    job.wait_iterations("window", 200)
    status, out, err = ctl("stop", "--pid", job.pid)
    assert status == 0, err
    job.set_label("after")
    job.finish()
    root = load_profile(job.work / "gpu.part_1.hatchet")[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["window"]
    window = root["children"][0]
    entered = window["metrics"]["n"]  # scope entries made while recording
    # every kernel of those entries is there, delivered by stop's complete flush (CUPTI keeps records in its
    # buffers until flushed); a command landing between an entry and its kernel moves the count by one
    assert entered >= 200 and entered - 1 <= kernel_count(window) <= entered + 1
    final = load_profile(job.work / "gpu.hatchet")[0]
    assert final["children"] == []  # idle time recorded nothing
