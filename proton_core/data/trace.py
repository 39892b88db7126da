"""Per-event data for ``data="trace"``: kernels and host scopes with times.

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
class Trace:
    kernels: list = field(default_factory=list)
    scopes: list = field(default_factory=list)
    thread_names: dict = field(default_factory=dict)
