"""Records to sessions by epoch: what a backend's flush delivers, filed into the sessions that listened.

One backend instance serves every session that names it.  The manager gives
each backend an *epoch* per distinct set of active sessions (``BackendState.epochs``
maps it to those sessions and their phases), so records delivered at flush go
to exactly the sessions that were active when their kernel was launched (see
:mod:`proton_core.backend`).  A flush delivers every earlier launch, so the
epochs before it retire there.
"""

from __future__ import annotations

from . import epoch_switching, log
from .errors import ProtonError
from .metrics import PROPERTY, parse_name as parse_metric_name


class BackendState:
    """A running backend and the bookkeeping that routes its records."""

    def __init__(self, name: str, backend, device_type: str) -> None:
        self.name = name
        self.backend = backend
        self.device_type = device_type
        self.sessions: list = []  # the sessions that use it (proton_core.session_state.Session)
        self.epoch = 0
        self.epochs: dict[int, tuple] = {}
        self.switching = None  # epoch_switching.Switching while the backend moves epochs on by itself
        self.nodes: dict[int, tuple[int, int, object]] = {}
        self.devices: dict = {}


def flush(state: BackendState, complete: bool = True) -> None:
    """Route what the backend recorded into its sessions' phases (a flush delivers every earlier
    launch).  ``complete=False``: only what the backend has ready (``drain``), which completes
    no phase; the periodic writer polls that way while no ended phase waits for its records."""
    epoch_switching.follow(state)  # phases the backend ended by itself, before this flush began
    current = [(s, s.phases.current) for s in state.sessions]
    epoch_at_start = epoch_switching.live_epoch(state)
    batch = None if complete else state.backend.drain()
    if batch is None:  # asked for, or the backend has nothing cheaper
        complete, batch = True, state.backend.flush()
    if state.switching is not None:  # records of switches made since: their phases open now
        epoch_switching.follow(state, max((r[0] for r in batch.records), default=0))
    for node_id, parent, kind, value in batch.nodes:
        state.nodes[node_id] = (parent, kind, value)
    state.devices.update({k: {**state.devices.get(k, {}), **v} for k, v in batch.devices.items()})
    epochs = state.epochs
    unrouted = 0
    # In node order (a backend numbers nodes as launches first reach them): sibling scopes are written in
    # the order the program first launched under them, as upstream's file has them, not the backend's
    # hash order.
    for epoch, node_id, kernel, device_id, time_ns, count in sorted(batch.records, key=_node_of):
        routes = epochs.get(epoch)
        if routes is None:  # an epoch already retired: the backend broke "a flush delivers every earlier launch"
            unrouted += count
            continue
        for session, phase in routes:
            if not session.closed:
                session.add_record(phase, node_id, kernel, device_id, time_ns, count)
    unrouted_inner, late_inner, bad_name = 0, {}, None
    if batch.kernel_metrics:
        unrouted_inner, late_inner, bad_name = route_kernel_metrics(state, batch.kernel_metrics, epochs)
    for epoch, node_id, kernel, device_id, stream, start, end, launch, tid in batch.events:
        for session, phase in epochs.get(epoch, ()):
            if not session.closed and session.data == "trace":
                session.add_event(phase, node_id, kernel, device_id, stream, start, end, launch, tid)
    if batch.kernel_slices:
        unrouted_inner += route_kernel_slices(batch.kernel_slices, epochs, late_inner)
    # Everything launched under an earlier epoch has now arrived: retire those epochs.
    for epoch in [e for e in epochs if complete and e < epoch_at_start]:
        del epochs[epoch]
    for session, phase in current:
        session.settle()
        if complete:
            session.phases.flushed(phase)
        for profile in session.phases.profiles.values():
            profile.devices = state.devices
        late, session.phases.late = session.phases.late, 0
        late_entries = late_inner.pop(session, 0)
        if not session.closed:  # what the backend could not deliver whole, in the current phase's profile
            profile = session.profile
            profile.dropped += batch.dropped + late + unrouted + unrouted_inner + late_entries
            profile.unobserved_ns += batch.unobserved_ns
            profile.untimed += batch.untimed
            if batch.untimed and not session.warned_untimed:
                session.warned_untimed = True
                log.warn(f"session {session.id}: backend {state.name!r} gave {batch.untimed} kernels without "
                         "a duration; they are counted with time 0 (see 'untimed' in the profile)")
        if late:
            log.warn(f"session {session.id}: {late} kernels arrived for phases already cleared; "
                     "they are counted in 'dropped' (clear a phase only once it is complete)")
        if late_entries:
            log.warn(f"session {session.id}: {late_entries} in-kernel metric entries arrived for phases already "
                     "cleared (metrics or slices); they are counted in 'dropped' (clear a phase only once it is "
                     "complete)")
    if unrouted:
        log.warn(f"backend {state.name!r} delivered {unrouted} kernel records after the flush that should have "
                 "held them; they are counted in 'dropped'")
    if unrouted_inner:
        log.warn(f"backend {state.name!r} delivered {unrouted_inner} in-kernel metric entries after the flush "
                 "that should have held them (metrics or slices); they are counted in 'dropped'")
    if batch.dropped:
        log.warn(f"backend {state.name!r} dropped {batch.dropped} activity records; "
                 "their kernels are missing from the profile (see 'dropped' in the profile)")
    if bad_name is not None:  # after the bookkeeping: the rest of the batch is filed, this entry is not
        raise bad_name


def _node_of(record) -> int:
    return record[1]


def route_kernel_metrics(state: BackendState, entries, epochs) -> tuple:
    """``flush``'s part for ``Batch.kernel_metrics``: each entry goes to the sessions and phases of
    its epoch, as kernel records do.  Each distinct metric name is parsed once per flush; an entry with a
    bad one is skipped and a ProtonError naming the backend and the name is returned, raised by the caller.
    Returns (entries of retired epochs, {session: entries for cleared phases}, error or None)."""
    parsed: dict = {}
    unrouted, late, error = 0, {}, None
    for epoch, node_id, kernel, device_id, sub_path, metrics in entries:
        routes = epochs.get(epoch)
        if routes is None:
            unrouted += 1
            continue
        try:
            for name, _ in metrics:
                if name not in parsed:
                    metric = parse_metric_name(name)
                    parsed[name] = (metric.key, metric.kind == PROPERTY)
        except (ProtonError, TypeError) as exc:  # TypeError: a name that is no string (unhashable)
            if error is None:
                why = str(exc).splitlines()[0] if isinstance(exc, ProtonError) else f"metric name {name!r} is no string"
                error = ProtonError(f"backend {state.name!r} delivered an in-kernel metric with a bad name: {why}")
            continue
        sub_path = tuple(sub_path)
        for session, phase in routes:
            if not session.closed and not session.add_kernel_metrics(phase, node_id, kernel, device_id, sub_path,
                                                                     metrics, parsed):
                late[session] = late.get(session, 0) + 1
    return unrouted, late, error


def route_kernel_slices(entries, epochs, late: dict) -> int:
    """``flush``'s part for ``Batch.kernel_slices``: each slice to the tracing sessions of its epoch.
    Returns the slices of retired epochs; slices for cleared phases are added to ``late`` per session."""
    unrouted = 0
    for epoch, node_id, kernel, device_id, launch_id, track, name, start, end in entries:
        routes = epochs.get(epoch)
        if routes is None:
            unrouted += 1
            continue
        for session, phase in routes:
            if not session.closed and session.data == "trace" and not session.add_kernel_slice(
                    phase, node_id, kernel, device_id, launch_id, track, name, start, end):
                late[session] = late.get(session, 0) + 1
    return unrouted
