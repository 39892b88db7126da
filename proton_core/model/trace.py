"""Per-event data for ``data="trace"``: kernels, host scopes and slices inside kernels, with times.

All times are ``time.monotonic_ns()`` nanoseconds, the clock backends are
asked to deliver in, so host and device events line up.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelEvent:
    path: tuple
    name: str
    device_type: str
    device_id: int
    stream_id: int
    start_ns: int
    end_ns: int
    launch_ns: int = 0  # 0: unknown
    thread_id: int = 0


@dataclass
class ScopeEvent:
    path: tuple
    name: str
    thread_id: int
    start_ns: int
    end_ns: int


@dataclass
class KernelSlice:
    """A time slice inside one kernel launch (an intra-kernel scope of one warp, warp group or CTA)."""

    path: tuple  # the launch's call path (as a KernelEvent's)
    kernel: str
    device_type: str
    device_id: int
    launch_id: int  # which launch of the backend; all slices of a launch share it
    track: str  # the unit inside the launch, e.g. "CTA 3 (SM 17) warp 2"
    name: str
    start_ns: int | float
    end_ns: int | float


@dataclass
class Trace:
    kernels: list = field(default_factory=list)
    scopes: list = field(default_factory=list)
    thread_names: dict = field(default_factory=dict)
    #: :class:`KernelSlice` events (``Batch.kernel_slices``)
    kernel_slices: list = field(default_factory=list)
