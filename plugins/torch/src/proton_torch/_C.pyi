"""PyTorch operator contexts from RecordFunction callbacks (plugins/torch/csrc/), built against the
installed torch (import torch first). Keep in step with python_module.cc's ``kMethods`` table and ``PyInit__C``
(tests/test_contract_stubs.py compares).
"""

from typing import Any, Callable

#: The first context id this extension interns (ids from here up are its operators, modules, backward).
FIRST_ID: int  # the first of our context ids: the range the core reserved (set_first_id)
#: The torch version the extension was compiled for (it refuses, in one line, to load against another).
BUILT_FOR: str

def timing(reset: bool = False, /) -> tuple[float, list[tuple[int, dict[str, tuple[int, int]]]]] | None:
    """(TSC Hz, [(OS thread id, {part: (TSC cycles, calls)})]) of a PROTON_TORCH_TIMING=1 build, else None."""

def enable(shapes: bool = False, observe_all: bool = False) -> None:
    """Register the RecordFunction callbacks (again, if shapes changed); observe_all: leave no operator
    unobserved (read when they are first registered)."""

def disable() -> None:
    """Remove the callbacks (records already open still close)."""

def forget_after_fork() -> None:
    """In a forked child: set no context any more."""

def unobserved() -> list[str]:
    """The operators that launch nothing (``name.overload``) torch builds no record for now."""

def set_channels(capsules: list[object], provide: bool = True) -> int:
    """The running backends' native context setters (``proton.native_context.v1`` capsules); how many.
    provide: name each launch's context when the backend asks (all of version 2), not one per operator."""

def set_tracing(on: bool, /) -> None:
    """Keep an event per operator for :func:`take_events`."""

def entry(id: int, /) -> tuple[str, int, str, str] | tuple[str, int, int, bool] | None:
    """('name', parent, name, 'op'|'module'|'backward'|'name') | ('link', backward ctx, forward ctx, known) | None."""

def intern(parent: int, name: str, /) -> int:
    """The id of context ``name`` under ``parent``."""

def set_module_support() -> None:
    """Take the core's scope engine (its C API), which the module hooks and the module call wrapper open the
    core's scopes through; ImportError where the core was built without it."""

def set_first_id(first: int, /) -> None:
    """Our context ids start at ``first``, the range the core reserved for this plugin (FIRST_ID follows)."""

def module_pre_hook(module: Any, args: tuple[Any, ...], /) -> None:
    """A global nn.Module forward pre hook."""

def module_post_hook(module: Any, args: tuple[Any, ...], output: Any, /) -> None:
    """A global nn.Module forward hook (always_call)."""

def module_call_descriptor(module_type: type, original: Callable[..., Any], /) -> Any:
    """A method descriptor of nn.Module (one per process) calling ``original`` with the module opened around
    it while ``set_module_call(True)``."""

def set_module_call(on: bool, /) -> None:
    """Whether the module_call descriptor opens modules (off: it only calls the original)."""

def module_ids() -> list[int]:
    """The ids of the module scopes of the core opened."""

def settle() -> None:
    """The calling thread's module frames of ours (no record open) become the core's scopes (a settler)."""

def backward_enter() -> int:
    """Publish the calling thread's context for autograd's threads; a token for :func:`backward_exit`."""

def backward_exit(token: int, /) -> None:
    """Undo :func:`backward_enter`."""

def current() -> int:
    """The calling thread's context, as the backends hold it."""

def take_events() -> list[tuple[int, int, int, int]]:
    """[(context, thread id, start ns, end ns)] kept while tracing."""

def null_observer(on: bool, hide: bool = False, /) -> None:
    """Register (or remove) RecordFunction callbacks that do nothing (a benchmark anchor); hide: with the
    operators that launch nothing unobserved, as hook='torch' leaves them."""

def stats() -> dict[str, int | bool]:
    """Counters and settings: enabled, providing, unobserved, shapes, channels, entries, linked, ..."""

def reset_stats() -> None:
    """Zero the counters (tests)."""
