"""The ``rocprofiler`` backend (alias ``roctracer``): a thin Python shell over the native recorder.

Nothing here runs per kernel launch; the core calls these methods only when sessions start/stop,
activation changes, a thread's scope changes (``set_context``, native) and at flush, where physical
GPU indices become HIP ordinals and device info is attached.
"""

from __future__ import annotations

import os
import threading

from proton_core.plugin_api import Backend, BackendUnavailable, Batch, ProtonError, internal_paths, register_internal_path
from proton_core.plugin_api import warn

from . import libsearch
from .visible_devices import hip_ordinals

register_internal_path(os.path.dirname(os.path.abspath(__file__)))

CONFIGURATION_LOCKED = 15  # ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED
TOO_LATE = ("rocprofiler-sdk no longer accepts a tool: the ROCm runtime started (its first HSA queue exists) "
            "before Proton configured it ({detail}); start the session, or call proton_roctracer.attach(), before "
            "the program's first GPU call (right after `import proton_core`)")

_lock = threading.Lock()
_running: dict[str, object] = {}  # backend name -> the instance started under it (one recorder per process)


def native():
    """The extension module, or BackendUnavailable saying why it is missing."""
    try:
        from . import _rocprofiler
    except ImportError as exc:
        raise BackendUnavailable(f"the proton-profiler-roctracer extension is not built ({exc}); "
                                 "reinstall proton-profiler-roctracer") from None
    return _rocprofiler


def load_sdk() -> str:
    """dlopen librocprofiler-sdk from the first place that works; returns the file loaded."""
    mod = native()
    if mod.sdk_path():
        return mod.sdk_path()
    errors = []
    for candidate in libsearch.candidates():
        error = mod.load_sdk(candidate)
        if not error:
            return mod.sdk_path() or candidate
        if os.sep in candidate:
            errors.append((candidate, error))
    raise BackendUnavailable(libsearch.not_found_message(errors))


def attach_sdk() -> None:
    """Load the SDK and configure Proton as its tool (once per process); one ProtonError line if too late."""
    try:
        mod = native()
        load_sdk()
    except BackendUnavailable as exc:
        raise ProtonError(f"rocprofiler backend cannot run here: {exc}") from None
    status, detail = mod.attach()
    if status == CONFIGURATION_LOCKED:
        raise ProtonError(TOO_LATE.format(detail=detail))
    if status != 0:
        raise ProtonError(f"rocprofiler backend cannot start: {detail} (librocprofiler-sdk {mod.sdk_path()})")


class RocprofilerBackend(Backend):
    device_type = "HIP"

    def __init__(self, name: str = "rocprofiler") -> None:
        self.name = name
        self.native = native()
        self.library = load_sdk()
        attach_sdk()
        self.agents = {int(a["physical"]): dict(a) for a in self.native.gpu_agents()}
        self.ordinals = hip_ordinals(max(self.agents, default=-1) + 1)
        self.context_setter = self.native.set_context
        self.native_context = self.native.native_context
        self._devices: dict[str, dict] = {}
        self._queues: dict[int, int] = {}
        self._seen: set[int] = set()
        self._untimed_seen = 0
        self._markers = False

    def start(self, mode):
        with _lock:
            other = next((n for n, b in _running.items() if n != self.name), None)
            if other is not None:
                raise ProtonError(f"backend {self.name!r} is the running backend {other!r} under another name; "
                                  f"start this session with backend={other!r}")
            _running[self.name] = self
        self.native.reset()
        self._untimed_seen = 0
        try:
            self.native.enable_markers(True)
            self._markers = True
        except ImportError as exc:
            warn(f"roctx ranges are not scopes in this run: {exc}")

    def stop(self):
        # The SDK's context keeps running (a stopped context does not reliably resume): the core set
        # the epoch to 0, so launches from now on are not recorded.
        self.native.set_epoch(0)
        if self._markers:
            self.native.enable_markers(False)
            self._markers = False
        with _lock:
            if _running.get(self.name) is self:
                del _running[self.name]

    def configure(self, *, python_frames, trace):
        dirs, files = internal_paths()
        self.native.configure(bool(python_frames), bool(trace), dirs, files)

    def set_epoch(self, epoch):
        self.native.set_epoch(int(epoch))

    def switch_epochs(self, every, last):
        self.native.switch_epochs(int(every), int(last))
        return True

    def current_epoch(self):
        return int(self.native.current_epoch())

    def set_context(self, context_id):
        self.native.set_context(int(context_id))

    def flush(self):
        return self._batch(*self.native.flush(sorted(self._seen)))

    def drain(self):
        return self._batch(*self.native.drain())

    # ------------------------------------------------------------- batches ----
    def _ordinal(self, physical: int) -> int:
        """The HIP ordinal of a physical GPU; a GPU hidden from the program keeps 1000 + its index."""
        ordinal = self.ordinals.get(int(physical))
        return 1000 + int(physical) if ordinal is None else ordinal

    def _queue(self, handle: int) -> int:
        return self._queues.setdefault(int(handle), len(self._queues))

    def _batch(self, nodes, records, events, dropped, physical_ids) -> Batch:
        for physical in physical_ids:
            ordinal = self._ordinal(physical)
            if ordinal < 1000:
                self._seen.add(ordinal)
            key = str(ordinal)
            if key not in self._devices:
                self._devices[key] = device_info(self.agents.get(int(physical)))
        records = [(e, n, k, self._ordinal(d), t, c) for e, n, k, d, t, c in records]
        events = [(e, n, k, self._ordinal(d), self._queue(q), s, t, la, tid) for e, n, k, d, q, s, t, la, tid in events]
        devices = {"HIP": {k: v for k, v in self._devices.items() if v}} if self._devices else {}
        batch = Batch(nodes=list(nodes), records=records, events=events, dropped=int(dropped), devices=devices,
                      device_type="HIP")
        untimed = int(self.native.stats()["zero_time"])
        batch.untimed, self._untimed_seen = untimed - self._untimed_seen, untimed
        return batch


def device_info(agent: dict | None) -> dict:
    """Device info as upstream writes it for HIP: arch (gfx name), num_sms (CUs), clock_rate and
    memory_clock_rate in kHz, bus_width in bits."""
    if not agent:
        return {}
    return {"arch": agent["name"], "num_sms": int(agent["cu_count"]), "clock_rate": int(agent["clock_mhz"]) * 1000,
            "memory_clock_rate": int(agent["memory_clock_mhz"]) * 1000, "bus_width": int(agent["bus_width"])}
