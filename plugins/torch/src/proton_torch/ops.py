"""The Python side of the native operator contexts: switching them on and off, naming their ids.

``proton_torch.hook`` calls :func:`start` when the first ``hook="torch"`` session
starts (where a running backend offers a native context setter) and :func:`stop` when the last
one ends. In between, the extension (``csrc/``) turns every operator and autograd node
into a context id of its own, from ``FIRST_ID`` (the range the core reserved for it) up, which :func:`resolve` names for the
core when a profile is built.
"""

from __future__ import annotations

import functools
import os
import sys

from proton_core.plugin_api import (
    ACTIVITY,
    add_scope_event,
    context_names,
    open_sessions,
    register_internal_path,
    register_settler,
    unregister_settler,
    warn,
)
from proton_core.native_api import native_context_setters, reserve_context_ids

from .native import NativeUnavailable, load  # noqa: F401  (re-exported for the hook)

# start/stop run under the hook's SharedInstall lock and the core's session lock; refresh
# runs from session hooks. No lock of ours: one would be taken in both orders with the core's.
STATE = {"on": False, "shapes": False, "patched": []}


def _native():
    from . import _C

    return _C


def resolve(context_id: int):
    """(parent id, name) of one of our ids, for the core; None if it is not ours.

    A link L(B, F), where a backward function goes, is named as the module and operator path of
    the forward operator F under B, the context the backward pass was called in: with F at
    ``step/forward/Net/fc1/aten::linear/aten::addmm`` (``Net``, ``fc1`` modules) and B at
    ``step/backward``, L is ``step/backward/Net/fc1/aten::linear/aten::addmm``. The scopes the
    user opened around the forward pass are left out: they are where the forward pass is. Where
    B is not known (an autograd thread without the engine call's context: the root), F's own
    scopes stand in for it (``step/forward/Net/...``).
    """
    native = _native()
    entry = native.entry(context_id)
    if entry is None:
        return None
    kind, parent, value, known = entry
    if kind == "name":
        return parent, value
    base, forward = parent, value
    full = context_names(forward)
    if not full:
        return base, "<unknown forward operator>"
    start = _framework_start(native, forward, full)
    if not known and base == 0:
        base = _chain(native, 0, full[:start])
    rest = full[start:]
    return _chain(native, base, rest[:-1]), rest[-1]


def _chain(native, parent: int, names) -> int:
    for name in names:
        parent = native.intern(parent, name)
    return parent


def _framework_start(native, forward: int, full: list) -> int:
    """Where the modules and operators begin in ``full``, the path of the forward operator ``forward``:
    the outermost module scope, else the outermost of the operators and modules of ours leading to it
    (a forward operator run inside a backward function, as checkpointing recomputes, starts below it)."""
    chain, cid = 0, forward
    while True:  # up through operators and modules of ours (not through a backward function or link)
        entry = native.entry(cid)
        if entry is None or entry[0] != "name" or entry[3] not in ("op", "module"):
            break
        chain += 1
        cid = entry[1]
    start = max(len(full) - chain, 0)
    paths = _module_paths()
    for k in range(start):
        if tuple(full[:k + 1]) in paths:
            return k
    return min(start, len(full) - 1)


_modules_seen = {"count": -1, "paths": frozenset()}


def _module_paths() -> frozenset:
    """The paths of the module scopes (of the core) the module hooks opened so far."""
    ids = _native().module_ids()
    if len(ids) != _modules_seen["count"]:
        _modules_seen["paths"] = frozenset(tuple(context_names(i)) for i in ids)
        _modules_seen["count"] = len(ids)
    return _modules_seen["paths"]


def _tracing() -> bool:
    return any(getattr(s, "data", None) == "trace" for s in open_sessions())


def providing_wanted() -> bool:
    """``PROTON_TORCH_PROVIDER=0``: set a context per operator even where the backends would ask for
    each launch's (the way of backends of the first capsule version; for comparisons)."""
    return os.environ.get("PROTON_TORCH_PROVIDER", "1").strip().lower() not in ("0", "false", "no", "off")


def observe_all_wanted() -> bool:
    """``PROTON_TORCH_OBSERVE_ALL=1``: keep torch recording every operator, those that launch nothing too
    (for another RecordFunction observer from its very first record, or for comparisons)."""
    return os.environ.get("PROTON_TORCH_OBSERVE_ALL", "0").strip().lower() in ("1", "true", "yes", "on")


def refresh() -> None:
    """Match the extension to the open sessions: their backends' setters, whether any traces."""
    if STATE["on"]:
        setters, tracing = native_context_setters(), _tracing()
        native = _native()
        native.set_channels(setters, provide=providing_wanted())
        native.set_tracing(tracing)


def module_hooks():
    """(pre, post): the global nn.Module forward hooks of the native side (C functions), for
    ``register_module_forward_pre_hook`` and ``register_module_forward_hook(..., always_call=True)``."""
    native = load()
    native.set_module_support()  # the core's scope engine: its C API
    return native.module_pre_hook, native.module_post_hook


# ------------------------------------------------------------ nn.Module.__call__ ----
# The C wrapper (csrc/module_frames.cc, module_call) replaces nn.Module.__call__: the module hooks' steps around the
# original call with no Python frame of ours (a Python wrapper and its *args/**kwargs repacking cost as much
# as the hooks). Dynamo cannot trace C: torch.compiler.substitute_in_graph shows it _traced_module_call, the
# original call alone, so nothing of ours enters a graph. That registration imports torch._dynamo, seconds
# of work no session start should pay: it happens once per process, when the program imports torch._dynamo
# itself (at once if it already has).
_original_call = None  # what the C wrapper calls, read by _traced_module_call (a global: Dynamo guards it)
_CALL = {"descriptor": None, "registered": False, "watching": None}


def module_call_wanted(torch) -> bool:
    """Whether the C wrapper can be used: Dynamo can be shown its Python equivalent (torch 2.5 and newer),
    and ``PROTON_TORCH_MODULE_CALL`` is not ``python``."""
    if os.environ.get("PROTON_TORCH_MODULE_CALL", "").strip().lower() == "python":
        return False
    return callable(getattr(getattr(torch, "compiler", None), "substitute_in_graph", None))


def module_call(original):
    """The C ``nn.Module.__call__`` around ``original``: a method descriptor of nn.Module, one per process."""
    global _original_call
    import torch

    native = load()
    descriptor = _CALL["descriptor"] = native.module_call_descriptor(torch.nn.Module, original)
    _original_call = original
    native.set_module_call(True)
    _when_dynamo_imported(_register_with_dynamo)
    return descriptor


def _traced_module_call(self, *args, **kwargs):
    """What Dynamo traces in place of the C ``nn.Module.__call__``: the original call alone."""
    return _original_call(self, *args, **kwargs)


def _register_with_dynamo() -> None:
    if _CALL["registered"]:
        return
    _CALL["registered"] = True
    import torch

    try:
        torch.compiler.substitute_in_graph(_CALL["descriptor"], skip_signature_check=True)(_traced_module_call)
    except Exception as exc:  # noqa: BLE001 - a torch whose Dynamo refuses it: eager runs on, compiles may break
        warn(f"hook='torch': torch.compile cannot be shown proton's nn.Module.__call__ ({type(exc).__name__}: "
             f"{str(exc).splitlines()[0] if str(exc) else ''}); a graph compiled during a session may break at "
             "module calls: set PROTON_TORCH_MODULE_CALL=python to avoid it")


class _DynamoImportWatch:
    """A meta path finder that runs callbacks right after ``torch._dynamo`` has been imported, then leaves."""

    def __init__(self, callbacks) -> None:
        self.callbacks = callbacks

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch._dynamo":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        _CALL["watching"] = None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, callbacks = loader.exec_module, self.callbacks

        def exec_then_call(module):
            exec_module(module)
            for callback in callbacks:
                try:
                    callback()
                except Exception as exc:  # noqa: BLE001 - never into the program's own import
                    warn(f"hook='torch': after importing torch._dynamo: {type(exc).__name__}: {exc}")

        loader.exec_module = exec_then_call
        return spec


def _when_dynamo_imported(callback) -> None:
    module = sys.modules.get("torch._dynamo")
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        callback()
        return
    watch = _CALL["watching"]
    if watch is None:
        watch = _CALL["watching"] = _DynamoImportWatch([])
        sys.meta_path.insert(0, watch)
    if callback not in watch.callbacks:
        watch.callbacks.append(callback)


def start(shapes: bool = False) -> None:
    """Register the callbacks (``shapes``: input shapes in operator names)."""
    native = load()
    native.set_first_id(reserve_context_ids("torch", resolve))
    native.set_channels(native_context_setters(), provide=providing_wanted())
    native.set_tracing(_tracing())
    native.enable(shapes=bool(shapes), observe_all=observe_all_wanted())
    register_settler(native.settle)  # module frames kept natively become scopes before anything opens under them
    STATE["patched"] = _patch_backward(native)
    STATE["on"], STATE["shapes"] = True, bool(shapes)


def stop() -> None:
    """Remove the callbacks: operators cost nothing more (records open now still close)."""
    native = _native()
    native.set_module_call(False)  # code that kept the C nn.Module.__call__ now only calls the original
    if not STATE["on"]:
        return
    native.disable()
    unregister_settler(native.settle)
    if _tracing():
        drain()  # what a tracing session without hook="torch" saw while the callbacks ran
    else:
        native.take_events()
    _unpatch_backward(STATE["patched"])
    STATE["patched"] = []
    native.set_tracing(False)
    native.set_channels([])
    STATE["on"] = False


def active() -> bool:
    """Whether the callbacks are registered now."""
    return STATE["on"]


def drain() -> None:
    """Operator events kept for data="trace" sessions, into them (at a session's finalize)."""
    if not STATE["on"]:
        return
    events = _native().take_events()
    for ctx, tid, start_ns, end_ns in events:
        found = resolve(ctx)
        if found is not None:
            add_scope_event(found[0], found[1], tid, start_ns, end_ns)


# ------------------------------------------------------------ backward calls ----
# Autograd runs CUDA nodes on its own device threads, whose context knows nothing of the scopes
# the user opened around ``loss.backward()``. torch.autograd calls the engine through
# ``_engine_run_backward`` (recent releases; torch.compiler patches it the same way): around it, the
# calling thread's context is published for those threads (backward_enter/backward_exit).

def _patch_backward(native) -> list:
    try:
        import torch.autograd as autograd
        import torch.autograd.graph as graph
    except ImportError:
        return []
    original = getattr(graph, "_engine_run_backward", None)
    if original is None:
        return []
    enter, leave = native.backward_enter, native.backward_exit

    @functools.wraps(original)
    def _engine_run_backward(*args, **kwargs):
        token = enter()
        try:
            return original(*args, **kwargs)
        finally:
            leave(token)

    patched = []
    for module in (graph, autograd):
        if getattr(module, "_engine_run_backward", None) is original:
            module._engine_run_backward = _engine_run_backward
            patched.append((module, original, _engine_run_backward))
    return patched


def _unpatch_backward(patched) -> None:
    for module, original, wrapper in patched:
        if getattr(module, "_engine_run_backward", None) is wrapper:  # else someone wrapped ours: left alone
            module._engine_run_backward = original


def _after_fork_in_child() -> None:
    if STATE["on"]:
        _native().forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
register_internal_path(os.path.dirname(os.path.abspath(__file__)) + os.sep)
