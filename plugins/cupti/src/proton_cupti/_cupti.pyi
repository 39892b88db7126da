"""The native CUPTI backend (plugins/cupti/csrc/module.cc, pybind11); libcupti is loaded at run time.

Keep in step with ``PYBIND11_MODULE(_cupti, m)`` (tests/test_contract_stubs.py compares). Builds with
``PROTON_CUPTI_TESTING=ON`` (scripts/install.sh, gpu_check.sh) add ``SLOTS`` and private ``_test_*``
functions (csrc/testing.cc); release wheels have neither.
"""

from typing import Any

#: (node id, parent id, kind: NODE_CONTEXT | NODE_FRAME | NODE_CAPTURED_AT, context id | frame name | None)
_Node = tuple[int, int, int, int | str | None]
#: (epoch, node id, kernel name, device id, time ns, count), aggregated
_Record = tuple[int, int, str, int, int, int]
#: (epoch, node id, kernel name, device id, stream id, start ns, end ns, launch ns, thread id)
_Event = tuple[int, int, str, int, int, int, int, int, int]
#: (epoch, node id, kernel name, device id, (source line,), ((metric name, value), ...)): PC sampling
_Metrics = tuple[int, int, str, int, tuple[str], tuple[tuple[str, int], ...]]
_Flush = (
    tuple[list[_Node], list[_Record], list[_Event], int, list[int]]
    | tuple[list[_Node], list[_Record], list[_Event], int, list[int], list[_Metrics]]
)

#: Per-thread slots of the recorder (PROTON_CUPTI_TESTING builds only).
SLOTS: int  # testing builds only

#: The calling thread's context for native scope sources: a ``proton.native_context.v1`` capsule (version 2).
native_context: object

def load_cupti(path: str) -> str:
    """dlopen libcupti from a path or soname; '' on success, else the loader's error."""

def cupti_path() -> str:
    """The file libcupti was loaded from, '' if none."""

def cupti_version() -> int:
    """cuptiGetVersion of the loaded libcupti (0 when unknown)."""

def start() -> None:
    """Reset the call-path trie and tables, subscribe to CUPTI and enable kernel activity."""

def stop() -> None:
    """Flush, disable activity, unsubscribe and detach CUPTI (cuptiFinalize)."""

def configure(
    python_frames: bool, trace: bool, internal_dirs: list[str] = ..., internal_files: list[str] = ...
) -> None:
    """Capture Python frames at each launch (without internal ones) / keep one event per kernel."""

def native_frames(on: bool) -> None:
    """context='native': capture each launch's native call stack below the thread's context (names at flush)."""

def set_epoch(epoch: int, /) -> None:
    """Tag launches from now on with ``epoch`` (0: record nothing)."""

def switch_epochs(every: int, last: int) -> None:
    """After every ``every`` launches recorded, move on to the next epoch by itself, up to ``last``."""

def current_epoch() -> int:
    """The epoch launches are tagged with now."""

def set_context(ctx: int, /) -> None:
    """The calling thread's core context id is now ``ctx`` (METH_O: the scope hot path calls it)."""

def flush(with_metrics: bool = False) -> _Flush:
    """(nodes, records, events, dropped, device ids) since the last flush; with_metrics adds PC sampling metrics."""

def drain(with_metrics: bool = False) -> _Flush:
    """flush's tuple with what CUPTI has ready (complete buffers only): no device sync."""

def pcsampling_start(
    collection: str,
    interval: int,
    drain_ms: int,
    kernels: str = "auto",
    restart: bool = True,
    restart_each_drain: bool = True,
    buffer_mb: int = 0,
) -> tuple[int, int, str, str] | None:
    """Start PC sampling (after start()); None, or (CUPTI code, device, what, detail) with nothing enabled."""

def pcsampling_stats() -> dict[str, Any]:
    """PC sampling counters and settings, for diagnostics."""

def register_cubin(cubin: bytes) -> bool:
    """Keep a cubin (by CUPTI's CRC) for PC -> source line mapping; False when it has no line table."""

def device_name(ordinal: int) -> str:
    """The device's name through libcuda.so.1 ('' without it)."""

def device_info(ordinal: int) -> dict[str, int | str]:
    """Device properties through libcuda.so.1: arch (str), num_sms, clock_rate, ... (ints); {} without it."""

def reattach_if_due(min_records: int) -> int:
    """Re-attach CUPTI when a graph launch made it keep memory per launch; ns detached, or 0."""

def stats() -> dict[str, int]:
    """Kernel records since start: records, unsessioned, unmatched, zero_time."""
