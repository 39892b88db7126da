"""The registry of this process's sessions: start, activate, phases, finalize, and each backend's epochs.

Every public API call goes through :data:`MANAGER`.  Sessions that name one
backend share one running instance; whenever the set of active sessions
changes, the manager gives each backend a new *epoch* bound to the sessions
(and their phases) listening now, which :mod:`proton_core.routing` uses to
file each delivered record.
"""

from __future__ import annotations

import os
import threading
import time

from . import config, destinations, epoch_switching, log, periodic, routing
from .activity import ACTIVITY
from .backend import context_setter
from .context import THREAD
from .distributed import identity
from .errors import BackendUnavailable, ProtonError
from .model import Profile
from .output import DEFAULT_FORMAT, check_format, output_path, write, write_parts
from .plugins import get_plugins
from .routing import BackendState
from .session_state import Session

DATA_KINDS = ("tree", "trace")


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
        #: session id -> the name its start() asked for (its ``name`` may be numbered: destinations.claim)
        self.asked: dict[int, str] = {}
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
              output_format=None, resume=None, nvtx=None) -> int:
        """Open a session (see ``proton_core.start``); ``resume`` is a finalized session's Profile to add to."""
        from . import config, exit_flush  # here, not at import: tomllib, signal handlers: only sessions need them

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
        if nvtx is not None and not isinstance(nvtx, bool):
            raise ProtonError(f"nvtx must be True or False, not {nvtx!r}")
        output_format = output_format or defaults.get("output_format") or DEFAULT_FORMAT[data]
        check_format(output_format, data)
        extension = plugins.sinks.get(output_format).extension
        destinations.check(output_path(name, extension))  # before anything runs: a bad path fails here, in one line
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
            # never over a file this job wrote or writes: this session may get a numbered name
            asked, name = name, destinations.claim(name, extension, continuing=resume is not None)
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
            self.asked[sid] = asked
            session.nvtx = nvtx if nvtx is not None else not config.triton_nvtx_off()  # None: Triton's knob, else on
            if identity.from_environment() is not None:  # a rank of a job: its process group named in its files
                identity.watch()
            if periodic_options is not None:  # before the epochs: launches=N arms the backend's switching
                session.writer = periodic.Writer(self, session, periodic_options)
            if resume is not None and resume.data == data:
                session.profile = resume
            self.sessions[sid] = session
            state.sessions.append(session)
            self._configure(state)
            self._refresh()
            state.backend.set_context(THREAD.current)
            installed = []
            try:
                base.install(session)  # a base source the backend must help (context="native") says here if it cannot
                for _, layer in layer_objs:
                    layer.install(session)
                    installed.append(layer)
            except Exception:
                session.layers = [(n, l) for n, l in layer_objs if l in installed]
                self._close([session], plugins)
                del self.sessions[sid]
                self.asked.pop(sid, None)
                self._refresh()
                raise
        if session.writer is not None:
            session.writer.start()
        exit_flush.install(self)
        plugins.hook.proton_session_started(session=session)
        return sid

    def _open_with_path(self, name: str):
        """The open session whose output is ``name`` (same file), if any."""
        path = os.path.abspath(name)
        return next((s for s in self.sessions.values() if not s.closed
                     and path in (os.path.abspath(s.name), os.path.abspath(self.asked.get(s.id, s.name)))), None)

    def _backend(self, requested, mode) -> BackendState:
        from . import config

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
            epoch_switching.follow(state)  # switches the backend made by itself keep their phases
            if members:
                state.epoch += 1
                state.epochs[state.epoch] = tuple((s, s.phases.current) for s in members)
                state.backend.set_epoch(state.epoch)
                epoch_switching.arm(state, members)
            else:
                state.backend.set_epoch(0)
                state.switching = None

    def flush(self, state: BackendState, complete: bool = True) -> None:
        """Route what the backend recorded into its sessions' phases (see :func:`proton_core.routing.flush`)."""
        routing.flush(state, complete)

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
            epoch_switching.follow(session.backend_state)  # phases the backend already ended come first
            phase = session.end_phase()
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
            epoch_switching.follow(session.backend_state)  # phases the backend ended by launch count
            if session.writer.due(phases.counts.get(phases.current, 0)):
                self.advance_phase(session.id)
                session.writer.phase_started = time.monotonic()
            # A complete flush (device sync, forced CUPTI flush) only when an ended phase waits for
            # its records: forcing while the program launches costs it time and made CUPTI keep
            # memory per later kernel (docs/performance.md, the soak).
            self.flush(session.backend_state, complete=phases.waiting())
            session.resolve_pending()
            write_parts(session, session.writer.options.format or session.output_format, session.name,
                              get_plugins())

    # --------------------------------------------------------- activation ----
    def set_active(self, session_id, active: bool) -> None:
        with self.lock:
            for session in self.get(session_id):
                if not session.closed:
                    session.active = active
            self._refresh()

    # ------------------------------------------------------------ finalize ----
    def finalize(self, session_id=None, output_format=None, name=None, fallback=False) -> list[str]:
        """Write and close sessions; ``fallback`` (at exit, under the CLI) writes to the temporary
        directory where the path fails, since no later call can retry."""
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
                parts_format = session.writer.options.format if session.writer is not None else None
                fmt = output_format or parts_format or session.output_format  # the last parts as the first
                try:
                    if session.writer is not None:
                        paths = write_parts(session, fmt, name or session.name, plugins, everything=True)
                    else:
                        paths = [write(session, fmt, name or session.name, plugins, fallback)]
                except ProtonError as exc:
                    errors.append(str(exc))
                    continue
                written += paths
                del self.sessions[session.id]
                self.asked.pop(session.id, None)
                plugins.hook.proton_session_finalized(session=session, paths=paths)
            self._refresh()
        if errors:
            raise ProtonError(" | ".join(errors))
        return written

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's sessions, so the child never writes or flushes them."""
        self.lock = threading.RLock()  # another parent thread may have held it at the fork
        self.sessions.clear()
        self.asked.clear()
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
            self.asked.clear()
            self._refresh()

    def _close(self, sessions, plugins) -> None:
        """Detach sessions from their backends, flushing what they recorded."""
        closing = [s for s in sessions if not s.closed]
        for state in {id(s.backend_state): s.backend_state for s in closing}.values():
            if all(s in closing for s in state.sessions):
                epoch_switching.follow(state)
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
            session.base.uninstall(session)
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
            session.add_metrics_here(parsed)

    def add_numbers_here(self, numbers) -> None:
        """``add_metrics_here`` for checked ``[(MetricName, int | float)]``, at least cost."""
        for session in self.active:
            session.add_numbers_here(numbers)


def split_names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in split_names(v)] if any(not isinstance(v, str) for v in value) \
            else [str(v) for v in value]
    name = getattr(value, "hook_name", None)  # upstream's hook objects (proton_frameworks.launch_hook.LaunchHook)
    if isinstance(name, str):
        return [name]
    raise ProtonError(f"hook must be a name such as 'triton' or a list of names, not {type(value).__name__}")


#: Where other backends come from: text for people, never a decision (the core knows only registered backends).
BACKEND_INSTALL_HINT = ("more install as extras: pip install proton-profiler[<name>] "
                        "for cupti, roctracer or instrumentation")


def describe_backends(plugins) -> str:
    """The registered backends (with why one cannot run here) and where others come from."""
    parts = []
    for entry in sorted(plugins.backends.values(), key=lambda e: e.name):
        reason = entry.unavailable_reason()
        parts.append(entry.name if reason is None else f"{entry.name} (unavailable: {reason})")
    return f"installed backends: {', '.join(parts)}; {BACKEND_INSTALL_HINT}"


MANAGER = Manager()
os.register_at_fork(after_in_child=MANAGER.forget_after_fork)
