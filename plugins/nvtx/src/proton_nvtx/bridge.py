"""The Python side of NVTX ranges pushed on threads that hold the GIL.

The injection library calls :func:`push` and :func:`pop` there, so a range nests with
``proton.scope`` in program order (it is a scope of the thread's stack).  Threads without
the GIL never come here: the library interns their ranges itself.
"""

from __future__ import annotations

from proton_core.plugin_api import ACTIVITY, add_cpu_time_here, enter_scope, exit_scope, innermost_scope

#: Pops that found another scope innermost (a proton.scope closed inside an open range).
MISNESTED = {"count": 0}


def push(name: str) -> int:
    """Open scope ``name``; its context id, or -1 when no session records (nothing opened)."""
    if not ACTIVITY.any:
        return -1
    return enter_scope(name)


def pop(ctx: int, cpu_ns: int) -> None:
    """Close the scope ``push`` opened (id ``ctx``), adding its wall time when asked (``cpu_ns`` >= 0)."""
    if innermost_scope() != ctx:
        MISNESTED["count"] += 1
        return
    if cpu_ns >= 0:
        add_cpu_time_here(cpu_ns)
    exit_scope()
