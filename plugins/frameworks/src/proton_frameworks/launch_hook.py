"""Upstream's ``triton.profiler.hooks.launch`` objects for ``hook="triton"``: a kernel-name filter and launch ids.

``LaunchHook().configure(include=..., exclude=...)`` limits which kernels' ``launch_metadata`` runs (regular
expressions matched against the kernel's name from its start, as upstream's); ``start(hook=LaunchHook())``
is ``hook="triton"``.  ``id`` is a context variable holding the id of the calling thread's latest launch
(unique per launch).  Both need work in every launch hook call, so they switch the hooks to the Python ones
(:func:`proton_frameworks.triton_hook.launch_enter`) when first used, for the rest of the process; the
default hooks (native, no filter, no ids) stay untouched until then.
"""

from __future__ import annotations

import contextvars
import itertools
import re

from proton_core.plugin_api import METADATA_SCOPE, ProtonError

#: upstream's name of the scope launch metadata is computed under; proton-view hides it
COMPUTE_METADATA_SCOPE_NAME = METADATA_SCOPE

#: the id of the calling thread's latest Triton launch (``hook="triton"``, after ``LaunchHook`` or ``ids_on``)
id = contextvars.ContextVar("proton_launch_id", default=None)  # noqa: A001 - upstream's name
_NEXT = itertools.count(1)


class Filter:
    """Which kernel names run their launch_metadata: ``include`` must match, ``exclude`` must not."""

    def __init__(self, include: str | None, exclude: str | None) -> None:
        self.include = _compile("include", include)
        self.exclude = _compile("exclude", exclude)

    def allows(self, name) -> bool:
        if not isinstance(name, str):
            return True
        if self.include is not None and self.include.match(name) is None:
            return False
        return self.exclude is None or self.exclude.match(name) is None


def _compile(what: str, pattern):
    if pattern is None or pattern == "":
        return None
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ProtonError(f"LaunchHook.configure({what}={pattern!r}): not a regular expression ({exc})") from None


class State:
    """What the Python hooks read per launch: the filter (None: every kernel) and whether ids are set."""

    filter: Filter | None = None
    ids = False


def next_id() -> int:
    value = next(_NEXT)
    id.set(value)
    return value


class LaunchHook:
    """Upstream's launch hook object: one per process (upstream's is a singleton), named ``triton``."""

    hook_name = "triton"
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def configure(self, include: str | None = None, exclude: str | None = None) -> None:
        """Run launch_metadata only for kernels whose name matches ``include`` and not ``exclude``."""
        State.filter = Filter(include, exclude) if (include or exclude) else None
        State.ids = True
        _python_hooks()


def ids_on() -> None:
    """Set :data:`id` at every launch from now on."""
    State.ids = True
    _python_hooks()


def _python_hooks() -> None:
    from . import triton_hook

    triton_hook.use_python_hooks()
