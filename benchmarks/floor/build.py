"""Build and locate the bare-CUPTI floor at run time, on the machine that measures.

Two builds of floor.cpp: the Python module ``_proton_floor`` (:func:`build`, :func:`load`), started and
stopped from inside a Python process, and the injection library (:func:`build_injection`), which any CUDA
program loads through ``CUDA_INJECTION64_PATH`` (:func:`injection_environment`): the floor of a program
without Python, written at its exit to the file ``PROTON_FLOOR_OUT`` names.

Built with the plain compiler (no build system) so a broken toolchain shows one
clear error and the harness carries on without the floor.  Headers and libcupti
are found where Proton finds them (proton_cupti.cuda_paths), preferring a copy
the process has already loaded so the floor never brings a second CUPTI into a
process.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

from proton_cupti import cuda_paths

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "floor.cpp")
MODULE = "_proton_floor"
INJECTION_LIBRARY = "libproton_floor_inject.so"
HEADERS = ("cupti.h", "cuda.h")


class BuildError(RuntimeError):
    pass


def include_dirs() -> list[str]:
    """Directories holding cupti.h and cuda.h (toolkit first, then nvidia wheels)."""
    found = cuda_paths.find_headers(HEADERS)
    missing = [h for h in HEADERS if h not in found]
    if missing:
        looked = ", ".join(cuda_paths.header_dirs()) or "nothing"
        raise BuildError(f"no {' or '.join(missing)} found (looked in {looked})")
    return list(dict.fromkeys(found[h] for h in HEADERS))


def python_include() -> str:
    for key in ("include", "platinclude"):
        d = sysconfig.get_paths().get(key)
        if d and os.path.isfile(os.path.join(d, "Python.h")):
            return d
    try:  # a distro Python whose sysconfig points elsewhere
        out = subprocess.run(["python3-config", "--includes"], capture_output=True, text=True, timeout=20).stdout
        for flag in out.split():
            if flag.startswith("-I") and os.path.isfile(os.path.join(flag[2:], "Python.h")):
                return flag[2:]
    except (OSError, subprocess.SubprocessError):
        pass
    raise BuildError("Python.h not found (install the python3-dev headers)")


def _compile(target: str, flags: list[str], libs: list[str]) -> None:
    """Compile floor.cpp into the shared object ``target`` with ``flags``; a BuildError in one line + log."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise BuildError("no C++ compiler (c++/g++) on PATH")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-std=c++17", *flags]
    cmd += [f"-I{d}" for d in include_dirs()]
    cmd += [SOURCE, "-o", target, *libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"compiler did not run: {exc}") from exc
    if proc.returncode != 0 or not os.path.isfile(target):
        log = (proc.stderr or proc.stdout or "").strip()
        raise BuildError(f"compile failed (rc={proc.returncode}): {' '.join(cmd)}\n{log[-4000:]}")


def build(build_dir: str) -> str:
    """Compile the floor into ``build_dir``; return that directory (for ``load``)."""
    _compile(module_path(build_dir), [f"-I{python_include()}"], ["-ldl"])
    return build_dir


def build_injection(build_dir: str) -> str:
    """Compile the floor as an injection library (``-DFLOOR_INJECTION``, no Python) into ``build_dir``;
    return the library's path (for ``CUDA_INJECTION64_PATH``)."""
    target = os.path.join(build_dir, INJECTION_LIBRARY)
    _compile(target, ["-fvisibility=hidden", "-DFLOOR_INJECTION"], ["-ldl", "-lpthread"])
    return target


def injection_environment(library: str, out: str, env: dict | None = None, cupti: str | None = None) -> dict:
    """``env`` (default: this process's) for a program run under the floor injection ``library``: the floor
    writes its JSON to ``out`` at exit; libcupti is ``cupti`` (default :func:`find_cupti`).  Proton's own
    injection variables are removed, so the program loads the floor alone."""
    env = dict(os.environ if env is None else env)
    for var in ("NVTX_INJECTION64_PATH", "PROTON_FOLLOW"):
        env.pop(var, None)
    env["CUDA_INJECTION64_PATH"] = library
    env["PROTON_FLOOR_OUT"] = out
    env["PROTON_FLOOR_CUPTI"] = cupti or find_cupti()
    return env


def module_path(build_dir: str) -> str:
    """Where ``build`` puts the compiled module in ``build_dir``."""
    return os.path.join(build_dir, MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def load(build_dir: str):
    """The floor module ``build`` compiled into ``build_dir``, imported from its file: no search path
    changes. Loaded once per process (CPython cannot load one extension twice); later calls return it."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    path = module_path(build_dir)
    if not os.path.isfile(path):
        raise ImportError(f"no floor module at {path} (build it first)")
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module


def loaded_cupti() -> str | None:
    """A libcupti already mapped into this process (torch or JAX may bring one)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if "libcupti.so" in os.path.basename(path) and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


def find_cupti() -> str:
    """The libcupti the floor should dlopen; 'libcupti.so' leaves it to the loader."""
    return loaded_cupti() or next(iter(cuda_paths.libcupti_files()), "libcupti.so")


if __name__ == "__main__":  # python3 -m benchmarks.floor.build [DIR] [--injection]
    args = [a for a in sys.argv[1:] if a != "--injection"]
    d = args[0] if args else os.path.join(HERE, "_build")
    if "--injection" in sys.argv[1:]:
        print("built", build_injection(d), "| libcupti:", find_cupti())
    else:
        print("built into", build(d), "| libcupti:", find_cupti())
