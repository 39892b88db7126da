"""The build asks for the nvidia header wheels exactly when no CUDA toolkit can serve it."""

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
# Loaded by file path, as the build backend does (the package need not be built).
_spec = importlib.util.spec_from_file_location(
    "_cuda_paths", os.path.join(os.path.dirname(HERE), "src", "proton_cupti", "cuda_paths.py"))
cuda_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cuda_paths)


def _files(*paths):
    present = set(paths)
    return lambda p: p in present


def test_toolkit_with_every_header_needs_no_wheels():
    isfile = _files("/opt/cuda/include/cuda.h", "/opt/cuda/include/crt/host_defines.h",
                    "/opt/cuda/extras/CUPTI/include/cupti.h")
    assert cuda_paths.extra_build_requires({"CUDA_HOME": "/opt/cuda"}, isfile) == []


def test_no_toolkit_or_a_partial_one_asks_for_the_three_wheels():
    wheels = cuda_paths.extra_build_requires({}, _files())
    assert sorted(w.split(">")[0] for w in wheels) == ["nvidia-cuda-crt", "nvidia-cuda-cupti", "nvidia-cuda-runtime"]
    partial = _files("/usr/local/cuda/include/cuda.h", "/usr/local/cuda/include/crt/host_defines.h")  # no cupti.h
    assert cuda_paths.extra_build_requires({}, partial) == wheels


def test_the_variable_forces_the_wheels_even_with_a_toolkit():
    isfile = _files("/usr/local/cuda/include/cuda.h", "/usr/local/cuda/include/crt/host_defines.h",
                    "/usr/local/cuda/include/cupti.h")
    assert cuda_paths.extra_build_requires({}, isfile) == []
    assert cuda_paths.extra_build_requires({"PROTON_CUPTI_HEADERS": "wheels"}, isfile) == cuda_paths.HEADER_WHEELS


def test_pyproject_uses_the_in_tree_backend():
    with open(os.path.join(os.path.dirname(HERE), "pyproject.toml")) as f:
        text = f.read()
    assert 'build-backend = "proton_cupti_build"' in text and 'backend-path = ["build_backend"]' in text


def test_cmake_reads_the_header_search_list_from_the_script():
    """CMakeLists.txt runs ``cuda_paths.py headers``: toolkits first, none when the wheels are forced."""
    import subprocess
    import sys

    def run(**env):
        out = subprocess.run([sys.executable, "-I", cuda_paths.__file__, "headers"], capture_output=True, text=True,
                             env=dict(os.environ, CUDA_HOME="/opt/cuda-x", **env), check=True).stdout.strip()
        return out.split(";")

    dirs = run()
    assert dirs[:2] == ["/opt/cuda-x/include", "/opt/cuda-x/extras/CUPTI/include"]
    assert all(d.endswith("include") for d in dirs)
    assert not any(d.startswith("/opt/cuda-x") for d in run(PROTON_CUPTI_HEADERS="wheels"))
