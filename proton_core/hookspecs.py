"""Every hook a Proton plugin can implement, grouped by plugin kind.

Plugins never hand objects to the core through return values: each
registration hook receives a ``register`` callback, so the core owns names,
duplicate detection and error messages (the pattern of llm's
``register_models``).  Each ``register`` takes the keyword options its
docstring lists and nothing else; everything one plugin registers is
published together or not at all.  A plugin module implements any subset of
these with ``@proton_core.hookimpl``; the types it needs come from
:mod:`proton_core.plugin_api`.

Every spec is fully annotated; the types are imported for type checkers only
(``TYPE_CHECKING``), so importing this module loads nothing more
(``tests/test_contract_hookspecs.py`` checks both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .plugin_api import Session
    from .registry import RegisterBackend, RegisterContext, RegisterSink, SetEnvironment

hookspec = pluggy.HookspecMarker("proton")


# --------------------------------------------------------------- backends ----
@hookspec
def proton_register_backends(register: RegisterBackend) -> None:
    """Register device-activity backends.

    Call ``register(name, factory, *, description="", priority=0, available=None, modes=())``.
    ``factory()`` returns a :class:`proton_core.plugin_api.Backend` and may raise
    :class:`proton_core.plugin_api.BackendUnavailable` with a reason.
    ``available()`` (optional, cheap, no side effects) returns ``None`` when
    the backend can run here or a string saying why not (a probe that raises
    makes the backend unavailable, its exception the reason); automatic backend
    choice takes the available backend of highest positive ``priority`` and
    falls back to ``host``.  ``modes`` lists the ``start(mode=...)`` values
    (or prefixes) the backend accepts.
    """


# -------------------------------------------------------- context sources ----
@hookspec
def proton_register_contexts(register: RegisterContext) -> None:
    """Register context sources.

    Call ``register(name, factory, *, description="", base=False)``.
    A *base* source (``shadow``, ``python``) decides how a kernel's call path
    is spelled and is chosen with ``start(context=...)``.  Other sources are
    layered on top with ``start(hook="a,b")`` (``triton``, ``torch``, ``jax``);
    ``factory()`` returns a :class:`proton_core.plugin_api.ContextSource`.
    """


# ------------------------------------------------------------------ sinks ----
@hookspec
def proton_register_sinks(register: RegisterSink) -> None:
    """Register output formats.

    Call ``register(name, writer, *, extension, data=("tree",), description="")``.
    ``writer(profile, path)`` writes a :class:`proton_core.plugin_api.Profile`
    to ``path``; ``data`` names the data kinds (``tree``, ``trace``) it can write.
    """


# -------------------------------------------------------------- lifecycle ----
@hookspec
def proton_session_started(session: Session) -> None:
    """A session started; ``session`` is the live :class:`proton_core.plugin_api.Session`."""


@hookspec
def proton_session_finalizing(session: Session) -> None:
    """A session is about to be written: last chance to add metrics to ``session.profile``."""


@hookspec
def proton_session_finalized(session: Session, paths: list[str]) -> None:
    """A session was written to ``paths`` (a list of file paths)."""


# ------------------------------------------------------------ followed jobs ----
@hookspec
def proton_follow_environment(options: dict[str, object], setenv: SetEnvironment) -> None:
    """``proton-profile`` runs a command: set what its processes that are not Python need to be profiled.

    ``options`` are the session's (``backend``, ``mode``, ``no_follow``, ...).  Call ``setenv(name, value)``
    for each variable (the cupti plugin names its injection library in ``CUDA_INJECTION64_PATH``); the
    core refuses two plugins setting one variable to different values.
    """
