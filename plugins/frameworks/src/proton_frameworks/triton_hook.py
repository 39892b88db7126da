"""``hook="triton"``: Triton's launch hooks turn ``launch_metadata`` into an op.

Triton calls an enter hook before and an exit hook after each kernel launch,
with a ``LazyDict`` whose ``get()`` runs the kernel's
``launch_metadata(grid, metadata, args)`` function.  The enter hook opens a
core *op* named after the returned ``name`` (renaming the next kernel node)
carrying every other numeric key (``flops8/16/32/64``, ``bytes``, ...) as a
metric of that node; the exit hook closes it.  This is the one place Python
runs per launch, so the hooks do as little as possible: nothing at all while
no session is active, and no op for kernels without ``launch_metadata``
(their node already has the kernel's own name).

Where the hooks live depends on the Triton version (:func:`hook_owner`):
``triton.knobs.runtime`` (3.3+; ``HookChain`` objects from 3.6) or
``CompiledKernel``'s class attributes (3.0-3.2).  They are installed through
the one Triton hook manager (:mod:`.triton_hooks`, priority
:data:`~.triton_hooks.LAUNCH_METADATA_PRIORITY`, as upstream's launch hook):
other hooks keep running (a single-callable hook already installed by the user
runs outside ours) and are exactly as before once the last session ends.

The hooks Triton calls are native (``proton_frameworks._triton_fast``, C) where
that extension was built: a repeated launch (same metadata, same context, no
session change) is then the core's cached step (``open_counted_op``) done in C,
without a Python frame of ours; every other launch runs the Python code below,
so both behave the same.  ``PROTON_TRITON_NATIVE=0`` (read when the hooks are
installed, i.e. when the first ``hook="triton"`` session starts) installs the
Python :func:`launch_enter`/:func:`launch_exit` instead.
"""

from __future__ import annotations

import importlib
import numbers
import os
import sys

from proton_core.plugin_api import (
    ACTIVITY,
    ContextSource,
    ProtonError,
    SharedInstall,
    add_numbers_here,
    close_op,
    close_scope,
    enter_scope,
    metric_name,
    open_counted_op,
    open_op,
    open_scope,
    warn,
)
from proton_core.plugin_api import thread_state

from .launch_hook import COMPUTE_METADATA_SCOPE_NAME, State as LAUNCH, next_id as next_launch_id
from .triton_hooks import LAUNCH_METADATA_PRIORITY, MANAGER

_THREAD = thread_state()  # attribute reads, not calls: these hooks run on every launch

#: Keys Triton itself puts in the launch metadata; never metrics.
RESERVED_KEYS = frozenset({"name", "function", "stream"})
#: The largest metric value (the core's rule, decision 0180): past it the general path refuses it in one line.
_MAX = sys.float_info.max  # proton_core.metrics.MAX_VALUE, which the plugin API does not export


def _metrics_of(data: dict) -> dict:
    """Numeric (or 0-d tensor) values of the launch metadata, except Triton's own keys."""
    out = {}
    for key, value in data.items():
        kind = type(value)
        if kind is int or kind is float:  # the common case, without ABC isinstance checks
            if key not in RESERVED_KEYS:
                out[key] = value
        elif key in RESERVED_KEYS or value is None or kind is bool:
            continue
        elif isinstance(value, numbers.Number) or (hasattr(value, "shape") and hasattr(value, "dtype")):
            out[key] = value
    return out


def _plan(keys: tuple) -> list:
    """(key, parsed name or None) of the metric keys of one launch_metadata key set, once per key set.

    None: not a valid metric name; fine for a value that is no metric (a string), which the
    general path ignores, and an error there for a number."""
    plan = []
    for key in keys:
        if key not in RESERVED_KEYS:
            try:
                plan.append((key, metric_name(key)))
            except ProtonError:
                plan.append((key, None))
    _PLANS[keys] = plan
    return plan


#: launch_metadata's key tuple -> its plan: a kernel returns the same keys at every launch
_PLANS: dict = {}


#: launch_metadata's items -> ((metric name, value), ...) when every metric is a plain non-negative
#: finite int/float (one tuple object per distinct dict, which the core counts per launch instead of
#: merging), or False: take the general path
_CHECKED: dict = {}
_MAX_CHECKED = 65536


def _plain_numbers(items: tuple):
    """The checked numbers of one launch_metadata dict's items, or None (the general path explains)."""
    found = _CHECKED.get(items)
    if found is None:
        keys = tuple(key for key, _ in items)
        found = _check(keys, dict(items))
        if len(_CHECKED) >= _MAX_CHECKED:  # values that change at every launch: stay bounded
            _CHECKED.clear()
        _CHECKED[items] = found
    return found if found is not False else None


def _check(keys: tuple, data: dict):
    plan = _PLANS.get(keys) or _plan(keys)
    out = []
    for key, name in plan:
        value = data[key]
        kind = type(value)
        if (kind is int or kind is float) and 0 <= value <= _MAX and name is not None:
            out.append((name, value))
        elif value is not None and kind is not bool:
            return False  # a tensor, another number type or a bad value: the general path decides
    return tuple(out)


def _metadata_of(meta) -> dict:
    """``meta.get()``, which runs the kernel's launch_metadata, inside the scope ``__proton_launch_metadata``:
    kernels it launches itself (``x.sum().item()``) are filed there, where viewers hide them, not among the
    program's (upstream's rule).  Metadata another hook evaluated already runs nothing: no scope then."""
    if not getattr(meta, "extras", True):
        return meta.get()
    scope = open_scope(COMPUTE_METADATA_SCOPE_NAME)
    try:
        return meta.get()
    finally:
        close_scope(scope)


def launch_enter(meta) -> None:
    """Triton's enter hook: evaluate launch_metadata, open an op with its name and metrics."""
    if not ACTIVITY.any:
        return
    if LAUNCH.ids:
        next_launch_id()
    # A kernel without launch_metadata: its LazyDict holds only Triton's keys
    # and nothing to evaluate; its node is already named after the kernel.
    if not getattr(meta, "extras", True) and RESERVED_KEYS.issuperset(meta.data):
        return
    if LAUNCH.filter is not None and not LAUNCH.filter.allows(meta.data.get("name")):
        return  # LaunchHook.configure(include=/exclude=): its launch_metadata does not run
    data = _metadata_of(meta)
    items = tuple(data.items())
    try:
        if open_counted_op(items):  # this metadata was opened here before: one cached step
            return
    except TypeError:  # an unhashable value (a list): the general path explains it
        items = None
    _enter_general(data, items)


def _enter_general(data, items) -> None:
    """``launch_enter`` after the cached step declined (``items``: the metadata's items, None if unhashable).

    The native hook (``_triton_fast``) calls this too, with the same arguments, whenever its own copy
    of the cached step does not apply."""
    name = data.get("name")
    try:
        plain = _plain_numbers(items) if items is not None and type(name) is str and name else None
        if plain is None:  # tensors, bad values or a bad name: checked and explained by enter_scope
            enter_scope(name, triton_op=True, metrics=_metrics_of(data) or None)
            return
    except ProtonError as exc:
        raise ProtonError(f"launch_metadata of Triton kernel {name!r}: {exc}") from None
    if open_counted_op(items, name, plain):
        return
    open_op(name)  # a python-context session, or nothing to count: open and add the general way
    if plain:
        add_numbers_here(plain)


def launch_exit(meta) -> None:
    """Triton's exit hook: close the op the enter hook opened, if any."""
    if _THREAD.op is not None:
        close_op()


def _load_native():
    """``proton_frameworks._triton_fast`` on the core's scope engine (its C API), or None (not built: no
    compiler at install; or the core has no C API or an older one: said once)."""
    try:
        from . import _triton_fast
    except ImportError:
        return None
    try:
        _triton_fast.configure(RESERVED_KEYS, _enter_general)
    except (ImportError, TypeError, ValueError) as exc:
        warn(f"hook='triton' uses its Python launch hooks: the native ones do not fit this proton_core ({exc}); "
             f"reinstall proton-profiler-frameworks")
        return None
    return _triton_fast


_NATIVE = _load_native()


_PYTHON_ONLY = False


def hooks() -> tuple:
    """The (enter, exit) callables installed for Triton: the native ones unless ``PROTON_TRITON_NATIVE=0``,
    they are not built or :func:`use_python_hooks` was called, else :func:`launch_enter`/:func:`launch_exit`
    (same behaviour, slower)."""
    if _NATIVE is not None and not _PYTHON_ONLY and os.environ.get("PROTON_TRITON_NATIVE", "1").strip() != "0":
        return _NATIVE.launch_enter, _NATIVE.launch_exit
    return launch_enter, launch_exit


def use_python_hooks() -> None:
    """From now on install the Python hooks (what a launch filter and launch ids need: :mod:`.launch_hook`);
    hooks installed now are swapped at once."""
    global _PYTHON_ONLY
    if _PYTHON_ONLY:
        return
    _PYTHON_ONLY = True
    HOOKS.reinstall()


def hook_owner():
    """Where this Triton keeps its launch hooks; a one-line ProtonError where the API differs."""
    try:
        triton = importlib.import_module("triton")
    except ImportError:
        raise ProtonError("hook='triton' needs Triton: pip install triton (3.0 or newer)") from None
    version = getattr(triton, "__version__", "unknown")
    try:
        knobs = importlib.import_module("triton.knobs")
    except ImportError:
        knobs = None
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None and hasattr(runtime, "launch_enter_hook") and hasattr(runtime, "launch_exit_hook"):
        return runtime, version
    try:
        compiler = importlib.import_module("triton.compiler.compiler")
    except ImportError:
        compiler = None
    kernel = getattr(compiler, "CompiledKernel", None)
    if kernel is not None and hasattr(compiler, "LazyDict") and hasattr(kernel, "launch_enter_hook"):
        return kernel, version
    raise ProtonError(
        f"hook='triton' needs Triton 3.0 or newer (launch hooks that receive launch_metadata); "
        f"triton {version} has no such hooks: upgrade Triton or start without hook='triton'"
    )


def _install_hooks():
    owner, _ = hook_owner()
    ours_enter, ours_exit = hooks()
    return MANAGER.install(owner, "triton", LAUNCH_METADATA_PRIORITY,
                           {"launch_enter_hook": ours_enter, "launch_exit_hook": ours_exit})


def _uninstall_hooks(installed) -> None:
    installed.release()


HOOKS = SharedInstall(_install_hooks, _uninstall_hooks)


class TritonSource(ContextSource):
    """Installs the launch hooks while at least one session uses ``hook="triton"``."""

    name = "triton"

    def install(self, session) -> None:
        HOOKS.acquire()

    def uninstall(self, session) -> None:
        HOOKS.release()
