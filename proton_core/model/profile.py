"""Everything a session produced, handed to sinks."""

from __future__ import annotations

from dataclasses import dataclass, field

from .trace import Trace
from .tree import Tree


@dataclass
class Profile:
    name: str
    context: str
    data: str  # "tree" or "trace"
    tree: Tree = field(default_factory=Tree)
    trace: Trace | None = None
    #: {device_type: {"<id>": {arch, num_sms, clock_rate, memory_clock_rate, bus_width}}}
    devices: dict = field(default_factory=dict)
    #: Activity records a backend reported as dropped.
    dropped: int = 0
    #: Nanoseconds the backend could not see launches (CUPTI re-attaching); other threads' kernels may be missing.
    unobserved_ns: int = 0
    #: Kernels counted without a duration (the vendor library gave none): their time is missing.
    untimed: int = 0
    #: The backend that recorded it (cupti, host, ...): the viewer's root line names it.
    backend: str | None = None

    def merge(self, other: "Profile") -> None:
        """Add ``other`` (a later phase of the same session) into this profile."""
        self.tree.merge(other.tree)
        if self.trace is not None and other.trace is not None:
            self.trace.kernels += other.trace.kernels
            self.trace.scopes += other.trace.scopes
            self.trace.kernel_slices += other.trace.kernel_slices
            self.trace.thread_names.update(other.trace.thread_names)
        self.devices = {**self.devices, **other.devices}
        self.dropped += other.dropped
        self.unobserved_ns += other.unobserved_ns
        self.untimed += other.untimed

    def device_info(self) -> dict:
        """Device properties of the devices that ran kernels in this profile."""
        out = {}
        for device_type, ids in self.tree.device_ids.items():
            known = self.devices.get(device_type, {})
            entries = {str(i): known[str(i)] for i in sorted(ids) if str(i) in known}
            if entries:
                out[device_type] = entries
        return out
