"""The ``cupti`` backend: a thin Python shell over the native recorder.

Nothing here runs per kernel launch; the core calls these methods only when
sessions start/stop, activation changes, a thread's scope changes
(``set_context``) and at flush.
"""

from __future__ import annotations

import os
import threading

from proton_core.plugin_api import Backend, BackendUnavailable, Batch, ProtonError, internal_paths, register_internal_path
from proton_core.plugin_api import warn

from . import libsearch
from . import pcsampling

register_internal_path(os.path.dirname(os.path.abspath(__file__)))

#: Guards the sessions that want native call stacks (CuptiBackend.native_frames), of the one recorder.
_NATIVE_LOCK = threading.Lock()

#: What CUPTI says when another client (torch.profiler, Nsight) holds its one subscription.
CONFLICT = "MULTIPLE_SUBSCRIBERS"
CONFLICT_ENV = "PROTON_CUPTI_ON_CONFLICT"
CONFLICT_MESSAGE = ("cupti backend cannot start: another CUPTI client already holds CUPTI (torch.profiler, Nsight "
                    "Systems or Compute, DCGM, another profiler); stop it first, or set "
                    f"{CONFLICT_ENV}=skip to run without kernel profiling")
#: After a CUDA-graph launch CUPTI keeps ~32 B per later launch until it is detached: at a phase's end,
#: once this many kernel records came since CUPTI was last attached, re-attach it (0: never).
REATTACH_ENV = "PROTON_CUPTI_REATTACH_RECORDS"
REATTACH_DEFAULT = 500_000

#: Said once per session when a CUDA graph captured while no session recorded is replayed: its kernels have
#: times, under the scope of each replay, but no ``<captured_at>`` path.  Its first words are upstream's, so
#: scripts that look for them (upstream's test_cudagraph_not_captured_by_profiler) find them.
UNCAPTURED_GRAPH = ("Cannot find graph for graphExecId: a CUDA graph captured while no session recorded (before "
                    "profiling began, or while deactivated) was replayed; its kernels are filed under the scope of "
                    "each replay, without where they were captured; to see that, start profiling before the graph "
                    "is created")


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
    #: mode="pcsampling": its options while sampling runs (class defaults: tests build instances without __init__).
    _pcs = None
    _pcs_reported: dict = {}
    pcsampling_note = ""
    #: context="native": the sessions that want each launch's native call stack.
    _native_sessions: frozenset = frozenset()

    def __init__(self) -> None:
        reason = libsearch.driver_reason()
        if reason:
            raise BackendUnavailable(reason)
        self.native = native()
        self.library = load_cupti()
        self._devices: dict[str, dict] = {}
        self._started = False
        self._reattach, self._unobserved, self._untimed_seen = REATTACH_DEFAULT, 0, 0
        self._uncaptured_said = False
        self.context_setter = self.native.set_context  # called by the scope hot path directly
        # Native scope sources (NVTX ranges on threads without the GIL) set contexts through this.
        self.native_context = getattr(self.native, "native_context", None)

    def start(self, mode):
        options = pcsampling.parse_mode(mode)  # first: a bad option leaves nothing started
        self._reattach = reattach_records()
        self._unobserved = self._untimed_seen = 0
        self._uncaptured_said = False
        try:
            self.native.start()
        except RuntimeError as exc:
            if CONFLICT not in str(exc):
                raise ProtonError(f"cupti backend cannot start: {exc}") from None
            if os.environ.get(CONFLICT_ENV, "").strip().lower() != "skip":
                raise ProtonError(CONFLICT_MESSAGE) from None
            warn(f"another CUPTI client holds CUPTI; {CONFLICT_ENV}=skip: this run records no kernels "
                 "(scopes and metrics only)")
            return  # not started: flush delivers nothing, stop has nothing to undo
        self._started = True
        if options is not None:
            self._start_pcsampling(options)

    def _start_pcsampling(self, options):
        """Instruction sampling on top of the attached backend; on failure nothing is left attached."""
        native_start = getattr(self.native, "pcsampling_start", None)
        if native_start is None:
            self.stop()
            raise ProtonError("cupti backend cannot start pcsampling: this build of proton-profiler-cupti has no PC "
                              "sampling; reinstall proton-profiler-cupti")
        # Triton kernels compiled and loaded before start: CUPTI's module-load callback never sees their
        # cubins, which map their PCs to source lines.
        self.pcsampling_note = pcsampling.register_triton_cubins(self.native.register_cubin)
        # PROTON_PCS_RESTART_EACH_DRAIN=0: ranges end only at complete flushes (a diagnostic, for the probe).
        each_drain = os.environ.get("PROTON_PCS_RESTART_EACH_DRAIN", "1") != "0"
        error = native_start(options.collection, options.interval, options.drain_ms, options.kernels, True, each_drain,
                             options.buffer_mb)
        if error is not None:
            self.stop()  # detaches CUPTI: no partial session stays behind
            raise ProtonError(pcsampling.start_error_message(
                error, self._describe_device(int(error[1])), getattr(self, "library", ""), CONFLICT_MESSAGE))
        self._pcs = options
        self._pcs_reported = {}

    def _describe_device(self, device: int) -> str:
        if device < 0:
            return pcsampling.describe_device(device)
        name = getattr(self.native, "device_name", lambda _: "")(device)
        arch = dict(self.native.device_info(device)).get("arch", "")
        return pcsampling.describe_device(device, name, arch)

    def native_frames(self, session_id, on):
        """context="native" (proton_core.contexts.native): capture each launch's native call stack while at
        least one session wants it; the recorder files it below the thread's context, names at flush.
        Sessions start and finish on any thread (the core calls this outside its lock)."""
        with _NATIVE_LOCK:
            before = bool(self._native_sessions)
            wanted = self._native_sessions
            self._native_sessions = (wanted | {session_id}) if on else (wanted - {session_id})
            if bool(self._native_sessions) != before:
                self.native.native_frames(bool(self._native_sessions))

    def stop(self):
        self._pcs = None
        with _NATIVE_LOCK:
            if self._native_sessions:
                self._native_sessions = frozenset()
                self.native.native_frames(False)  # the recorder outlives this backend: the next start begins without
        if self._started:
            self.native.stop()
            self._started = False

    def configure(self, *, python_frames, trace):
        dirs, files = internal_paths()
        self.native.configure(bool(python_frames), bool(trace), dirs, files)

    def set_epoch(self, epoch):
        self.native.set_epoch(int(epoch))

    def switch_epochs(self, every, last):
        switch = getattr(self.native, "switch_epochs", None)  # an older build lacks it: the core's poll then
        if switch is None:
            return False
        switch(int(every), int(last))
        return True

    def current_epoch(self):
        return int(self.native.current_epoch())

    def set_context(self, context_id):
        self.native.set_context(int(context_id))  # same as context_setter, for callers holding the backend

    def flush(self):
        if self._pcs is not None:
            return self._batch(self.native.flush(True))  # with the sampled metrics
        return self._batch(self.native.flush())

    def drain(self):
        drain = getattr(self.native, "drain", None)
        if drain is None:
            return None
        return self._batch(drain(True) if self._pcs is not None else drain())

    def _batch(self, flushed):
        nodes, records, events, dropped, devices = flushed[:5]
        kernel_metrics = flushed[5] if len(flushed) > 5 else None
        batch = batch_from(nodes, records, events, dropped, devices, self._devices, self.native.device_info,
                           kernel_metrics=kernel_metrics)
        batch.unobserved_ns, self._unobserved = self._unobserved, 0
        if self._started:
            stats = self.native.stats()
            untimed = int(stats["zero_time"])  # since start (the native counters reset there)
            batch.untimed, self._untimed_seen = untimed - self._untimed_seen, untimed
            if int(stats.get("uncaptured_graph", 0)) and not self._uncaptured_said:
                self._uncaptured_said = True
                warn(UNCAPTURED_GRAPH)
        if self._pcs is not None:
            self._report_sampling()
        return batch

    def _report_sampling(self):
        """One warning per kind of sampling trouble and session: lost samples, contexts CUPTI refused."""
        stats = self.native.pcsampling_stats()
        seen = self._pcs_reported
        lost = int(stats["dropped_samples"]) + int(stats["hardware_full"])
        if lost and "lost" not in seen:
            seen["lost"] = True
            warn(f"pcsampling: the GPU dropped samples ({stats['dropped_samples']} samples, "
                 f"{stats['hardware_full']} full hardware buffers); the profile undercounts them; use a larger "
                 f"interval (mode='pcsampling:interval={min(self._pcs.interval + 2, pcsampling.INTERVAL_MAX)}')")
        if int(stats["enable_failures"]) and "enable" not in seen:
            seen["enable"] = True
            warn(f"pcsampling: a CUDA context could not be sampled ({stats['last_error']}); its kernels have times "
                 "but no samples")
        if int(stats["get_errors"]) and "get" not in seen:
            seen["get"] = True
            warn(f"pcsampling: collecting samples failed ({stats['last_error']})")

    def phase_ended(self):
        if self._started and self._reattach:
            self._unobserved += self.native.reattach_if_due(self._reattach)


def batch_from(nodes, records, events, dropped, device_ids, cache, device_info, kernel_metrics=None) -> Batch:
    """A core Batch from the native flush tuple; device info is read once per device.

    ``kernel_metrics`` (mode="pcsampling"): ``(epoch, node_id, kernel, device_id, sub_path, metrics)`` per
    kernel and source line, set as an attribute so that it works whether or not this core's Batch has
    the field yet.
    """
    for dev in device_ids:
        key = str(dev)
        if key not in cache:
            cache[key] = dict(device_info(dev))
    devices = {"CUDA": {k: v for k, v in cache.items() if v}} if cache else {}
    batch = Batch(nodes=list(nodes), records=list(records), events=list(events), dropped=int(dropped),
                  devices=devices, device_type="CUDA")
    if kernel_metrics is not None:
        batch.kernel_metrics = list(kernel_metrics)
    return batch
