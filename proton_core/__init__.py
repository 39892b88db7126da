"""Proton: per-call-path GPU kernel time at an overhead low enough to leave on.

    import proton_core as proton
    proton.start("my_profile")           # context="shadow", backend chosen for this machine
    with proton.scope("forward"):
        model(x)
    proton.finalize()                    # writes my_profile.hatchet
"""

from __future__ import annotations

import functools

from . import context, data, mode, on_import  # noqa: F401  (upstream's proton.context, proton.data, proton.mode)
from ._version import __version__
from .errors import ProtonError
from .manager import MANAGER
from .plugins import hookimpl
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope
from .state import enter_state, exit_state, metadata_state, state

context.open_contexts = lambda: {sid: s.context for sid, s in MANAGER.sessions.items()}  # for context.depth
on_import.run()  # plugins' steps that must precede the program's first call (NVTX's injection path)

__all__ = [
    "start", "finalize", "activate", "deactivate", "profile", "scope", "cpu_timed_scope", "state",
    "enter_scope", "exit_scope", "enter_state", "exit_state", "metadata_state", "hookimpl", "ProtonError", "__version__",
    "DEFAULT_PROFILE_NAME", "context", "data", "mode", "step",
]

#: The file an unnamed session or ``@profile`` writes (``proton.hatchet``), as upstream; ``[tool.proton] name``
#: in the project's pyproject.toml replaces it.
DEFAULT_PROFILE_NAME = "proton"


def disabled() -> bool:
    """Whether profiling is switched off (``PROTON_DISABLE``, ``TRITON_PROTON_DISABLE``): see config.disabled."""
    from .config import disabled as switched_off  # here: config reads pyproject.toml, only sessions need it

    return switched_off()


def _check_session(session) -> None:
    """An id no open session has is an error, worded as upstream words it (tests and scripts match on it)."""
    if session is not None and session not in MANAGER.sessions:
        known = ", ".join(str(k) for k in MANAGER.sessions) or "none"
        raise ProtonError(f"Session has not been initialized: {session} "
                          f"(no session {session} is open; open sessions: {known})")


def start(name: str | None = None, *, context: str = "shadow", data: str = "tree", backend: str | None = None,
          mode=None, hook=None, output_format: str | None = None, nvtx: bool | None = None,
          ranks=None) -> int | None:
    """Start a profiling session and return its id.

    ``name`` is the output path without extension; ``context`` is ``shadow``
    or ``python``; ``data`` is ``tree`` or ``trace``; ``backend`` overrides
    ``PROTON_BACKEND``/``[tool.proton]``/auto choice; ``hook`` names layered
    context sources (``"triton"``, ``"torch"``, ...); ``mode`` a mode string or a :mod:`proton_core.mode`
    object; ``nvtx=False`` keeps NVTX ranges out of this session (``PROTON_ENABLE_NVTX=0``: out of every
    session; left out, Triton's ``triton.knobs.proton.enable_nvtx`` decides where the program set it).
    Under the ``proton`` command line the program's own calls are ignored.  While profiling is
    switched off (``PROTON_DISABLE=1``, ``TRITON_PROTON_DISABLE=1``) nothing starts and None is returned, as
    in a process of a distributed job whose rank ``ranks`` (``"0,3"`` or ``[0, 3]``; else ``PROTON_RANKS``)
    leaves out.
    """
    from .distributed import selection

    if disabled() or not selection.selected(ranks=ranks):
        return None
    if MANAGER.cli_owned:
        return next(iter(MANAGER.sessions), 0)
    return MANAGER.start(name, context=context, data=data, backend=backend, mode=mode_option(mode), hook=hook,
                         output_format=output_format, nvtx=nvtx)


def step(session: int | None = 0) -> int | None:
    """End one step of the program (a training iteration, a served batch) for the step schedule.

    Under a schedule (``PROTON_SCHEDULE``, ``proton-profile --schedule``: skip_first, wait, warmup,
    active, repeat, as ``torch.profiler.schedule``) only active steps are recorded, each active window
    its own phase (a part under ``mode="periodic_flushing"``).  Returns the number of the step that
    starts now; None, doing nothing, where ``session`` is not open or no schedule applies.
    """
    from .distributed import schedule

    return schedule.step(session)


def mode_option(value):
    """What ``start(mode=...)`` hands the backend: a string as given, a :mod:`proton_core.mode` object as its
    option (PCSampling as ``"pcsampling"``, instrumentation modes as themselves)."""
    return value.option() if isinstance(value, mode.BaseMode) else value


def activate(session: int | None = None) -> None:
    """Resume recording into ``session`` (all sessions when None)."""
    _check_session(session)
    MANAGER.set_active(session, True)


def deactivate(session: int | None = None, flushing: bool = False) -> None:
    """Pause recording into ``session`` (all when None); cheap, needs no device sync.

    ``flushing=True`` (upstream's argument) also routes what the backend delivered so far into the
    session, so ``proton.data.get`` right after reads it."""
    _check_session(session)
    MANAGER.set_active(session, False)
    if flushing:
        for sess in MANAGER.get(session):
            MANAGER.flush(sess.backend_state)


def finalize(session: int | None = None, output_format: str | None = None, *, name: str | None = None) -> list[str]:
    """Flush, write and close ``session`` (all when None); return the paths written.

    If writing fails the data is kept: call again with ``name=`` to write elsewhere.
    """
    if MANAGER.cli_owned:
        return []
    _check_session(session)
    return MANAGER.finalize(session, output_format, name)


def profile(func=None, *, name: str | None = None, context: str = "shadow", data: str = "tree",
            backend: str | None = None, mode=None, hook=None, output_format: str | None = None):
    """Profile each call of ``func``: ``@proton.profile(name=...)`` or ``proton.profile(f, name=...)(args)``.

    Without ``name`` it writes :data:`DEFAULT_PROFILE_NAME` (``proton.hatchet``; ``[tool.proton] name``
    if set), as upstream.  Each call writes the profile of every call so far (calls accumulate); a
    recursive call, or one while a session writing the same file is open, records into that session.
    """

    def decorate(f):
        profiled = None  # what earlier calls recorded: every call writes the calls so far, not only its own

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            nonlocal profiled
            path = name or _default_name()
            if disabled() or MANAGER.cli_owned or MANAGER._open_with_path(path) is not None:
                return f(*args, **kwargs)  # switched off, the CLI's, or an outer call's
            sid = MANAGER.start(path, context=context, data=data, backend=backend, mode=mode_option(mode), hook=hook,
                                output_format=output_format, resume=profiled)
            try:
                return f(*args, **kwargs)
            finally:
                profiled = MANAGER.sessions[sid].profile
                finalize(sid)

        return wrapper

    return decorate if func is None else decorate(func)


def _default_name() -> str:
    """The name of a session started without one: ``[tool.proton] name``, else DEFAULT_PROFILE_NAME."""
    from . import config

    return config.project_defaults().get("name") or DEFAULT_PROFILE_NAME
