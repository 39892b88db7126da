"""Sessions and the manager that routes backend records into them.

One backend instance serves every session that names it.  The manager gives
each backend an *epoch* per distinct set of active sessions, so records
delivered at flush go to exactly the sessions that were active when their
kernel was launched (see :mod:`proton_core.backend`).
"""

from __future__ import annotations

import os
import threading
import time

from . import config, exit_flush, log, periodic
from .backend import NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, CAPTURED_AT, context_setter
from .context import OP, THREAD
from .contexts.base import CAPTURED
from .data import Profile, Trace
from .data.trace import KernelEvent, KernelSlice
from .errors import BackendUnavailable, ProtonError
from .phases import Phases
from .tallies import Tallies
from .data.tree import merge_metrics
from .metrics import PROPERTY, parse_name as parse_metric_name, read_tensor
from .plugins import get_plugins

DATA_KINDS = ("tree", "trace")
DEFAULT_FORMAT = {"tree": "hatchet", "trace": "chrome_trace"}


class BackendState:
    """A running backend and the bookkeeping that routes its records."""

    def __init__(self, name: str, backend, device_type: str) -> None:
        self.name = name
        self.backend = backend
        self.device_type = device_type
        self.sessions: list[Session] = []
        self.epoch = 0
        self.epochs: dict[int, tuple] = {}
        self.nodes: dict[int, tuple[int, int, object]] = {}
        self.devices: dict = {}


class Session:
    """One profiling session, as lifecycle hooks see it.

    Read-only for plugins: ``id``, ``name`` (output path without extension),
    ``context`` (the base context's name), ``data`` (``tree``/``trace``),
    ``backend`` (the backend's name), ``mode``, ``output_format``, ``active``
    and ``profile`` (the :class:`~proton_core.data.Profile` being filled;
    ``proton_session_finalizing`` may add metrics to ``profile.tree``).
    """

    def __init__(self, sid, name, base_name, base, data, backend_state, mode, layers, output_format):
        self.id = sid
        self.name = name
        self.context = base_name
        self.base = base
        self.data = data
        self.backend_state = backend_state
        self.mode = mode
        self.layers = layers  # [(name, ContextSource)]
        self.output_format = output_format
        self.active = True
        self.closed = False  # detached from its backend; only writing is left
        self.phases = Phases(lambda: Profile(name, base_name, data, trace=Trace() if data == "trace" else None,
                                             backend=backend_state.name))
        self.pending: list = []  # (phase, path, MetricName, tensor) read at flush
        self.tallies = Tallies()  # per-launch numbers, counted until the next settle
        self.warned_untimed = False
        self.writer = None  # periodic.Writer with mode="periodic_flushing"
        self.parts: list[str] = []  # files periodic writing wrote
        self.nvtx = True  # NVTX ranges become scopes (start(nvtx=False): not in this session)
        self._paths: dict[int, tuple] = {0: ()}

    @property
    def backend(self) -> str:
        return self.backend_state.name

    @property
    def profile(self) -> Profile:
        """The current phase's profile (after finalize: everything the session wrote)."""
        return self.phases.profiles[self.phases.current]

    @profile.setter
    def profile(self, profile: Profile) -> None:
        self.phases.profiles[self.phases.current] = profile

    # -------------------------------------------------------------- paths ----
    def elements(self, node_id: int) -> tuple:
        """The (kind, name) path of a backend node, spelled by this session's base context."""
        cached = self._paths.get(node_id)
        if cached is not None:
            return cached
        chain = []
        nodes = self.backend_state.nodes
        while node_id not in self._paths:
            parent, kind, value = nodes[node_id]
            chain.append((node_id, kind, value))
            node_id = parent
        path = self._paths[node_id]
        for nid, kind, value in reversed(chain):
            if kind == NODE_CONTEXT:
                path = path + tuple(self.base.spell_context(value))
            elif kind == NODE_FRAME:
                path = path + tuple(self.base.spell_frame(value))
            elif kind == NODE_CAPTURED_AT:
                path = path + ((CAPTURED, CAPTURED_AT),)
            self._paths[nid] = path
        return path

    def kernel_path(self, elements, kernel: str):
        """Names of the kernel's parent path, its node name (an op renames it) and the properties a
        layer gave the kernel node (``[(metric name, number)]``, e.g. the scopes an XLA fusion spans)."""
        if elements and elements[-1][0] == OP:
            kernel = elements[-1][1]
            elements = elements[:-1]
        path = tuple(name for _, name in elements)
        properties = ()
        for _, layer in self.layers:
            rewritten = layer.rewrite(path, kernel)
            path, kernel = rewritten[0], rewritten[1]
            if len(rewritten) > 2 and rewritten[2]:
                properties = rewritten[2]
        return path, kernel, properties

    def add_record(self, phase, node_id, kernel, device_id, time_ns, count) -> None:
        profile = self.phases.profile_for(phase)
        if profile is None:  # its phase was cleared before it was complete
            self.phases.late += count
            return
        path, kernel, properties = self.kernel_path(self.elements(node_id), kernel)
        profile.tree.add_kernel(path, kernel, self.backend_state.device_type, device_id, time_ns, count)
        if properties:
            profile.tree.add_metrics(path + (kernel,), [(parse_metric_name(n), v) for n, v in properties])
        self.phases.counts[phase] = self.phases.counts.get(phase, 0) + count

    def add_kernel_metrics(self, phase, node_id, kernel, device_id, sub_path, metrics, names) -> bool:
        """File one ``Batch.kernel_metrics`` entry at ``path(node_id) / kernel / *sub_path`` of the
        phase's tree; ``names`` maps each metric name of ``metrics`` to ``(key, is_property)`` (checked
        by the manager).  The node is found once per (node, kernel, device, sub_path) and tree, so a
        flush costs a dict lookup per entry.  False: the phase was cleared before it was complete."""
        profile = self.phases.profile_for(phase)
        if profile is None:
            return False
        tree = profile.tree
        key = (node_id, kernel, device_id, sub_path)
        node = tree.kernel_nodes.get(key)
        if node is None:
            top = (node_id, kernel, device_id, ())
            node = tree.kernel_nodes.get(top)
            if node is None:  # the kernel's node: the one add_record files at
                path, name, _ = self.kernel_path(self.elements(node_id), kernel)
                node = tree.kernel_nodes[top] = tree.node(path).child(name)
                tree.device_ids.setdefault(self.backend_state.device_type, set()).add(device_id)
            for part in sub_path:
                node = node.child(part)
                node.inner = True
            tree.kernel_nodes[key] = node
        store = node.metrics
        for name, value in metrics:
            metric, is_property = names[name]
            store[metric] = value if is_property else store.get(metric, 0) + value
        return True

    def add_event(self, phase, node_id, kernel, device_id, stream, start, end, launch, tid) -> None:
        profile = self.phases.profile_for(phase)
        if profile is None:
            return  # counted with its record
        path, kernel, _ = self.kernel_path(self.elements(node_id), kernel)
        profile.trace.kernels.append(
            KernelEvent(path, kernel, self.backend_state.device_type, device_id, stream, start, end, launch, tid)
        )

    def add_kernel_slice(self, phase, node_id, kernel, device_id, launch_id, track, name, start, end) -> bool:
        """File one ``Batch.kernel_slices`` entry (trace sessions); False: its phase was cleared."""
        profile = self.phases.profile_for(phase)
        if profile is None:
            return False
        path, kernel, _ = self.kernel_path(self.elements(node_id), kernel)
        profile.trace.kernel_slices.append(KernelSlice(path, kernel, self.backend_state.device_type, device_id,
                                                       launch_id, track, name, start, end))
        return True

    def add_metrics(self, elements, parsed) -> None:
        path = tuple(name for _, name in elements)
        numbers = []
        for name, value in parsed:
            if isinstance(value, (int, float)):
                numbers.append((name, value))
            else:
                self.pending.append((self.phases.current, path, name, value))
        if numbers:
            self.profile.tree.add_metrics(path, numbers)

    def add_numbers_here(self, numbers) -> None:
        """``add_metrics`` of checked plain numbers at the calling thread's context, for per-launch hooks:
        the node is looked up once per context id (python-context sessions take the general path)."""
        if self.base.python_frames:
            self.add_metrics(self.base.here(), numbers)
            return
        if not self.tallies.add(THREAD.current, numbers):
            self._merge_at(THREAD.current, numbers)

    def _merge_at(self, ctx: int, numbers) -> None:
        tree = self.profile.tree
        node = tree.context_nodes.get(ctx)
        if node is None:
            node = tree.context_nodes[ctx] = tree.node(tuple(name for _, name in self.base.spell_context(ctx)))
        merge_metrics(node, numbers)

    def settle(self) -> None:
        """Multiply the counted per-launch numbers into the current phase (manager lock held)."""
        if self.tallies.settle(self._merge_at):
            ACTIVITY.generation += 1

    def resolve_pending(self) -> None:
        """Read the tensor metric values; a bad one is left out with one warning, never the profile."""
        pending, self.pending = self.pending, []
        for phase, path, name, tensor in pending:
            profile = self.phases.profile_for(phase)
            if profile is None:
                continue
            try:
                value = read_tensor(name.key, tensor)
            except Exception as exc:
                where = "/".join(path) or "ROOT"
                log.warn(f"session {self.id} ({self.name}): {str(exc).splitlines()[0]} at {where}; "
                         "that value is left out of the profile")
                continue
            profile.tree.add_metrics(path, [(name, value)])

    def same_settings(self, context, data, backend, mode, layers, output_format) -> str | None:
        """None when a start() with these settings may share this open session, else what differs."""
        wanted = {"context": context, "data": data, "mode": mode, "hook": [n for n, _ in layers],
                  "output_format": output_format}
        have = {"context": self.context, "data": self.data, "mode": self.mode, "hook": [n for n, _ in self.layers],
                "output_format": self.output_format}
        if backend is not None:
            wanted["backend"], have["backend"] = backend, self.backend
        differ = [f"{k}={have[k]!r} (asked: {wanted[k]!r})" for k in wanted if wanted[k] != have[k]]
        return ", ".join(differ) or None


class Activity:
    """Whether any session records now, as a plain attribute: per-launch hooks read ``ACTIVITY.any``."""

    __slots__ = ("any", "generation")

    def __init__(self) -> None:
        self.any = False
        #: Bumped whenever what per-launch caches hold may be stale (active sessions changed, tallies
        #: retired entries): :mod:`proton_core.launch_ops` checks it at every cached launch.
        self.generation = 0


ACTIVITY = Activity()


class Manager:
    """All sessions of this process; every public API call goes through it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.sessions: dict[int, Session] = {}
        self.backends: dict[str, BackendState] = {}
        self.next_id = 0
        #: Snapshots read without the lock on the scope paths.
        self.active: tuple[Session, ...] = ()
        self.running: tuple[BackendState, ...] = ()
        #: What the scope hot path calls with each new context id, one per running
        #: backend that wants them (see ``backend.context_setter``).
        self.setters: tuple = ()
        #: The active sessions that record scope events (data="trace").
        self.tracing: tuple[Session, ...] = ()
        self.cli_owned = False  # under `proton script.py`: user start/finalize are ignored
        self._warned_host = False

    # ------------------------------------------------------------- lookups ----
    def get(self, session_id) -> list[Session]:
        if session_id is None:
            return list(self.sessions.values())
        session = self.sessions.get(session_id)
        if session is None:
            known = ", ".join(str(k) for k in self.sessions) or "none"
            raise ProtonError(f"no session {session_id!r} is open (open sessions: {known})")
        return [session]

    # --------------------------------------------------------------- start ----
    def start(self, name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None,
              output_format=None, resume=None, nvtx=True) -> int:
        """Open a session (see ``proton_core.start``); ``resume`` is a finalized session's Profile to add to."""
        plugins = get_plugins()
        defaults = config.project_defaults()
        name = name or defaults.get("name") or "proton"
        if not isinstance(name, str):
            raise ProtonError(f"name must be a string path such as 'profile', not {type(name).__name__}")
        base_reg = plugins.contexts.get(context)
        if base_reg is None or not base_reg.base:
            bases = [e.name for e in plugins.contexts.values() if e.base]
            raise ProtonError(f"unknown context {context!r}: choose one of {', '.join(bases)}")
        if data not in DATA_KINDS:
            raise ProtonError(f"unknown data {data!r}: choose 'tree' (aggregated) or 'trace' (every event)")
        if not isinstance(nvtx, bool):
            raise ProtonError(f"nvtx must be True or False, not {nvtx!r}")
        output_format = output_format or defaults.get("output_format") or DEFAULT_FORMAT[data]
        check_format(output_format, data)
        layers = []
        for hook_name in split_names(hook):
            reg = plugins.contexts.get(hook_name)
            if reg is None or reg.base:
                layered = [e.name for e in plugins.contexts.values() if not e.base]
                raise ProtonError(
                    f"unknown hook {hook_name!r}: installed hooks are {', '.join(layered) or 'none'} "
                    "(pip install proton-profiler[frameworks] for triton, torch and jax)"
                )
            layers.append((hook_name, reg))
        with self.lock:
            same = self._open_with_path(name)
            if same is not None:  # as upstream: the open session writing that file is the one asked for
                differ = same.same_settings(context, data, backend, mode, layers, output_format)
                if differ:
                    raise ProtonError(f"session {same.id} already writes {same.name!r} with other settings: "
                                      f"{differ}; finalize it first or start with another name")
                same.active = True
                self._refresh()
                return same.id
        base = base_reg.factory()  # before the backend starts: a source that cannot load leaves nothing running
        layer_objs = [(n, reg.factory()) for n, reg in layers]
        backend_mode, periodic_options = periodic.split_mode(mode)
        if periodic_options is not None and periodic_options.format is not None:
            check_format(periodic_options.format, data)
        with self.lock:
            state = self._backend(backend, backend_mode)
            sid = self.next_id
            self.next_id += 1
            session = Session(sid, name, context, base, data, state, mode, layer_objs, output_format)
            session.nvtx = nvtx
            if resume is not None and resume.data == data:
                session.profile = resume
            self.sessions[sid] = session
            state.sessions.append(session)
            self._configure(state)
            self._refresh()
            state.backend.set_context(THREAD.current)
            installed = []
            try:
                for _, layer in layer_objs:
                    layer.install(session)
                    installed.append(layer)
            except Exception:
                session.layers = [(n, l) for n, l in layer_objs if l in installed]
                self._close([session], plugins)
                del self.sessions[sid]
                self._refresh()
                raise
        if periodic_options is not None:
            session.writer = periodic.Writer(self, session, periodic_options)
            session.writer.start()
        exit_flush.install(self)
        plugins.hook.proton_session_started(session=session)
        return sid

    def _open_with_path(self, name: str):
        """The open session whose output is ``name`` (same file), if any."""
        path = os.path.abspath(name)
        return next((s for s in self.sessions.values() if not s.closed and os.path.abspath(s.name) == path), None)

    def _backend(self, requested, mode) -> BackendState:
        plugins = get_plugins()
        name, source = config.choose_backend(requested)
        if name is None:
            name = self._auto_backend(plugins)
            source = "auto"
        reg = plugins.backends.get(name)
        if reg is None:
            raise ProtonError(f"unknown backend {name!r} (from {source}); {describe_backends(plugins)}")
        modes = reg.modes
        if mode is not None and mode not in modes and not any(str(mode).startswith(m) for m in modes):
            raise ProtonError(
                f"backend {name!r} has no mode {mode!r}; its modes are: {', '.join(modes) or 'none (omit mode)'}"
            )
        state = self.backends.get(name)
        if state is not None:
            return state
        try:
            backend = reg.factory()
        except BackendUnavailable as exc:
            raise ProtonError(f"backend {name!r} cannot run here: {exc}") from None
        state = BackendState(name, backend, getattr(backend, "device_type", ""))
        backend.start(mode)
        self.backends[name] = state
        return state

    def _auto_backend(self, plugins) -> str:
        reasons = []
        for reg in sorted(plugins.backends.values(), key=lambda r: -r.priority):
            if reg.priority <= 0:  # host and test backends are never auto-picked
                continue
            reason = reg.unavailable_reason()
            if reason is None:
                return reg.name
            reasons.append(f"{reg.name}: {reason}")
        if not self._warned_host:
            self._warned_host = True
            why = "; ".join(reasons) or "no GPU backend plugin installed (pip install proton-profiler[cupti])"
            log.warn(f"no GPU backend can run ({why}); using the host-only backend")
        return "host"

    # ---------------------------------------------------- activity routing ----
    def _configure(self, state: BackendState) -> None:
        live = [s for s in state.sessions if not s.closed]
        state.backend.configure(
            python_frames=any(s.base.python_frames or any(l.python_frames for _, l in s.layers) for s in live),
            trace=any(s.data == "trace" for s in live),
        )

    def _refresh(self) -> None:
        """Recompute snapshots and give every backend a new epoch."""
        self.active = tuple(s for s in self.sessions.values() if s.active and not s.closed)
        ACTIVITY.any = bool(self.active)
        ACTIVITY.generation += 1
        self.running = tuple(self.backends.values())
        self.setters = tuple(f for f in (context_setter(s.backend) for s in self.running) if f is not None)
        self.tracing = tuple(s for s in self.active if s.data == "trace")
        for state in self.backends.values():
            members = tuple(s for s in state.sessions if s.active and not s.closed)
            if members:
                state.epoch += 1
                state.epochs[state.epoch] = tuple((s, s.phases.current) for s in members)
                state.backend.set_epoch(state.epoch)
            else:
                state.backend.set_epoch(0)

    def flush(self, state: BackendState, complete: bool = True) -> None:
        """Route what the backend recorded into its sessions' phases (a flush delivers every earlier
        launch).  ``complete=False``: only what the backend has ready (``drain``), which completes
        no phase; the periodic writer polls that way while no ended phase waits for its records."""
        current = [(s, s.phases.current) for s in state.sessions]
        epoch_at_start = state.epoch
        batch = None if complete else state.backend.drain()
        if batch is None:  # asked for, or the backend has nothing cheaper
            complete, batch = True, state.backend.flush()
        for node_id, parent, kind, value in batch.nodes:
            state.nodes[node_id] = (parent, kind, value)
        state.devices.update({k: {**state.devices.get(k, {}), **v} for k, v in batch.devices.items()})
        epochs = state.epochs
        unrouted = 0
        for epoch, node_id, kernel, device_id, time_ns, count in batch.records:
            routes = epochs.get(epoch)
            if routes is None:  # an epoch already retired: the backend broke "a flush delivers every earlier launch"
                unrouted += count
                continue
            for session, phase in routes:
                if not session.closed:
                    session.add_record(phase, node_id, kernel, device_id, time_ns, count)
        unrouted_inner, late_inner, bad_name = 0, {}, None
        if batch.kernel_metrics:
            unrouted_inner, late_inner, bad_name = _route_kernel_metrics(state, batch.kernel_metrics, epochs)
        for epoch, node_id, kernel, device_id, stream, start, end, launch, tid in batch.events:
            for session, phase in epochs.get(epoch, ()):
                if not session.closed and session.data == "trace":
                    session.add_event(phase, node_id, kernel, device_id, stream, start, end, launch, tid)
        if batch.kernel_slices:
            unrouted_inner += _route_kernel_slices(batch.kernel_slices, epochs, late_inner)
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

    # ------------------------------------------------------------- phases ----
    def _one(self, session_id) -> Session:
        (session,) = self.get(session_id)
        if session.closed:
            raise ProtonError(f"session {session.id} is finalized: its phases were written")
        return session

    def advance_phase(self, session_id) -> int:
        """Close ``session_id``'s current phase; kernels launched from now on go to the next one."""
        with self.lock:
            session = self._one(session_id)
            session.settle()  # what was counted so far belongs to the phase that ends
            phase = session.phases.advance()
            self._refresh()  # a new epoch carries the new phase
            session.backend_state.backend.phase_ended()
            return phase

    def is_phase_complete(self, session_id, phase: int) -> bool:
        with self.lock:
            session = self._one(session_id)
            session.phases.check(phase)
            if phase < session.phases.current and not session.phases.is_complete(phase):
                self.flush(session.backend_state)  # delivers everything launched before now
            return session.phases.is_complete(phase)

    def phase_profile(self, session_id, phase: int) -> Profile:
        """The data of one phase so far (a flush first, so it holds every kernel delivered until now)."""
        with self.lock:
            session = self._one(session_id)
            session.phases.check(phase)
            self.flush(session.backend_state)
            session.resolve_pending()
            profile = session.phases.profile_for(phase)
            if profile is None:
                raise ProtonError(f"phase {phase} of session {session.id} was cleared")
            return profile

    def clear_phase(self, session_id, phase: int, up_to: bool = False) -> None:
        with self.lock:
            session = self._one(session_id)
            session.phases.clear(session.phases.check(phase), up_to)

    def periodic_tick(self, session: Session) -> None:
        """The periodic writer's poll: end the phase when due, flush, write and free complete phases."""
        with self.lock:
            if session.closed:
                return
            phases = session.phases
            if session.writer.due(phases.counts.get(phases.current, 0)):
                self.advance_phase(session.id)
                session.writer.phase_started = time.monotonic()
            # A complete flush (device sync, forced CUPTI flush) only when an ended phase waits for
            # its records: forcing while the program launches costs it time and made CUPTI keep
            # memory per later kernel (docs/performance.md, the soak).
            self.flush(session.backend_state, complete=phases.waiting())
            session.resolve_pending()
            self._write_parts(session, session.writer.options.format or session.output_format, session.name,
                              get_plugins())

    def _write_parts(self, session: Session, fmt: str, name: str, plugins, everything: bool = False) -> list[str]:
        """Write complete phases (all kept ones with ``everything``) to ``<name>.part_<N>`` and free them."""
        phases = session.phases
        numbers = sorted(phases.profiles) if everything else phases.complete_phases()
        for number in numbers:
            profile = phases.profiles[number]
            empty = not profile.tree.root.children and not profile.tree.root.metrics
            if not empty or (everything and number == numbers[-1] and not session.parts):  # a run leaves a file
                path = write_profile(profile, fmt, periodic.part_name(name, number), plugins, session.id)
                session.parts.append(path)
            phases.clear(number)
        return list(session.parts) if everything else []

    # --------------------------------------------------------- activation ----
    def set_active(self, session_id, active: bool) -> None:
        with self.lock:
            for session in self.get(session_id):
                if not session.closed:
                    session.active = active
            self._refresh()

    # ------------------------------------------------------------ finalize ----
    def finalize(self, session_id=None, output_format=None, name=None) -> list[str]:
        plugins = get_plugins()
        for session in self.get(session_id):
            if session.writer is not None:
                session.writer.stop()  # outside the lock: its last tick may be waiting for it
        with self.lock:
            sessions = self.get(session_id)
            if name is not None and len(sessions) != 1:
                raise ProtonError("finalize(name=...) needs one session: pass the session id too")
            for session in sessions:
                if output_format is not None:
                    check_format(output_format, session.data)
            self._close(sessions, plugins)
            written, errors = [], []
            for session in sessions:
                fmt = output_format or session.output_format
                try:
                    if session.writer is not None:
                        paths = self._write_parts(session, fmt, name or session.name, plugins, everything=True)
                    else:
                        paths = [write(session, fmt, name or session.name, plugins)]
                except ProtonError as exc:
                    errors.append(str(exc))
                    continue
                written += paths
                del self.sessions[session.id]
                plugins.hook.proton_session_finalized(session=session, paths=paths)
            self._refresh()
        if errors:
            raise ProtonError(" | ".join(errors))
        return written

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's sessions, so the child never writes or flushes them."""
        self.lock = threading.RLock()  # another parent thread may have held it at the fork
        self.sessions.clear()
        self.backends.clear()
        self.cli_owned = False
        self._refresh()

    def reset(self) -> None:
        """Close every session without writing it and hand start/finalize back to the program (tests)."""
        with self.lock:
            self.cli_owned = False
            self._warned_host = False
            self._close(list(self.sessions.values()), get_plugins())
            self.sessions.clear()
            self._refresh()

    def _close(self, sessions, plugins) -> None:
        """Detach sessions from their backends, flushing what they recorded."""
        closing = [s for s in sessions if not s.closed]
        for state in {id(s.backend_state): s.backend_state for s in closing}.values():
            if all(s in closing for s in state.sessions):
                state.backend.set_epoch(0)  # launches end here, so this flush is the backend's last word
            self.flush(state)
        for session in closing:
            plugins.hook.proton_session_finalizing(session=session)
            session.resolve_pending()
            if session.writer is None:
                session.profile = session.phases.merged()  # what finalize writes: every phase still kept
            session.closed = True
            session.active = False
            for _, layer in session.layers:
                layer.uninstall(session)
            state = session.backend_state
            state.sessions.remove(session)
            if state.sessions:
                self._configure(state)
            else:
                state.backend.set_epoch(0)
                state.backend.stop()
                del self.backends[state.name]

    # -------------------------------------------------------------- scopes ----
    def notify_context(self, context_id: int) -> None:
        for setter in self.setters:
            setter(context_id)

    def add_metrics_here(self, parsed) -> None:
        for session in self.active:
            session.add_metrics(session.base.here(), parsed)

    def add_numbers_here(self, numbers) -> None:
        """``add_metrics_here`` for checked ``[(MetricName, int | float)]``, at least cost."""
        for session in self.active:
            session.add_numbers_here(numbers)


def _route_kernel_metrics(state: BackendState, entries, epochs) -> tuple:
    """``Manager.flush``'s part for ``Batch.kernel_metrics``: each entry goes to the sessions and phases of
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


def _route_kernel_slices(entries, epochs, late: dict) -> int:
    """``Manager.flush``'s part for ``Batch.kernel_slices``: each slice to the tracing sessions of its epoch.
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


def split_names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise ProtonError(f"hook must be a name such as 'triton' or a list of names, not {type(value).__name__}")


def check_format(output_format, data) -> None:
    sinks = get_plugins().sinks
    reg = sinks.get(output_format) if isinstance(output_format, str) else None
    if reg is None:
        raise ProtonError(f"unknown output_format {output_format!r}: choose one of {', '.join(sinks.names())}")
    if data not in reg.data:
        fit = [e.name for e in sinks.values() if data in e.data]
        raise ProtonError(f"output_format {output_format!r} cannot write data={data!r}: use one of {', '.join(fit)}")


def output_path(name: str, extension: str) -> str:
    return name if name.endswith("." + extension) else f"{name}.{extension}"


def write(session: Session, fmt: str, name: str, plugins) -> str:
    return write_profile(session.profile, fmt, name, plugins, session.id)


def write_profile(profile: Profile, fmt: str, name: str, plugins, session_id: int) -> str:
    """Write through a temporary file and rename, so a failed write leaves no partial file and keeps the data."""
    from .progress import progress

    reg = plugins.sinks.get(fmt)
    path = output_path(name, reg.extension)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with progress(f"writing {path}"):
            reg.writer(profile, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ProtonError(
            f"cannot write session {session_id}'s profile to {path!r} ({exc.strerror or exc}); its data is kept: "
            f"call proton.finalize({session_id}, name='<writable path>')"
        ) from None
    return path


def describe_backends(plugins) -> str:
    parts = []
    for entry in sorted(plugins.backends.values(), key=lambda e: e.name):
        reason = entry.unavailable_reason()
        parts.append(entry.name if reason is None else f"{entry.name} (unavailable: {reason})")
    missing = [n for n in ("cupti", "roctracer", "instrumentation") if n not in plugins.backends.items]
    hint = f"; not installed: {', '.join(missing)} (pip install proton-profiler[<name>])" if missing else ""
    return f"installed backends: {', '.join(parts)}{hint}"


MANAGER = Manager()
os.register_at_fork(after_in_child=MANAGER.forget_after_fork)
