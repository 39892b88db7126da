"""Proton: per-call-path GPU kernel time at an overhead low enough to leave on.

    import proton_core as proton
    proton.start("my_profile")           # context="shadow", backend chosen for this machine
    with proton.scope("forward"):
        model(x)
    proton.finalize()                    # writes my_profile.hatchet
"""

from __future__ import annotations

import functools

from . import data, on_import  # noqa: F401  (data: proton.data, upstream's phase API)
from ._version import __version__
from .errors import ProtonError
from .manager import MANAGER
from .plugins import hookimpl
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope, state

on_import.run()  # plugins' steps that must precede the program's first call (NVTX's injection path)

__all__ = [
    "start", "finalize", "activate", "deactivate", "profile", "scope", "cpu_timed_scope", "state",
    "enter_scope", "exit_scope", "hookimpl", "ProtonError", "__version__",
]


def start(name: str | None = None, *, context: str = "shadow", data: str = "tree", backend: str | None = None,
          mode: str | None = None, hook=None, output_format: str | None = None, nvtx: bool = True) -> int:
    """Start a profiling session and return its id.

    ``name`` is the output path without extension; ``context`` is ``shadow``
    or ``python``; ``data`` is ``tree`` or ``trace``; ``backend`` overrides
    ``PROTON_BACKEND``/``[tool.proton]``/auto choice; ``hook`` names layered
    context sources (``"triton"``, ``"torch"``, ...); ``nvtx=False`` keeps NVTX ranges out of this
    session (``PROTON_ENABLE_NVTX=0``: out of every session).  Under the ``proton``
    command line the program's own calls are ignored.
    """
    if MANAGER.cli_owned:
        return next(iter(MANAGER.sessions), 0)
    return MANAGER.start(name, context=context, data=data, backend=backend, mode=mode, hook=hook,
                         output_format=output_format, nvtx=nvtx)


def activate(session: int | None = None) -> None:
    """Resume recording into ``session`` (all sessions when None)."""
    MANAGER.set_active(session, True)


def deactivate(session: int | None = None) -> None:
    """Pause recording into ``session`` (all when None); cheap, needs no device sync."""
    MANAGER.set_active(session, False)


def finalize(session: int | None = None, output_format: str | None = None, *, name: str | None = None) -> list[str]:
    """Flush, write and close ``session`` (all when None); return the paths written.

    If writing fails the data is kept: call again with ``name=`` to write elsewhere.
    """
    if MANAGER.cli_owned:
        return []
    return MANAGER.finalize(session, output_format, name)


def profile(func=None, *, name: str | None = None, context: str = "shadow", data: str = "tree",
            backend: str | None = None, mode: str | None = None, hook=None, output_format: str | None = None):
    """Profile each call of ``func``: ``@proton.profile(name=...)`` or ``proton.profile(f, name=...)(args)``.

    Each call writes the profile of every call so far (calls accumulate); a
    recursive call, or one while a session writing the same file is open,
    records into that session.
    """

    def decorate(f):
        profiled = None  # what earlier calls recorded: every call writes the calls so far, not only its own

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            nonlocal profiled
            path = name or f.__name__
            if MANAGER.cli_owned or MANAGER._open_with_path(path) is not None:  # the CLI's, or an outer call's
                return f(*args, **kwargs)
            sid = MANAGER.start(path, context=context, data=data, backend=backend, mode=mode, hook=hook,
                                output_format=output_format, resume=profiled)
            try:
                return f(*args, **kwargs)
            finally:
                profiled = MANAGER.sessions[sid].profile
                finalize(sid)

        return wrapper

    return decorate if func is None else decorate(func)
