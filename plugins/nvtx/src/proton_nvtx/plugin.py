"""Turns the injection library on and off with the sessions, and hands it the backends' setters.

A session started with ``nvtx=True`` (the default) turns NVTX ranges into scopes while it is
open; ``PROTON_ENABLE_NVTX=0`` keeps them out of every session.  Each range's host wall time is
recorded as ``cpu_time (ns)`` where asked (``PROTON_NVTX_CPU_TIME=1``) and, by default, when the
session's backend sees no device (the host backend): there a range would otherwise leave no trace.
"""

from __future__ import annotations

import os

from proton_core import hookimpl
from proton_core.plugin_api import (
    add_cpu_time_at,
    add_scope_event,
    close_scope,
    open_scope,
    open_sessions,
    register_internal_path,
    warn,
)
from proton_core.native_api import native_context_setters, reserve_context_ids

from . import injection

_warned: set[str] = set()
_probed: list = []  # libraries are probed once per process, before the first session turns ranges on


def _native():
    from . import _inject

    return _inject


def _flag(name: str, default: str) -> str:
    return os.environ.get(name, default).strip().lower()


def cpu_time_wanted(sessions) -> bool:
    value = _flag("PROTON_NVTX_CPU_TIME", "auto")
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return any(not s.backend_state.device_type for s in sessions)


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warn(message)


def configure() -> None:
    """Match the injection library to the open sessions (called at each start and finalize)."""
    native = _native()
    sessions = [s for s in open_sessions() if s.nvtx]
    on = bool(sessions) and injection.enabled_by_env()
    native.set_channels(native_context_setters() if on else [])
    native.configure(on, cpu_time_wanted(sessions), _flag("PROTON_NVTX_DOMAIN_PREFIX", "1") not in ("0", "false"),
                     _flag("PROTON_NVTX_KEEP_IDS", "0") in ("1", "true", "yes", "on"))


def _check_injection() -> None:
    """One line when NVTX ranges cannot reach Proton, saying how to fix it."""
    state = injection.STATUS["state"]
    if state == "other":
        _warn_once("other", f"NVTX ranges will not become scopes: NVTX_INJECTION64_PATH already names another "
                            f"tool ({injection.STATUS['other']}); unset it to let Proton see them")
    elif state == "missing":
        _warn_once("missing", "NVTX ranges will not become scopes: the nvtx plugin's injection library is "
                              "missing; reinstall proton-profiler-nvtx")
    elif state == "off":
        return
    elif not _probed:
        _probed.append(True)
        for library, probe in _probes():
            if not probe():
                _warn_once(f"late:{library}", f"NVTX ranges from {library} will not become scopes: it made its first "
                                              "NVTX call before Proton was imported; import proton_core (or start "
                                              "Proton) earlier, or run the program under proton-profile")


def _probes():
    """(library, check) for NVTX-using Python libraries already imported: does a range of theirs reach us?"""
    import sys

    native = _native()

    def reaches(push, pop):
        def check():
            native.probe(True)  # ranges are off here: counted, never recorded
            try:
                push()
                pop()
            except Exception:  # noqa: BLE001 - a library that cannot push (a CPU build) is not probed
                return True
            finally:
                seen = native.stats()["probe_hits"] > 0
                native.probe(False)
            return seen
        return check

    torch = sys.modules.get("torch")
    if torch is not None and getattr(getattr(torch, "cuda", None), "is_available", lambda: False)():
        nv = torch.cuda.nvtx
        yield "torch.cuda.nvtx", reaches(lambda: nv.range_push("proton-probe"), nv.range_pop)
    nvtx = sys.modules.get("nvtx")
    if nvtx is not None and hasattr(nvtx, "push_range"):
        yield "the nvtx package", reaches(lambda: nvtx.push_range("proton-probe"), nvtx.pop_range)


def drain() -> None:
    """Native ranges' host time and the Start/End ranges and marks, into the active sessions."""
    metrics, events = _native().take()
    for ctx, _count, ns in metrics:
        add_cpu_time_at(ctx, ns)
    for ctx, name, tid, start, end in events:
        add_scope_event(ctx, name, tid, start, end)


@hookimpl
def proton_session_started(session):
    if not session.nvtx or not injection.enabled_by_env():
        return
    native = _native()
    # Threads holding the GIL: ranges are scopes of the core's stack (through its C API where built);
    # other threads' ranges get ids of the range the core reserves for this plugin.
    native.set_bridge(open_scope, close_scope, reserve_context_ids("nvtx", native.resolve))
    if not any(s.nvtx for s in open_sessions() if s is not session):
        native.configure(False, False, True)
        _check_injection()  # while ranges are off: the probes record nothing
    configure()


@hookimpl
def proton_session_finalizing(session):
    if session.nvtx:
        drain()
    stats = _native().stats()
    if stats["unbalanced_pops"] or stats["misnested_pops"]:
        _warn_once("unbalanced", f"NVTX: {stats['unbalanced_pops']} pops without a matching push and "
                                 f"{stats['misnested_pops']} pops with a proton scope still open inside were "
                                 "ignored (nothing recorded was lost)")


@hookimpl
def proton_session_finalized(session, paths):
    configure()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's sessions: its ranges are not recorded (docs: forks)."""
    try:
        _native().configure(False, False, True)
        _native().set_channels([])
    except ImportError:
        pass


os.register_at_fork(after_in_child=_after_fork_in_child)
register_internal_path(os.path.dirname(os.path.abspath(__file__)) + os.sep)
