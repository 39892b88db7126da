"""hook="triton"'s launch hooks in C (plugins/frameworks/csrc/triton_fast.c).

The same steps as ``proton_frameworks.triton_hook.launch_enter``/``launch_exit``, through the core's scope
engine (its C API), without a Python frame on a repeated launch. Keep in step with its ``methods`` table
(tests/test_contract_stubs.py compares).
"""

from typing import AbstractSet, Any, Callable

def launch_enter(meta: Any, /) -> None:
    """Triton's enter hook (``triton_hook.launch_enter``, natively); ``meta`` is Triton's launch metadata."""

def launch_exit(meta: Any, /) -> None:
    """Triton's exit hook (``triton_hook.launch_exit``, natively)."""

def configure(
    reserved_keys: AbstractSet[str], general_enter: Callable[[dict[str, Any], tuple[Any, ...]], Any], /
) -> None:
    """Triton's own metadata keys and the Python remainder of an enter (``triton_hook._enter_general(data,
    items)``); takes the core's scope engine (ImportError where the core was built without it)."""

def stats() -> dict[str, int]:
    """Enter hook calls per path since import: enter_fast (the core's cached step), enter_slow (Python code)."""
