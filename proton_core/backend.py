"""The contract between the core and a device-activity backend.

A backend owns the per-launch hot path (usually native code).  The core talks
to it only at rare moments: when sessions start, stop or change activation,
when a thread's scope stack changes, and at flush.  Everything a backend
delivers comes back as one :class:`Batch` of *aggregated* records.

Call paths reach the core as nodes of a trie that the backend owns.  A
node is ``(node_id, parent_id, kind, value)`` (``parent_id`` 0 is the root):

* ``NODE_CONTEXT`` -- ``value`` is the core context id that was current on
  the launching thread (scopes, state, Triton op), see ``set_context``;
* ``NODE_FRAME`` -- ``value`` is a Python frame ``"file:function@line"``,
  captured at the launch when python frames are on;
* ``NODE_CAPTURED_AT`` -- the boundary between a CUDA graph's launch path
  (above) and the path at which the graph was captured (below).

Records are keyed by an *epoch*: the core bumps it whenever the set of
active sessions changes (``set_epoch``), so deactivation needs no device
synchronisation and a kernel in flight is still attributed to the sessions
that were active when it was launched.  Epoch 0 means "nobody listens".
"""

from __future__ import annotations

from dataclasses import dataclass, field

NODE_CONTEXT = 0
NODE_FRAME = 1
NODE_CAPTURED_AT = 2

CAPTURED_AT = "<captured_at>"


@dataclass
class Batch:
    """What one ``flush`` delivers; every list may be empty."""

    #: (node_id, parent_id, kind, value) for nodes not delivered before.
    nodes: list = field(default_factory=list)
    #: (epoch, node_id, kernel_name, device_id, time_ns, count), aggregated.
    records: list = field(default_factory=list)
    #: (epoch, node_id, kernel_name, device_id, stream_id, start_ns, end_ns,
    #: launch_ns, thread_id) per kernel, only while tracing is configured.
    #: Times are in the ``time.monotonic_ns()`` clock.
    events: list = field(default_factory=list)
    #: Activity records the backend or the vendor library had to drop.
    dropped: int = 0
    #: {device_type: {"<id>": {arch, num_sms, clock_rate, memory_clock_rate, bus_width}}}
    devices: dict = field(default_factory=dict)
    #: The device type the records' device ids refer to ("CUDA", "HIP", ...).
    device_type: str = "CUDA"
    #: Nanoseconds since the last flush during which launches were not observed
    #: (a backend re-attaching to its vendor library); written into the profile.
    unobserved_ns: int = 0
    #: Kernels in ``records`` whose duration the vendor library did not give (counted, time 0).
    untimed: int = 0
    #: Metrics measured inside kernels, filed below the kernel's node:
    #: (epoch, node_id, kernel_name, device_id, sub_path, metrics) where sub_path is a tuple of
    #: names below the kernel node (may be empty: the kernel node itself) and metrics a tuple of
    #: (metric name str, int|float) summed into that node like add_metrics (properties replaced).
    #: Routed by epoch as ``records`` are, to ``path(node_id) / kernel_name / *sub_path`` (a Triton
    #: op renames the kernel node here too); a kernel needs no record of its own.  Aggregate as you
    #: drain (one entry per distinct key and flush), never one entry per raw sample.  Nodes of a
    #: non-empty sub_path are marked as inside the kernel (hatchet frame type ``in_kernel``).
    #: ``data="trace"`` sessions file them in their tree as well; the Chrome trace has no place
    #: for them and leaves them out (per-unit timelines go in ``kernel_slices``).  A bad metric
    #: name fails the flush with one ProtonError line.
    kernel_metrics: list = field(default_factory=list)
    #: Time slices measured inside one kernel launch, for ``data="trace"`` sessions only:
    #: (epoch, node_id, kernel_name, device_id, launch_id, track, name, start_ns, end_ns), where
    #: ``launch_id`` is an int the backend gives each launch (unique per backend), ``track`` a string
    #: naming the unit that ran the slice inside the launch (e.g. ``"CTA 3 (SM 17) warp 2"``) and
    #: ``name`` the slice's (scope) name; times in the ``time.monotonic_ns()`` clock.  Routed by epoch
    #: as ``events``; the Chrome trace draws one process per launch with one thread per track.
    #: A slice of a retired epoch is counted in ``dropped`` with a warning.
    kernel_slices: list = field(default_factory=list)


class Backend:
    """Base class for backends; override what your backend supports.

    Methods are called with the core's session lock held, except
    ``set_context``, which runs on the thread whose context changed.
    """

    #: Device type of the records ("CUDA", "HIP", or "" for host-only).
    device_type = ""
    #: Optional: a callable doing what ``set_context`` does, called instead of it
    #: on every scope enter/exit (e.g. the native function itself, to skip a
    #: Python frame).  It gets a plain ``int`` and runs on the thread whose
    #: context changed.  None: the core calls ``set_context``.
    context_setter = None

    def start(self, mode: str | None) -> None:
        """Begin collecting; ``mode`` is the session's ``mode=`` string."""

    def stop(self) -> None:
        """Stop collecting; a later ``start`` must work again."""

    def configure(self, *, python_frames: bool, trace: bool) -> None:
        """Capture Python frames at each launch / keep per-kernel events."""

    def set_epoch(self, epoch: int) -> None:
        """Tag launches from now on with ``epoch`` (0: record nothing)."""

    def switch_epochs(self, every: int, last: int) -> bool:
        """Move on to the next epoch by itself after every ``every`` launches recorded from now on, up to
        ``last`` (``mode="periodic_flushing:launches=N"``: phases end at N launches however fast they come).
        ``set_epoch`` cancels it.  False: not supported; the core then ends phases at its poll."""
        return False

    def current_epoch(self) -> int:
        """The epoch launches are tagged with now (asked only after ``switch_epochs`` returned True)."""
        raise NotImplementedError

    def set_context(self, context_id: int) -> None:
        """The calling thread's current core context id is now ``context_id``.

        A thread whose context was never set (a native thread the framework runs work on: autograd's
        backward threads) launches under the main thread's context of the moment (decision 0245).
        Leaving it (and ``context_setter``) alone tells the core the backend
        ignores contexts: scopes then call nothing on it.
        """

    def flush(self) -> Batch:
        """Deliver everything recorded since the last flush."""
        return Batch(device_type=self.device_type)

    def drain(self) -> Batch | None:
        """Deliver what is ready without waiting for the device (the periodic writer's poll between
        phase ends); unlike :meth:`flush`, earlier launches may still be owed.  None: the backend has
        nothing cheaper than ``flush``, which the poll then calls."""
        return None

    def phase_ended(self) -> None:
        """A phase just ended, on the thread that ended it: the moment for upkeep that must fall
        between phases (the cupti backend re-attaches CUPTI here to free what it keeps per launch)."""


def context_setter(backend):
    """What the core calls with each new context id on this backend; None: nothing to call."""
    fast = getattr(backend, "context_setter", None)
    if fast is not None:
        return fast
    method = backend.set_context
    if getattr(method, "__func__", None) is Backend.set_context:  # the no-op default
        return None
    return method


def register_unavailable(register, name: str, reason: str, **options) -> None:
    """Register a backend that always explains why it cannot run (placeholders)."""
    from .errors import BackendUnavailable

    def factory():
        raise BackendUnavailable(reason)

    register(name, factory, available=lambda: reason, **options)
