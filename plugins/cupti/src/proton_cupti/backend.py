"""The ``cupti`` backend: a thin Python shell over the native recorder.

Nothing here runs per kernel launch; the core calls these methods only when
sessions start/stop, activation changes, a thread's scope changes
(``set_context``) and at flush.
"""

from __future__ import annotations

import os

from proton_core.plugin_api import Backend, BackendUnavailable, Batch, ProtonError, internal_paths, register_internal_path
from proton_core.plugin_api import warn

from . import libsearch

register_internal_path(os.path.dirname(os.path.abspath(__file__)))

#: What CUPTI says when another client (torch.profiler, Nsight) holds its one subscription.
CONFLICT = "MULTIPLE_SUBSCRIBERS"
CONFLICT_ENV = "PROTON_CUPTI_ON_CONFLICT"
#: After a CUDA-graph launch CUPTI keeps ~32 B per later launch until it is detached: at a phase's end,
#: once this many kernel records came since CUPTI was last attached, re-attach it (0: never).
REATTACH_ENV = "PROTON_CUPTI_REATTACH_RECORDS"
REATTACH_DEFAULT = 500_000


def reattach_records() -> int:
    value = os.environ.get(REATTACH_ENV, "").strip()
    if not value:
        return REATTACH_DEFAULT
    try:
        number = int(value)
        if number < 0:
            raise ValueError
    except ValueError:
        raise ProtonError(f"{REATTACH_ENV}={value!r} is not a count of kernel records; use a whole number "
                          f"(0: never re-attach; default {REATTACH_DEFAULT})") from None
    return number


def native():
    """The extension module, or BackendUnavailable saying why it is missing."""
    try:
        from . import _cupti
    except ImportError as exc:
        raise BackendUnavailable(f"the proton-profiler-cupti extension is not built ({exc}); reinstall proton-profiler-cupti") from None
    return _cupti


def load_cupti() -> str:
    """dlopen libcupti from the first place that works; returns the file loaded."""
    mod = native()
    if mod.cupti_path():
        return mod.cupti_path()
    errors = []
    for candidate in libsearch.candidates():
        error = mod.load_cupti(candidate)
        if not error:
            return mod.cupti_path() or candidate
        if os.sep in candidate or os.environ.get(libsearch.ENV_VAR):
            errors.append((candidate, error))
    raise BackendUnavailable(libsearch.not_found_message(errors))


class CuptiBackend(Backend):
    device_type = "CUDA"

    def __init__(self) -> None:
        reason = libsearch.driver_reason()
        if reason:
            raise BackendUnavailable(reason)
        self.native = native()
        self.library = load_cupti()
        self._devices: dict[str, dict] = {}
        self._started = False
        self._reattach, self._unobserved, self._untimed_seen = REATTACH_DEFAULT, 0, 0
        self.context_setter = self.native.set_context  # called by the scope hot path directly
        # Native scope sources (NVTX ranges on threads without the GIL) set contexts through this.
        self.native_context = getattr(self.native, "native_context", None)

    def start(self, mode):
        self._reattach = reattach_records()
        self._unobserved = self._untimed_seen = 0
        try:
            self.native.start()
        except RuntimeError as exc:
            if CONFLICT not in str(exc):
                raise ProtonError(f"cupti backend cannot start: {exc}") from None
            if os.environ.get(CONFLICT_ENV, "").strip().lower() != "skip":
                raise ProtonError(
                    "cupti backend cannot start: another CUPTI client already holds CUPTI (torch.profiler, Nsight "
                    "Systems or Compute, DCGM, another profiler); stop it first, or set "
                    f"{CONFLICT_ENV}=skip to run without kernel profiling") from None
            warn(f"another CUPTI client holds CUPTI; {CONFLICT_ENV}=skip: this run records no kernels "
                 "(scopes and metrics only)")
            return  # not started: flush delivers nothing, stop has nothing to undo
        self._started = True

    def stop(self):
        if self._started:
            self.native.stop()
            self._started = False

    def configure(self, *, python_frames, trace):
        dirs, files = internal_paths()
        self.native.configure(bool(python_frames), bool(trace), dirs, files)

    def set_epoch(self, epoch):
        self.native.set_epoch(int(epoch))

    def set_context(self, context_id):
        self.native.set_context(int(context_id))  # same as context_setter, for callers holding the backend

    def flush(self):
        return self._batch(self.native.flush())

    def drain(self):
        drain = getattr(self.native, "drain", None)
        return self._batch(drain()) if drain is not None else None

    def _batch(self, flushed):
        nodes, records, events, dropped, devices = flushed
        batch = batch_from(nodes, records, events, dropped, devices, self._devices, self.native.device_info)
        batch.unobserved_ns, self._unobserved = self._unobserved, 0
        if self._started:
            untimed = int(self.native.stats()["zero_time"])  # since start (the native counters reset there)
            batch.untimed, self._untimed_seen = untimed - self._untimed_seen, untimed
        return batch

    def phase_ended(self):
        if self._started and self._reattach:
            self._unobserved += self.native.reattach_if_due(self._reattach)


def batch_from(nodes, records, events, dropped, device_ids, cache, device_info) -> Batch:
    """A core Batch from the native flush tuple; device info is read once per device."""
    for dev in device_ids:
        key = str(dev)
        if key not in cache:
            cache[key] = dict(device_info(dev))
    devices = {"CUDA": {k: v for k, v in cache.items() if v}} if cache else {}
    return Batch(nodes=list(nodes), records=list(records), events=list(events), dropped=int(dropped),
                 devices=devices, device_type="CUDA")
