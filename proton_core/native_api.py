"""What native plugins use beside :mod:`proton_core.plugin_api`: the scope engine's C API and the backends' C setters.

Python plugins never need this module.  An extension that opens scopes or ops from C or C++ includes
``<proton_core/scope_api.h>`` (the folder :func:`get_include` returns) and takes the function table from the
capsule :data:`SCOPE_API_CAPSULE` with ``ProtonScopeAPI_Import(version)``: it then never touches a core Python
object, so the core may change how it keeps scopes without breaking it.  Context ids that a plugin interns
itself (natively, without the GIL) come from a range the core reserves for it (:func:`reserve_context_ids`,
or the table's ``reserve_ids``).  Backends that can take the calling thread's context from C offer a capsule
named :data:`NATIVE_CONTEXT_CAPSULE` (:func:`native_context_setters` lists the running ones).
"""

from __future__ import annotations

import os

__all__ = ["SCOPE_API_CAPSULE", "NATIVE_CONTEXT_CAPSULE", "get_include", "reserve_context_ids",
           "native_context_setters"]

#: The capsule holding the scope engine's function table (``ProtonScopeAPI`` in scope_api.h).
SCOPE_API_CAPSULE = "proton_core._scope_fast._C_API"

#: The name of the capsule a backend's ``native_context`` attribute holds: a pointer to
#: ``struct { uint32_t version; void (*set)(uint64_t id); uint64_t (*get)(void);
#: void (*set_provider)(uint64_t (*provider)(uint64_t)); }`` whose ``set``/``get`` act on the
#: calling thread's context, callable from any thread without the GIL. ``set_provider`` is there
#: from version 2 on: with a provider set (``NULL`` removes it), the backend asks it, at each
#: launch and on the launching thread, which context the launch goes under, passing the one last
#: set; a source that opens its scopes lazily (the torch plugin's operators) names them only there.
NATIVE_CONTEXT_CAPSULE = "proton.native_context.v1"


def get_include() -> str:
    """The folder to add to a native plugin's include path for ``<proton_core/scope_api.h>``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def reserve_context_ids(owner: str, resolve) -> int:
    """The first of 2**40 context ids only ``owner`` uses (the same range again for the same owner), for ids a
    plugin interns itself; ``resolve(id)`` names one of them: ``(parent id, name)`` or None.  Such ids may be
    passed to backends' native setters and are spelled like the core's own scopes in every profile."""
    from .context import TREE

    return TREE.reserve(owner, resolve)


def native_context_setters() -> list:
    """Capsules (:data:`NATIVE_CONTEXT_CAPSULE`) of the running backends that offer one."""
    from .manager import MANAGER

    with MANAGER.lock:
        return [c for c in (getattr(s.backend, "native_context", None) for s in MANAGER.running) if c is not None]
