"""``hook="torch"``: aten operators and nn.Module paths above each kernel.

Two ways to see operators, chosen when the first ``hook="torch"`` session starts:

* **Native** (this distribution's extension, ``proton_torch._C``, built against the installed
  torch): RecordFunction callbacks in C++ open a context per operator and per autograd node, as
  Kineto observes them, with no Python per operator; backward functions are placed under the
  forward operator that created them (sequence numbers).  Used when the extension loads and a
  running backend offers a native context setter (the CUPTI backend does; the host backend,
  which sees no kernels, does not).
* **Python** (the fallback): a ``TorchDispatchMode`` sees the aten operators that reach the
  backend kernels, after autograd and composite decomposition, including the backward operators
  the autograd engine runs; each becomes a core scope around the call, backward operators grouped
  under their autograd node (``AddmmBackward0/aten::mm``).  One Python call per operator.  The
  mode is entered on the thread that called ``proton.start`` (dispatch modes are thread local;
  autograd threads inherit it for backward work started from that thread).

``PROTON_TORCH_NATIVE``: ``0`` forces the Python mode, ``1`` requires the native one (an error
saying why when it cannot run), unset (``auto``) uses the native one where it can and says once,
on stderr, why not where it cannot be loaded.  ``PROTON_TORCH_SHAPES=1`` puts the operators'
input shapes into their names (``aten::mm[64x128,128x256]``), in either mode.

nn.Module calls add the module path (``Net`` / ``fc1``) through a wrapper of
``nn.Module.__call__`` (:class:`ModuleCallPatch`; the exit runs in ``finally``, so an exception
in forward still closes the scope): one Python call per module call, not per operator, and no
global module hook, which would send every module call down torch's slow path.  In native mode
the wrapper is written in C (``proton_torch.ops.module_call``: no Python frame per module call)
where torch can show Dynamo a Python equivalent (``torch.compiler.substitute_in_graph``);
``PROTON_TORCH_MODULE_CALL=python`` keeps the Python wrapper.  In native mode a module called inside an operator or an
autograd node (activation checkpointing recomputes forward in backward) opens natively there.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref

from proton_core.plugin_api import ACTIVITY, ContextSource, ProtonError, SharedInstall, enter_scope, exit_scope
from proton_core.plugin_api import native_context_setters, scope_depth, warn

from . import ops
from .native import NativeUnavailable


def _torch():
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        raise ProtonError("hook='torch' needs PyTorch: pip install torch") from None
    from torch.nn.modules import module as nn_module

    if not hasattr(nn_module, "register_module_forward_pre_hook"):
        raise ProtonError(f"hook='torch' needs PyTorch 2.1 or newer; found {torch.__version__}")
    return torch, TorchDispatchMode, nn_module


def _flag(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip().lower()


def shapes_wanted() -> bool:
    """``PROTON_TORCH_SHAPES=1``: input shapes in operator names (read when the hook installs)."""
    return _flag("PROTON_TORCH_SHAPES") in ("1", "true", "yes", "on")


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        warn(message)


def native_ops():
    """``proton_torch.ops`` when the native path can run now, else None (saying why once, where useful)."""
    flag = _flag("PROTON_TORCH_NATIVE", "auto")
    if flag in ("0", "false", "no", "off"):
        return None
    required = flag in ("1", "true", "yes", "on")
    reason = None
    try:
        ops.load()
        ops.module_hooks()  # checks that the core's scope stack protocol is one the extension knows
    except (NativeUnavailable, ValueError) as exc:
        reason = str(exc)
    if reason is not None:
        if required:
            raise ProtonError(f"PROTON_TORCH_NATIVE=1, but {reason}")
        _say_once(f"hook='torch' uses its Python dispatch mode (one Python call per operator): {reason}")
        return None
    if not native_context_setters():
        if required:
            raise ProtonError("PROTON_TORCH_NATIVE=1, but no running backend offers a native context setter "
                              "(the cupti backend does; the host backend does not)")
        return None  # the host backend: no kernels to attribute; the Python mode's scopes are what it shows
    return ops


# ----------------------------------------------------------------- shapes ----
def _dims(t) -> str:
    try:
        if t.is_nested:
            return "nested"
        sizes = t.shape
    except Exception:  # noqa: BLE001 - a tensor subclass without sizes
        return "?"
    return "x".join(str(s) if isinstance(s, int) else "?" for s in sizes) if len(sizes) else "()"


def shapes_suffix(args, tensor_type) -> str:
    """``[5x8,8x16]``: the tensor arguments in order, a list of them as ``(4x8;4x8)`` (as the native side)."""
    parts = []
    for a in args:
        if isinstance(a, tensor_type):
            parts.append(_dims(a))
        elif isinstance(a, (list, tuple)) and any(isinstance(x, tensor_type) for x in a):
            parts.append("(" + ";".join(_dims(x) if isinstance(x, tensor_type) else "-" for x in a) + ")")
    text = "[" + ",".join(parts) + "]"
    return text if len(text) <= 1024 else text[:1024] + "..."


# ------------------------------------------------------------ Python mode ----
_op_names: dict = {}


def op_name(func) -> str:
    """``aten::mm`` for ``torch.ops.aten.mm.default`` (overload dropped), cached per operator."""
    name = _op_names.get(func)
    if name is None:
        schema = getattr(func, "_schema", None)
        name = schema.name if schema is not None else str(func)
        _op_names[func] = name
    return name


def _make_mode(torch, base, shapes: bool):
    current_node = getattr(torch._C, "_current_autograd_node", lambda: None)
    tensor_type = torch.Tensor

    class ProtonOpMode(base):
        """Opens a scope per aten operator (under its autograd node in backward)."""

        enabled = True
        proton_owned = True  # (found by _drop_stale_modes once disabled)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if not self.enabled or not ACTIVITY.any:
                return func(*args, **kwargs)
            name = op_name(func)
            if shapes:
                name += shapes_suffix(args, tensor_type)
            node = current_node()
            grad = node.name() if node is not None else None
            if grad is not None and enter_scope(grad) == -1:
                return func(*args, **kwargs)
            if enter_scope(name) == -1:
                return func(*args, **kwargs)
            try:
                return func(*args, **kwargs)
            finally:
                exit_scope(name)
                if grad is not None:
                    exit_scope(grad)

    return ProtonOpMode


# --------------------------------------------------------------- modules ----
class _ModuleStack(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # (module, scope name or None when no scope was opened)


_modules = _ModuleStack()
_child_names: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def module_name(parent, module) -> str:
    """The attribute name of ``module`` in ``parent`` (cached), else its class name."""
    if parent is not None:
        try:
            names = _child_names.setdefault(parent, {})
        except TypeError:  # not weak-referenceable
            names = {}
        name = names.get(id(module))
        if name is not None and parent._modules.get(name) is module:
            return name
        for child_name, child in parent._modules.items():
            if child is module:
                names[id(module)] = child_name
                return child_name
    return type(module).__name__


def module_pre_hook(module, args) -> None:
    stack = _modules.stack
    name = None
    if ACTIVITY.any:
        name = module_name(stack[-1][0] if stack else None, module)
        if enter_scope(name) == -1:
            name = None
    stack.append((module, name))


def module_post_hook(module, args, output) -> None:
    stack = _modules.stack
    if not stack or stack[-1][0] is not module:
        return  # its pre hook ran before the hooks were installed
    _, name = stack.pop()
    if name is not None and scope_depth():
        exit_scope(name)


# ------------------------------------------------------------ module calls ----
class ModuleCallPatch:
    """Module paths from a wrapper of ``nn.Module.__call__`` instead of global forward hooks.

    Any global module hook sends every module call down torch's general ``_call_impl`` path,
    which costs far more than the hooks themselves (an empty Python hook pair made a ``Linear``
    call 17 -> 31 us on CPU; see docs/decisions/0049-module-paths-from-a-wrapper-of-module-call.md); a wrapper around the call keeps torch on its
    fast path for a Python call and our two hook calls.  ``post`` runs in ``finally``, as an
    ``always_call`` hook would, and only after its ``pre`` ran.  While torch.compile traces, the
    wrapper is the original call (``compiling()`` is a constant there), so nothing of ours enters
    a graph.  ``remove`` restores the original unless someone replaced the wrapper since.
    ``native_call(original)``, where given, makes the wrapper instead (the native mode's C one,
    which runs ``pre``/``post``'s steps itself and is shown to Dynamo as the original call).
    """

    def __init__(self, cls, pre, post, compiling, native_call=None) -> None:
        self.cls, self.original, self.pre, self.post = cls, cls.__dict__["__call__"], pre, post
        if native_call is not None:  # the same steps in C (proton_torch.ops.module_call): installed as it is
            self.wrapper = cls.__call__ = native_call(self.original)
            return
        original = self.original
        activity = ACTIVITY

        def __call__(module, *args, **kwargs):
            if not activity.any or compiling():
                return original(module, *args, **kwargs)
            pre(module, args)
            try:
                return original(module, *args, **kwargs)
            finally:
                post(module, args, None)

        __call__.__wrapped__ = original
        __call__.__doc__ = getattr(original, "__doc__", None)
        self.wrapper = __call__
        cls.__call__ = __call__

    def remove(self) -> None:
        if self.cls.__dict__.get("__call__") is self.wrapper:
            self.cls.__call__ = self.original
        # Dynamo keeps the method it found at its first import as "the unpatched __call__" (it then
        # skips tracing __call__ for modules that use it): first imported during a session, it
        # holds our wrapper; give it the original back, or later compiles trace __call__ in full.
        for name in _DYNAMO_HOLDERS:
            holder = sys.modules.get(name)
            if holder is not None and getattr(holder, "unpatched_nn_module_call", None) is self.wrapper:
                holder.unpatched_nn_module_call = self.original


_DYNAMO_HOLDERS = ("torch._dynamo.utils", "torch._dynamo.variables.nn_module")


def _compiling(torch):
    """Dynamo's "am I tracing" test (a constant True to Dynamo, False in eager), or one that is always
    False. ``is_dynamo_compiling`` is one Python call returning False in eager; ``is_compiling`` (the
    fallback for older torch) costs two (it asks ``torch.jit.is_scripting`` first), on every module call."""
    compiler = getattr(torch, "compiler", None)
    for name in ("is_dynamo_compiling", "is_compiling"):
        test = getattr(compiler, name, None)
        if callable(test):
            return test
    return lambda: False


# --------------------------------------------------------------- install ----
def _install() -> dict:
    torch, base, nn_module = _torch()
    _drop_stale_modes(torch)
    shapes = shapes_wanted()
    ops = native_ops()
    # Module paths: these Python hooks, or their C twins (the same names and scopes, at a fraction of the cost),
    # called from a C nn.Module.__call__ where Dynamo can be shown a Python equivalent of it
    pre, post = (module_pre_hook, module_post_hook) if ops is None else ops.module_hooks()
    native_call = ops.module_call if ops is not None and ops.module_call_wanted(torch) else None
    handles = [ModuleCallPatch(nn_module.Module, pre, post, _compiling(torch), native_call)]
    mode = None
    try:
        if ops is not None:
            ops.start(shapes=shapes)
        else:
            mode = _make_mode(torch, base, shapes)()
            mode.__enter__()
    except Exception:
        for h in handles:
            h.remove()
        if ops is not None:
            ops.stop()
        raise
    return {"mode": mode, "ops": ops, "handles": handles, "thread": threading.get_ident(), "torch": torch,
            "shapes": shapes}


def _uninstall(state: dict) -> None:
    for h in state["handles"]:
        h.remove()
    if state["ops"] is not None:
        state["ops"].stop()
        _drop_stale_modes(state["torch"])
        return
    mode = state["mode"]
    mode.enabled = False
    if threading.get_ident() == state["thread"]:
        _drop_stale_modes(state["torch"])
    # Otherwise (finalized on another thread, or a mode entered after ours is still open) the mode
    # stays on its thread's stack, disabled: it only passes calls through, until a later session
    # start or end on that thread finds it on top and exits it.


def _drop_stale_modes(torch) -> None:
    """Exit our disabled modes from the top of this thread's dispatch stack. Left there, one would make
    torch.compile see a dispatch mode (graph breaks, or an error with fullgraph=True)."""
    get_mode = getattr(torch._C, "_get_dispatch_stack_at", None)
    length = getattr(torch._C, "_len_torch_dispatch_stack", None)
    if get_mode is None or length is None:
        return
    while length() > 0:
        top = get_mode(length() - 1)
        if not getattr(top, "proton_owned", False) or top.enabled:
            return
        top.__exit__(None, None, None)


MODE = SharedInstall(_install, _uninstall)


def current_mode() -> str | None:
    """``"native"`` or ``"python"`` while a ``hook="torch"`` session runs, else None."""
    state = getattr(MODE, "state", None)
    if not state:
        return None
    return "native" if state.get("ops") is not None else "python"


class TorchSource(ContextSource):
    """Turns operators and module calls into contexts while a session uses ``hook="torch"``."""

    name = "torch"

    def install(self, session) -> None:
        MODE.acquire()

    def uninstall(self, session) -> None:
        MODE.release()
