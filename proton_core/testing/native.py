"""Native test helpers: build a small C library for a test, and hand its context struct to Proton.

Plugins' tests drive native paths (an NVTX client, a native context setter)
through C files of their own; this builds them once per test session and wraps a
``proton.native_context.v1`` struct in the capsule backends offer.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

from ..plugin_api import NATIVE_CONTEXT_CAPSULE

# PyCapsule_New keeps the name's address, not a copy: the name lives as long as the module.
_CAPSULE_NAME = ctypes.create_string_buffer(NATIVE_CONTEXT_CAPSULE.encode())


class NoCompiler(RuntimeError):
    """There is no C compiler here to build the test library."""


def build_library(source: str, out: str, *flags: str, load: bool = True) -> ctypes.CDLL | None:
    """``cc -shared -fPIC -O2 -o out source flags...``, loaded (``load=False``: only built, for another process:
    what it links, a simulated driver, must not enter this one); NoCompiler where there is no cc."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise NoCompiler(f"no C compiler (cc) to build {source}")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", out, source, *flags], check=True)
    return ctypes.CDLL(out) if load else None


def native_context_capsule(lib: ctypes.CDLL, symbol: str):
    """A capsule over the ``{version, set, get[, set_provider]}`` struct ``symbol`` of ``lib``, as backends offer."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return new(ctypes.addressof(ctypes.c_char.in_dll(lib, symbol)), ctypes.addressof(_CAPSULE_NAME), None)
