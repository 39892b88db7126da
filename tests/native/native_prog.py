"""The native test program (prog.cu) and the tools around it, for the GPU tests of issue 43.

``prog.cu`` is a CUDA C++ program with no Python in it: several kernels, a non-default stream, a CUDA
graph captured from that stream and replayed, NVTX ranges, and the exit it is told (return, exit(N),
SIGTERM or SIGINT to itself, or waiting to be killed).  It prints its own launch counts as JSON, so a
profile can be checked against what the program knows it did.  :func:`build` compiles it with nvcc;
:func:`missing_reason` says why that cannot happen here (the tests skip with it).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join(HERE, "prog.cu")
SIM_DIR = os.path.join(REPO, "plugins", "cupti", "tests", "sim")
#: The kernels prog.cu launches (extern "C": CUPTI reports them by these names).
KERNELS = ("np_fill", "np_scale", "np_add", "np_top", "np_graph_a", "np_graph_b", "np_noop")

if REPO not in sys.path:  # the benchmarks package (benchmarks/floor) is imported from the repository root
    sys.path.append(REPO)


class BuildError(RuntimeError):
    pass


def nvcc() -> str | None:
    """nvcc from $NVCC, PATH, $CUDA_HOME, /usr/local/cuda or the nvidia-cuda-nvcc wheels."""
    found = os.environ.get("NVCC") or shutil.which("nvcc")
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    homes += sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(os.__file__)), "*-packages", "nvidia",
                                           "cu*")))
    for home in homes:
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return None


def nvtx_include() -> str | None:
    """The directory holding nvtx3/nvToolsExt.h (header-only NVTX v3: nothing to link)."""
    compiler = nvcc()
    places = [os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(compiler))), "include")] if compiler else []
    places += ["/usr/local/cuda/include"]
    try:
        from proton_cupti import cuda_paths

        places += cuda_paths.header_dirs()
    except ImportError:
        pass
    return next((p for p in places if os.path.isfile(os.path.join(p, "nvtx3", "nvToolsExt.h"))), None)


def missing_reason() -> str | None:
    """None where prog.cu can be built here, else why not."""
    if nvcc() is None:
        return "no nvcc (CUDA toolkit) to build tests/native/prog.cu"
    if nvtx_include() is None:
        return "no nvtx3/nvToolsExt.h (CUDA toolkit headers) for tests/native/prog.cu"
    return None


def _nvcc(args: list[str], target: str) -> str:
    cmd = [nvcc(), "-O2", "-std=c++17", f"-I{nvtx_include()}", *args, SOURCE, "-o", target, "-ldl", "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"nvcc did not run: {exc}") from exc
    if proc.returncode != 0 or not os.path.isfile(target):
        raise BuildError(f"nvcc failed (rc={proc.returncode}): {' '.join(cmd)}\n{(proc.stderr or proc.stdout)[-4000:]}")
    return target


def arch_flags() -> list[str]:
    """-arch for this machine's GPU (sm_XY from nvidia-smi), else nvcc's default; $PROTON_NVCC_ARCH wins."""
    chosen = os.environ.get("PROTON_NVCC_ARCH")
    if chosen:
        return [f"-arch={chosen}"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    if out and out[0].replace(".", "").isdigit():
        return [f"-arch=sm_{out[0].replace('.', '')}"]
    return []


def build(directory: str) -> str:
    """Compile prog.cu into ``directory``/prog; returns its path."""
    os.makedirs(directory, exist_ok=True)
    return _nvcc(arch_flags(), os.path.join(directory, "prog"))


def build_library(directory: str) -> str:
    """prog.cu as a shared library (``-DNATIVE_PROG_LIBRARY``: no main) exporting ``np_bench``, the same
    timed launch loop ``prog --bench`` runs, for a Python process to call through ctypes."""
    os.makedirs(directory, exist_ok=True)
    return _nvcc([*arch_flags(), "-shared", "-Xcompiler", "-fPIC", "-DNATIVE_PROG_LIBRARY"],
                 os.path.join(directory, "libnative_prog.so"))


def report(stdout: str) -> dict:
    """The JSON line the program printed (its pid, per-kernel counts, timed loop)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"the program printed no JSON report:\n{stdout[-2000:]}")


def simcuda():
    """The simulated CUDA driver and CUPTI of the cupti plugin's tests (plugins/cupti/tests/sim/simcuda.py)."""
    if SIM_DIR not in sys.path:
        sys.path.insert(0, SIM_DIR)
    import simcuda as module

    return module


def kernel_counts(literal: dict) -> dict[str, int]:
    """{kernel name: launches} summed over a hatchet tree (kernel nodes carry ``device_id``)."""
    counts: dict[str, int] = {}
    stack = [literal]
    while stack:
        node = stack.pop()
        stack.extend(node.get("children", []))
        metrics = node.get("metrics", {})
        if "device_id" in metrics:
            name = node["frame"]["name"]
            counts[name] = counts.get(name, 0) + int(metrics.get("count", 0))
    return counts


def launched(report_: dict) -> dict[str, int]:
    """The kernels a program's report says ran at least once, with their counts."""
    return {k: v for k, v in report_["kernels"].items() if v}


def process_files(name: str, pid: int, extension: str = "hatchet") -> list[str]:
    """The files a followed process ``pid`` wrote for the run ``name``: ``name.pid<P>.<ext>`` and its parts."""
    return sorted(glob.glob(glob.escape(f"{name}.pid{pid}") + f"*.{extension}"))
