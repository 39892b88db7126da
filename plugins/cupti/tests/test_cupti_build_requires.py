"""The build asks for the nvidia header wheels exactly when no CUDA toolkit can serve it."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "build_backend"))

import cupti_headers  # noqa: E402


def _files(*paths):
    present = set(paths)
    return lambda p: p in present


def test_toolkit_with_every_header_needs_no_wheels():
    isfile = _files("/opt/cuda/include/cuda.h", "/opt/cuda/include/crt/host_defines.h",
                    "/opt/cuda/extras/CUPTI/include/cupti.h")
    assert cupti_headers.extra_build_requires({"CUDA_HOME": "/opt/cuda"}, isfile) == []


def test_no_toolkit_or_a_partial_one_asks_for_the_three_wheels():
    wheels = cupti_headers.extra_build_requires({}, _files())
    assert sorted(w.split(">")[0] for w in wheels) == ["nvidia-cuda-crt", "nvidia-cuda-cupti", "nvidia-cuda-runtime"]
    partial = _files("/usr/local/cuda/include/cuda.h", "/usr/local/cuda/include/crt/host_defines.h")  # no cupti.h
    assert cupti_headers.extra_build_requires({}, partial) == wheels


def test_the_variable_forces_the_wheels_even_with_a_toolkit():
    isfile = _files("/usr/local/cuda/include/cuda.h", "/usr/local/cuda/include/crt/host_defines.h",
                    "/usr/local/cuda/include/cupti.h")
    assert cupti_headers.extra_build_requires({}, isfile) == []
    assert cupti_headers.extra_build_requires({"PROTON_CUPTI_HEADERS": "wheels"}, isfile) == cupti_headers.HEADER_WHEELS


def test_pyproject_uses_the_in_tree_backend():
    with open(os.path.join(os.path.dirname(HERE), "pyproject.toml")) as f:
        text = f.read()
    assert 'build-backend = "proton_cupti_build"' in text and 'backend-path = ["build_backend"]' in text
