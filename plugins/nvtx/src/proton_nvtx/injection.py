"""Where NVTX finds Proton: ``NVTX_INJECTION64_PATH``, set before any library's first NVTX call.

NVTX reads the variable once per library (libtorch, the ``nvtx`` package, NCCL...), at
that library's first NVTX call, and loads the file it names.  The file is this plugin's
``_inject`` module, so the library NVTX loads and the module Python imports are one.
``import proton_core`` calls :func:`prepare_environment`, which this distribution registers in
the entry-point group ``proton.on_import``; the ``proton-profile`` command runs programs in its
own process, after that import.
"""

from __future__ import annotations

import importlib.util
import os

VAR = "NVTX_INJECTION64_PATH"

#: What prepare_environment found: "set", "ours" (already ours), "other" (another tool's), "off".
STATUS = {"state": None, "other": None}


def library_path() -> str | None:
    """The absolute path of the injection library (the ``_inject`` extension module)."""
    spec = importlib.util.find_spec("proton_nvtx._inject")
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def enabled_by_env() -> bool:
    """``PROTON_ENABLE_NVTX=0`` (or false/no/off) turns the bridge off for every session."""
    return os.environ.get("PROTON_ENABLE_NVTX", "1").strip().lower() not in ("0", "false", "no", "off")


def forwarded_to(ours: str) -> bool:
    """Whether NVTX loads a library that hands the ranges to ours: ``proton-profile`` points a command's
    processes at the cupti plugin's injection library, which forwards NVTX to the file in ``PROTON_NVTX_LIB``."""
    forwarded = os.environ.get("PROTON_NVTX_LIB")
    return bool(forwarded) and os.path.realpath(forwarded) == ours


def prepare_environment() -> str:
    """Point NVTX at Proton unless the user chose another tool or turned NVTX off; return the state."""
    if not enabled_by_env():
        STATUS["state"] = "off"
        return "off"
    ours = library_path()
    current = os.environ.get(VAR)
    if ours is None:
        STATUS["state"] = "missing"
    elif not current:
        os.environ[VAR] = ours
        STATUS["state"] = "set"
    elif os.path.realpath(current) == ours or forwarded_to(ours):
        STATUS["state"] = "ours"
    else:
        STATUS["state"] = "other"
        STATUS["other"] = current
    return STATUS["state"]
