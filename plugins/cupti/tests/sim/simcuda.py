"""The simulated CUDA driver and CUPTI (libcuda_sim.c, libcupti_sim.c) built and driven from Python.

The cupti backend dlopens libcupti from ``PROTON_CUPTI_LIB_PATH`` and libcuda.so.1 from the loader's
path, so a process started with :func:`environment` runs the backend's real native code (profiler.cc,
recorder.cc) against the simulation.  The simulated driver exports ``sim_*`` calls that play a
program's GPU work; :class:`Sim` types them for ctypes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

from proton_core.testing import NoCompiler

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = "libcuda.so.1"
CUPTI = "libcupti.so"


class NoHeaders(RuntimeError):
    """The CUDA headers (cupti.h, cuda.h) the simulation is compiled against are not here."""


def include_dirs() -> list[str]:
    """Where cupti.h and cuda.h are, as the backend's own build finds them (toolkit, then nvidia wheels)."""
    from proton_cupti import cuda_paths

    found = cuda_paths.find_headers()
    missing = [h for h in cuda_paths.HEADERS if h not in found]
    if missing:
        raise NoHeaders(f"no CUDA headers ({', '.join(missing)}) to build the simulated CUPTI against; install the "
                        f"CUDA toolkit or pip install {' '.join(cuda_paths.HEADER_WHEELS)}")
    return list(dict.fromkeys(found.values()))


def compiler() -> str:
    """The C compiler.  (proton_core.testing.build_library is not used: it loads what it builds, and a
    libcuda.so.1 loaded into the test process would answer the ``gpu`` marker's driver check.)"""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise NoCompiler("no C compiler (cc) to build the simulated CUPTI")
    return cc


def build(directory: str) -> str:
    """Compile the simulated libcuda.so.1 and libcupti.so (linked to it) into ``directory``; returns it."""
    cc, includes = compiler(), [f"-I{d}" for d in include_dirs()]
    flags = ["-shared", "-fPIC", "-O2", "-Wall", *includes]
    subprocess.run([cc, *flags, "-Wl,-soname," + DRIVER, "-o", os.path.join(directory, DRIVER),
                    os.path.join(HERE, "libcuda_sim.c"), "-ldl", "-lpthread"], check=True)
    subprocess.run([cc, *flags, "-o", os.path.join(directory, CUPTI), os.path.join(HERE, "libcupti_sim.c"),
                    f"-L{directory}", "-l:" + DRIVER, "-Wl,-rpath,$ORIGIN", "-lpthread"], check=True)
    return directory


def build_client(directory: str) -> str:
    """Compile inject_client.c (a CUDA program without Python) against the simulated driver in ``directory``
    (built there first by :func:`build`); returns the program's path."""
    out = os.path.join(directory, "inject_client")
    subprocess.run([compiler(), "-O2", "-Wall", "-o", out, os.path.join(HERE, "inject_client.c"), f"-L{directory}",
                    "-l:" + DRIVER, f"-Wl,-rpath,{directory}", "-ldl", "-lpthread"], check=True)
    return out


def environment(directory: str, env: dict | None = None, devices: int = 2) -> dict:
    """``env`` (default: this process's) for a process that finds the simulation: the backend loads the
    simulated libcupti first, and the loader finds the simulated libcuda.so.1 before any real one."""
    env = dict(os.environ if env is None else env)
    env["PROTON_CUPTI_LIB_PATH"] = directory
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (directory, env.get("LD_LIBRARY_PATH", "")) if p)
    env["SIM_CUDA_DEVICES"] = str(devices)
    return env


class Sim:
    """The simulated driver loaded in this process (``ctypes.CDLL("libcuda.so.1")``), its calls typed."""

    def __init__(self, lib: ctypes.CDLL | None = None) -> None:
        lib = self.lib = lib if lib is not None else ctypes.CDLL(DRIVER)
        u32, u64 = ctypes.c_uint32, ctypes.c_uint64
        lib.sim_launch.restype = u32
        lib.sim_launch.argtypes = [ctypes.c_char_p, u32, u32, u64]
        lib.sim_launch_many.restype = None
        lib.sim_launch_many.argtypes = [ctypes.c_char_p, u32, u32, u64, u64]
        lib.sim_launch_on_thread.restype = ctypes.c_int
        lib.sim_launch_on_thread.argtypes = [ctypes.c_char_p, u32, u32, u64, u64]
        lib.sim_graph_capture.restype = u64
        lib.sim_graph_capture.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, u32, u32]
        lib.sim_graph_instantiate.restype = u64
        lib.sim_graph_instantiate.argtypes = [u64]
        lib.sim_graph_launch.restype = u32
        lib.sim_graph_launch.argtypes = [u64, u32, u64]
        lib.sim_drop.restype = None
        lib.sim_drop.argtypes = [u64]
        lib.sim_set_async.restype = None
        lib.sim_set_async.argtypes = [ctypes.c_int]
        lib.sim_stat.restype = ctypes.c_int64
        lib.sim_stat.argtypes = [ctypes.c_char_p]

    def launch(self, kernel: str, device: int = 0, stream: int = 7, duration_ns: int = 1000, times: int = 1) -> None:
        if times == 1:
            self.lib.sim_launch(kernel.encode(), device, stream, duration_ns)
        else:
            self.lib.sim_launch_many(kernel.encode(), device, stream, duration_ns, times)

    def launch_on_thread(self, kernel: str, device: int = 0, stream: int = 7, duration_ns: int = 1000,
                         times: int = 1) -> None:
        """``times`` launches from a new native thread (never holding the GIL, its context never set)."""
        assert self.lib.sim_launch_on_thread(kernel.encode(), device, stream, duration_ns, times) == 0

    def capture(self, kernels: list[str], device: int = 0, stream: int = 7) -> int:
        """Stream-capture ``kernels`` into a graph and instantiate it; returns the executable graph."""
        names = (ctypes.c_char_p * len(kernels))(*[k.encode() for k in kernels])
        graph = self.lib.sim_graph_capture(names, len(kernels), device, stream)
        assert graph, "sim_graph_capture failed"
        return self.lib.sim_graph_instantiate(graph)

    def replay(self, graph_exec: int, stream: int = 7, duration_ns: int = 1000) -> None:
        assert self.lib.sim_graph_launch(graph_exec, stream, duration_ns), "sim_graph_launch failed"

    def set_async(self, on: bool) -> None:
        """On: kernels keep running until their context is synchronized (a forced flush cuts them short)."""
        self.lib.sim_set_async(int(on))

    def drop(self, n: int) -> None:
        self.lib.sim_drop(n)

    def stat(self, name: str) -> int:
        return self.lib.sim_stat(name.encode())
