"""``mode="pcsampling"``: its options, its start errors, and the Triton kernels compiled before start.

Pure Python, run only when a session starts (never per launch); the sampling itself is native
(``csrc/pcsampling.cc``).
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, replace

from proton_core.plugin_api import ProtonError

MODE = "pcsampling"
INTERVAL_MIN, INTERVAL_MAX, INTERVAL_DEFAULT = 5, 31, 10
DRAIN_MS_MAX = 60_000
BUFFER_MB_MIN, BUFFER_MB_MAX = 16, 4096
COLLECTIONS = ("continuous", "serialized")
KERNELS = ("auto", "concurrent", "serial")
USAGE = (f"interval=<{INTERVAL_MIN}..{INTERVAL_MAX}>, collection={'|'.join(COLLECTIONS)}, drain=<ms>, "
         f"buffer=<MB> or kernels={'|'.join(KERNELS)}")

#: CUPTI result codes start() names (cupti_result.h).
INSUFFICIENT_PRIVILEGES = (35, 40)  # ..._INSUFFICIENT_PRIVILEGES, VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES
ANOTHER_CLIENT = (26, 36, 39)  # HARDWARE_BUSY, OLD_PROFILER_API_INITIALIZED, MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
UNSUPPORTED = {
    27: "",  # CUPTI_ERROR_NOT_SUPPORTED
    33: "a virtualized GPU (vGPU) without profiling enabled",
    41: "confidential computing mode",
    42: "a CMP (crypto mining) GPU",
    43: "a MIG instance",
    44: "an SLI group",
    45: "WSL",
}
LIBCUPTI_TOO_OLD, SYMBOL_MISSING = -1, -2

PERMISSION_URL = "https://developer.nvidia.com/ERR_NVGPUCTRPERM"


@dataclass(frozen=True)
class Options:
    """What ``pcsampling[:key=value...]`` asks for (see plugins/cupti/README.md)."""

    interval: int = INTERVAL_DEFAULT  # CUPTI's sampling period: one sample every 2**interval SM cycles
    collection: str = "continuous"
    drain_ms: int = 100
    kernels: str = "auto"
    buffer_mb: int = 0  # the GPU's sample buffer; 0: the native default (512 MB, CUPTI's own)


def parse_mode(mode) -> Options | None:
    """Options for a ``start(mode=...)`` string of this backend; None for the normal mode."""
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        return None
    if not isinstance(mode, str):
        raise ProtonError(f"mode must be a string such as '{MODE}:interval=10', not {type(mode).__name__}")
    head, *items = mode.split(":")
    if head.strip() != MODE:
        raise ProtonError(f"backend 'cupti' has no mode {mode!r}; its modes are: {MODE} (options {USAGE})")
    values: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value or key not in _OPTIONS:
            raise ProtonError(f"mode {mode!r}: {item!r} is not an option of {MODE}; use {USAGE}")
        if key in values:
            raise ProtonError(f"mode {mode!r}: {key} is given twice")
        values[key] = value
    chosen = {}
    for key, value in values.items():
        field, parse, good = _OPTIONS[key]
        parsed = parse(value)
        if parsed is None:
            raise ProtonError(f"mode {mode!r}: {key} must be {good}, not {value!r}")
        chosen[field] = parsed
    return replace(Options(), **chosen)


def _whole(text: str) -> int | None:
    try:
        return int(text, 10)
    except ValueError:
        return None


def _within(low: int, high: int):
    return lambda text: n if (n := _whole(text)) is not None and low <= n <= high else None


def _one_of(choices: tuple):
    return lambda text: text if text in choices else None


#: option -> (Options field, its parser (None: a bad value), what a good value is)
_OPTIONS = {
    "interval": ("interval", _within(INTERVAL_MIN, INTERVAL_MAX),
                 f"a whole number from {INTERVAL_MIN} to {INTERVAL_MAX} (CUPTI's sampling period: one sample "
                 "every 2**interval SM cycles)"),
    "collection": ("collection", _one_of(COLLECTIONS), " or ".join(COLLECTIONS)),
    "drain": ("drain_ms", _within(1, DRAIN_MS_MAX), f"milliseconds from 1 to {DRAIN_MS_MAX}"),
    "kernels": ("kernels", _one_of(KERNELS), f"{', '.join(KERNELS[:-1])} or {KERNELS[-1]}"),
    "buffer": ("buffer_mb", _within(BUFFER_MB_MIN, BUFFER_MB_MAX),
               f"megabytes from {BUFFER_MB_MIN} to {BUFFER_MB_MAX} (the GPU's buffer of samples not yet collected)"),
}


def describe_device(device: int, name: str = "", arch: str = "") -> str:
    """'GPU 0 (NVIDIA H200, compute capability 9.0)' from what the driver said (parts it did not say left out)."""
    if device < 0:
        return "the GPU"
    parts = [p for p in (name, _capability(arch)) if p]
    return f"GPU {device}" + (f" ({', '.join(parts)})" if parts else "")


def _capability(arch: str) -> str:
    arch = str(arch or "")
    if len(arch) >= 2 and arch.isdigit():
        return f"compute capability {arch[:-1]}.{arch[-1]}"
    return ""


def start_error_message(error, device: str, library: str = "", conflict: str = "") -> str:
    """The one line ``start`` fails with, from the native ``(code, device, what, detail)``.

    ``device`` describes the GPU (``describe_device``); ``conflict`` is the backend's message for another
    CUPTI client, which this mode reuses word for word.
    """
    code, _, what, detail = error
    prefix = f"cupti backend cannot start {MODE}"
    if code in INSUFFICIENT_PRIVILEGES:
        return (f"{prefix}: the driver restricts GPU profiling to admin users (NVreg_RestrictProfilingToAdminUsers=1); "
                "run as root (or with CAP_SYS_ADMIN), or set 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
                f"in a file under /etc/modprobe.d and reload the nvidia module or reboot; see {PERMISSION_URL}")
    if code in UNSUPPORTED:
        why = UNSUPPORTED[code]
        where = (f"{device} is {why}, where CUPTI's PC Sampling API is not available" if why
                 else f"{device} does not support CUPTI's PC Sampling API")
        return (f"{prefix}: {where} ({what}: {detail}); {MODE} needs an NVIDIA GPU of compute capability 7.0 or "
                "newer, not virtualized, not a MIG instance; profile without mode= for kernel times only")
    if code in ANOTHER_CLIENT:
        return conflict or (f"{prefix}: another CUPTI client already holds CUPTI (torch.profiler, Nsight Systems or "
                            "Compute, DCGM, another profiler); stop it first")
    if code == LIBCUPTI_TOO_OLD:
        return (f"{prefix}: libcupti{' at ' + library if library else ''} has CUPTI API version {detail}; {MODE} needs "
                "CUPTI from CUDA 12.4 or newer (its PC records changed there); set PROTON_CUPTI_LIB_PATH to a newer "
                "libcupti (pip install nvidia-cuda-cupti)")
    if code == SYMBOL_MISSING:
        return (f"{prefix}: libcupti{' at ' + library if library else ''} lacks the PC Sampling API ({detail}); set "
                "PROTON_CUPTI_LIB_PATH to a libcupti from CUDA 12.4 or newer")
    return f"{prefix}: {what} failed on {device}: {detail}"


# ------------------------------------------------------------------ triton ----
def triton_cubins() -> tuple[list[bytes], str]:
    """The cubins of every Triton kernel compiled so far in this process, and a note on what was not found.

    Triton keeps a compiled kernel (``CompiledKernel``, with ``asm["cubin"]``) in its JIT functions'
    per-device caches (``JITFunction.device_caches``), in autotuners and wherever the program holds one;
    there is no registry of JIT functions, so this walks the objects the garbage collector tracks, once
    per session start.  Kernels whose module was loaded after start need none of this: CUPTI's
    module-load callback hands their cubin over.
    """
    compiler = sys.modules.get("triton.compiler.compiler")
    if compiler is None:
        return [], "triton is not imported"
    kernel_type = getattr(compiler, "CompiledKernel", None)
    if not isinstance(kernel_type, type):
        return [], "triton.compiler.compiler has no CompiledKernel class"
    kinds = {kernel_type}
    pending = [kernel_type]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in kinds:
                kinds.add(sub)
                pending.append(sub)
    found: dict[bytes, None] = {}
    skipped = 0
    for obj in gc.get_objects():
        if type(obj) not in kinds:
            continue
        asm = getattr(obj, "asm", None)
        cubin = asm.get("cubin") if isinstance(asm, dict) else None
        if isinstance(cubin, (bytes, bytearray)) and cubin:
            found[bytes(cubin)] = None
        else:
            skipped += 1  # not an NVIDIA kernel (hsaco), or compiled without a cubin
    note = f"{len(found)} Triton cubins found"
    if skipped:
        note += f", {skipped} compiled kernels without one"
    return list(found), note


def register_triton_cubins(register) -> str:
    """Hands every pre-start Triton cubin to ``register`` (the native ``register_cubin``); returns a note."""
    try:
        cubins, note = triton_cubins()
    except Exception as exc:  # noqa: BLE001 - lines for pre-start kernels are a nicety, never a failed start
        return f"looking for Triton kernels failed ({type(exc).__name__}: {exc})"
    kept = sum(1 for cubin in cubins if register(cubin))
    if cubins and kept < len(cubins):
        note += f"; {len(cubins) - kept} without line information (TRITON_DISABLE_LINE_INFO?)"
    return note
