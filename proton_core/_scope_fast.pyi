"""proton.scope's enter and exit in C (csrc/scope_fast.c) and the scope engine's C API (csrc/engine.c).

Optional: ``proton_core.scope`` falls back to its Python path where this extension was not built.
Keep in step with the method table at the end of csrc/scope_fast.c (tests/test_contract_stubs.py compares).
"""

from types import TracebackType
from typing import Any, Mapping

from typing_extensions import Self, disjoint_base

#: The C API capsule (``proton_core/include/proton_core/scope_api.h``): other extensions import it, Python does not.
_C_API: object

@disjoint_base  # a C type with its own layout: no class inherits from it and another such type
class ScopeBase:
    """Base class of ``proton_core.scope.scope``: its constructor, ``__enter__`` and ``__exit__`` in C."""

    name: str
    metrics: Mapping[str, Any] | None
    _ids: dict[int, int] | None
    def __init__(self, name: str, metrics: Mapping[str, Any] | None = None) -> None: ...
    def __enter__(self) -> Self:
        """Open the scope on this thread."""
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        """Close the scope on this thread."""

def configure_engine(objects: dict[str, Any] | None, /) -> None:
    """The core's objects behind the C API (``proton_core.scope``'s engine objects); None switches it off."""

def engine_counts() -> dict[str, int]:
    """C API calls taken natively / handed to Python / recalled: scope_fast, scope_slow, close_op_fast, ..."""

def capi(function: str, argument: Any = None, resolve: Any = None, /) -> Any:
    """One call through the C API's table, as an extension makes it (tests): ``capi("open_scope", "name")``."""

def configure(objects: dict[str, Any] | None, /) -> None:
    """The plain scope path in C (``proton_core.scope.scope_objects()``); None sends every call to Python."""

def counts() -> dict[str, int]:
    """Calls taken here (enter_fast, exit_fast) and handed to Python (enter_slow, exit_slow), for tests."""

def enter_scope(name: str, *, triton_op: bool = False, metrics: Mapping[str, Any] | None = None) -> int:
    """Open a scope (or, with triton_op, an op) on this thread; its context id (-1: profiling off)."""

def exit_scope(name: str | None = None, *, triton_op: bool = False, metrics: Mapping[str, Any] | None = None) -> int:
    """Close the innermost scope (or the op); ``name``, if given, must match it. The closed scope's id."""
