"""The host-only backend: scopes, CPU time and metrics, no device activity.

Chosen automatically where no GPU backend can run, so a program annotated
for Proton still profiles (and writes a valid profile) on a laptop or in CI.
"""

from __future__ import annotations

from ..backend import Backend
from ..plugins import hookimpl


class HostBackend(Backend):
    device_type = ""


@hookimpl
def proton_register_backends(register):
    register("host", HostBackend, priority=0, description="no device activity: scopes, cpu_time and metrics only")
