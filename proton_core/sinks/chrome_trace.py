"""Chrome trace JSON (chrome://tracing, Perfetto) for ``data="trace"``.

Host threads and GPU streams become named threads of a "host" process and
one process per device; each kernel is linked to its launch by a flow arrow
when the backend reported the launch time.  Slices measured inside a kernel
(``Trace.kernel_slices``: intra-kernel scopes per warp) get one process per
launch, with one thread per track (CTA, warp) in the order the backend gave them.
"""

from __future__ import annotations

import json
import os

from ..plugins import hookimpl

HOST_PID = 0


def _us(ns: int, origin: int) -> float:
    return (ns - origin) / 1000.0


def trace_events(profile) -> list[dict]:
    trace = profile.trace
    kernels, scopes = trace.kernels, trace.scopes
    slices = getattr(trace, "kernel_slices", ())
    starts = [e.start_ns for e in scopes] + [e.start_ns for e in kernels] + [e.start_ns for e in slices]
    starts += [e.launch_ns for e in kernels if e.launch_ns]
    origin = min(starts) if starts else 0
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "args": {"name": f"host (pid {os.getpid()})"}}
    ]
    threads = {e.thread_id for e in scopes} | {e.thread_id for e in kernels if e.launch_ns}
    for tid in sorted(threads):
        name = trace.thread_names.get(tid, f"thread {tid}")
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid, "args": {"name": name}})
    for e in scopes:
        events.append({"ph": "X", "cat": "scope", "name": e.name, "pid": HOST_PID, "tid": e.thread_id,
                       "ts": _us(e.start_ns, origin), "dur": (e.end_ns - e.start_ns) / 1000.0,
                       "args": {"path": "/".join(e.path)}})
    devices = sorted({(e.device_type, e.device_id) for e in kernels})
    pids = {dev: i + 1 for i, dev in enumerate(devices)}
    for (dtype, did), pid in pids.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"{dtype} {did}"}})
    for dtype, did, stream in sorted({(e.device_type, e.device_id, e.stream_id) for e in kernels}):
        events.append({"ph": "M", "name": "thread_name", "pid": pids[(dtype, did)], "tid": stream,
                       "args": {"name": f"stream {stream}"}})
    for flow_id, e in enumerate(kernels, start=1):
        pid = pids[(e.device_type, e.device_id)]
        ts = _us(e.start_ns, origin)
        events.append({"ph": "X", "cat": "kernel", "name": e.name, "pid": pid, "tid": e.stream_id, "ts": ts,
                       "dur": (e.end_ns - e.start_ns) / 1000.0, "args": {"path": "/".join(e.path)}})
        if e.launch_ns:
            events.append({"ph": "s", "cat": "launch", "name": "launch", "id": flow_id, "pid": HOST_PID,
                           "tid": e.thread_id, "ts": _us(e.launch_ns, origin)})
            events.append({"ph": "f", "bp": "e", "cat": "launch", "name": "launch", "id": flow_id, "pid": pid,
                           "tid": e.stream_id, "ts": ts})
    events += _slice_events(slices, origin, len(pids) + 1)
    return events


def _slice_events(slices, origin, first_pid: int) -> list[dict]:
    """One process per (device, launch) after the device processes; one thread per track."""
    events: list[dict] = []
    launches: dict[tuple, tuple[int, dict]] = {}
    for e in slices:
        key = (e.device_type, e.device_id, e.launch_id)
        found = launches.get(key)
        if found is None:
            pid = first_pid + len(launches)
            found = launches[key] = (pid, {})
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"{e.kernel} launch {e.launch_id} ({e.device_type} {e.device_id})"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
        pid, tracks = found
        tid = tracks.get(e.track)
        if tid is None:
            tid = tracks[e.track] = len(tracks) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": e.track}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
        events.append({"ph": "X", "cat": "in_kernel", "name": e.name, "pid": pid, "tid": tid,
                       "ts": _us(e.start_ns, origin), "dur": (e.end_ns - e.start_ns) / 1000.0,
                       "args": {"kernel": e.kernel, "path": "/".join(e.path)}})
    return events


def write_chrome_trace(profile, path: str) -> None:
    with open(path, "w") as f:
        json.dump({"traceEvents": trace_events(profile), "displayTimeUnit": "ns"}, f, separators=(",", ":"),
                  allow_nan=False)  # strict JSON (decision 0180): times are finite by construction


@hookimpl
def proton_register_sinks(register):
    register("chrome_trace", write_chrome_trace, extension="chrome_trace", data=("trace",),
             description="event trace for chrome://tracing and Perfetto (data='trace')")
