"""Everything a running backend changes in Triton, installed once and restored exactly (counted).

Five process-wide things (DESIGN.md §4): the three compiler switches (:mod:`.compiler_hook`), the
profile allocator, and our entries in the ``kernel_load_end_hook``/``launch_enter_hook``/
``launch_exit_hook`` chains, placed through the one Triton hook manager of proton-profiler-frameworks
(``proton_frameworks.triton_hooks``, priority ``INSTRUMENTATION_PRIORITY``: inside the ``hook="triton"``
op of the same launch, as upstream orders its instrumentation hook after its launch hook).
:func:`acquire` installs them on the first user and checks later users ask for the same mode;
:func:`release` restores all of them after the last. A conflict (upstream proton's instrumentation,
another profile allocator, another ``CUDABackend.instrumentation``) fails with one line and leaves
nothing changed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from proton_core.plugin_api import ProtonError
from proton_frameworks.triton_hooks import INSTRUMENTATION_PRIORITY, MANAGER

from . import compiler_hook

HOOKS = ("kernel_load_end_hook", "launch_enter_hook", "launch_exit_hook")


@dataclass
class Installed:
    env: object
    mode_key: str
    switches: compiler_hook.Saved
    allocator: object  # what set_profile_allocator held before
    hooks: object  # our entries in Triton's hook chains (proton_frameworks.triton_hooks.Installed)


_lock = threading.Lock()
_state: dict = {"users": 0, "installed": None}


def users() -> int:
    return _state["users"]


def _check_chains(env) -> None:
    for name in HOOKS:
        chain = getattr(env.runtime, name, None)
        if not (hasattr(chain, "add") and hasattr(chain, "remove")):
            raise ProtonError(f"instrumentation backend cannot start: knobs.runtime.{name} is not a hook chain in "
                              f"triton {env.version} (Triton 3.6 or newer is needed)")


def _install(env, passes, allocator, callables) -> Installed:
    _check_chains(env)
    previous = env.profile_allocator()
    if not env.allocator_is_free(previous) and getattr(previous, "owner", None) != allocator.owner:
        raise ProtonError(f"instrumentation backend cannot start: another profile allocator is set "
                          f"({type(previous).__name__}, by upstream proton or another tool); unset it first")
    switches = compiler_hook.install(env, passes)  # checks upstream proton and CUDABackend.instrumentation
    env.allocation.set_profile_allocator(allocator)
    try:
        hooks = MANAGER.install(env.runtime, "instrumentation", INSTRUMENTATION_PRIORITY, dict(zip(HOOKS, callables)))
    except BaseException:
        env.allocation.set_profile_allocator(previous)
        compiler_hook.uninstall(env, switches)
        raise
    return Installed(env, passes.mode.cache_key(), switches, previous, hooks)


def _uninstall(state: Installed) -> None:
    state.hooks.release()
    state.env.allocation.set_profile_allocator(state.allocator)
    compiler_hook.uninstall(state.env, state.switches)


def acquire(env, passes, allocator, callables) -> None:
    """Install (first user) or check the running installation has the same mode; ``callables`` are the
    (load, enter, exit) hooks."""
    with _lock:
        current = _state["installed"]
        if current is None:
            _state["installed"] = _install(env, passes, allocator, callables)
        elif current.mode_key != passes.mode.cache_key():
            raise ProtonError(f"instrumentation is already running with mode {current.mode_key!r}; finalize that "
                              f"session before starting one with mode {passes.mode.canonical()!r}")
        _state["users"] += 1


def release() -> None:
    with _lock:
        if _state["users"] == 0:
            return
        _state["users"] -= 1
        if _state["users"] == 0:
            state, _state["installed"] = _state["installed"], None
            _uninstall(state)
