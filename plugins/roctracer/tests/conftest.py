"""The ``amdgpu`` marker, and the simulated ROCm every CPU test of this plugin runs against."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proton_core.testing import NoCompiler  # noqa: E402

import roc_helpers  # noqa: E402

AMD_GPU_TESTS = "amdgpu: needs an AMD GPU with ROCm 6.2+ (rocprofiler-sdk); skipped elsewhere, with the reason"


def pytest_configure(config):
    config.addinivalue_line("markers", AMD_GPU_TESTS)


def amd_gpu_missing_reason() -> str | None:
    """None when an AMD GPU and the rocprofiler backend are usable here, else why not."""
    try:
        from proton_roctracer import plugin
    except ImportError as exc:
        return f"proton-profiler-roctracer is not installed ({exc})"
    return plugin.available()


def pytest_collection_modifyitems(config, items):
    amd = [item for item in items if "amdgpu" in item.keywords]
    reason = amd_gpu_missing_reason() if amd else None
    for item in amd if reason else ():
        item.add_marker(pytest.mark.skip(reason=f"needs an AMD GPU with rocprofiler-sdk: {reason}"))


@pytest.fixture(scope="session")
def sim_path(tmp_path_factory):
    """The simulator built as librocprofiler-sdk.so.1 in a folder of its own."""
    try:
        return roc_helpers.build(str(tmp_path_factory.mktemp("simrocm")))
    except NoCompiler as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def sim(sim_path):
    """The simulator, loaded in this process with 4 GPUs and found by the backend through
    PROTON_ROCPROFILER_SDK_PATH (the SDK takes one tool per process: every in-process test shares it)."""
    pytest.importorskip("proton_roctracer._rocprofiler", reason="proton-profiler-roctracer extension not built")
    from proton_roctracer import _rocprofiler

    loaded = _rocprofiler.sdk_path()
    if loaded and os.path.realpath(loaded) != os.path.realpath(sim_path):
        pytest.skip(f"another librocprofiler-sdk is loaded in this process ({loaded})")
    handle = roc_helpers.Sim(sim_path)
    handle.lib.simrocm_set_gpus(4)
    old = os.environ.get("PROTON_ROCPROFILER_SDK_PATH")
    os.environ["PROTON_ROCPROFILER_SDK_PATH"] = os.path.dirname(sim_path)
    yield handle
    if old is None:
        os.environ.pop("PROTON_ROCPROFILER_SDK_PATH", None)
    else:
        os.environ["PROTON_ROCPROFILER_SDK_PATH"] = old


@pytest.fixture
def script(sim):
    """The simulator with an in-order, lossless delivery script, restored after the test."""
    sim.script()
    yield sim
    sim.script()
