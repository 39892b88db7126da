"""``hook="torch"``: aten operators and nn.Module paths above each kernel.

Why a ``TorchDispatchMode`` (and not ``torch.overrides``/RecordFunction):
the dispatch mode sees exactly the aten operators that reach the backend
kernels (``aten::addmm``, ``aten::mm``, ``aten::add_`` ...), after autograd
and composite decomposition, including the backward operators the autograd
engine runs; ``__torch_function__`` modes only see Python-level calls and
miss backward; RecordFunction callbacks are not reachable from Python
without the Kineto profiler.  Each operator becomes a core scope around the
call, so the kernels it launches land under it.  Backward operators are
grouped under their autograd node (``AddmmBackward0/aten::mm``).

nn.Module calls add the module path (``Net`` / ``fc1``) through global
forward pre/post hooks (post hook with ``always_call`` so an exception in
forward still closes the scope).

Limits: the mode is entered on the thread that called ``proton.start``
(dispatch modes are thread local; autograd threads inherit it for backward
work started from that thread).  It costs one Python call per aten
operator: see the README for figures.
"""

from __future__ import annotations

import threading
import weakref

from proton_core.plugin_api import ACTIVITY, ContextSource, ProtonError, SharedInstall, enter_scope, exit_scope
from proton_core.plugin_api import scope_depth


def _torch():
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        raise ProtonError("hook='torch' needs PyTorch: pip install torch") from None
    from torch.nn.modules import module as nn_module

    if not hasattr(nn_module, "register_module_forward_pre_hook"):
        raise ProtonError(f"hook='torch' needs PyTorch 2.1 or newer (global module hooks); found {torch.__version__}")
    return torch, TorchDispatchMode, nn_module


_op_names: dict = {}


def op_name(func) -> str:
    """``aten::mm`` for ``torch.ops.aten.mm.default`` (overload dropped), cached per operator."""
    name = _op_names.get(func)
    if name is None:
        schema = getattr(func, "_schema", None)
        name = schema.name if schema is not None else str(func)
        _op_names[func] = name
    return name


def _make_mode(torch, base):
    current_node = getattr(torch._C, "_current_autograd_node", lambda: None)

    class ProtonOpMode(base):
        """Opens a scope per aten operator (under its autograd node in backward)."""

        enabled = True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if not self.enabled or not ACTIVITY.any:
                return func(*args, **kwargs)
            name = op_name(func)
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


def _install() -> dict:
    torch, base, nn_module = _torch()
    mode = _make_mode(torch, base)()
    handles = [nn_module.register_module_forward_pre_hook(module_pre_hook)]
    try:
        handles.append(nn_module.register_module_forward_hook(module_post_hook, always_call=True))
        mode.__enter__()
    except Exception:
        for h in handles:
            h.remove()
        raise
    return {"mode": mode, "handles": handles, "thread": threading.get_ident(), "torch": torch}


def _uninstall(state: dict) -> None:
    for h in state["handles"]:
        h.remove()
    mode = state["mode"]
    mode.enabled = False
    torch = state["torch"]
    get_mode = getattr(torch._C, "_get_dispatch_stack_at", None)
    length = getattr(torch._C, "_len_torch_dispatch_stack", None)
    on_top = (threading.get_ident() == state["thread"] and get_mode is not None and length is not None
              and length() > 0 and get_mode(length() - 1) is mode)
    if on_top:
        mode.__exit__(None, None, None)
    # Otherwise (finalized on another thread, or a mode entered after ours is still
    # open) the mode stays on its thread's stack, disabled: it only passes calls through.


MODE = SharedInstall(_install, _uninstall)


class TorchSource(ContextSource):
    """Enters the dispatch mode and the module hooks while a session uses ``hook="torch"``."""

    name = "torch"

    def install(self, session) -> None:
        MODE.acquire()

    def uninstall(self, session) -> None:
        MODE.release()
