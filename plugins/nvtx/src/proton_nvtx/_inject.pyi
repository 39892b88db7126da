"""The NVTX v3 injection library and its Python side (plugins/nvtx/csrc/inject.cc).

One file is both this module and the library ``NVTX_INJECTION64_PATH`` names. Keep in step with its
``kMethods`` table (tests/test_contract_stubs.py compares).
"""

from typing import Callable

def configure(on: bool, cpu_time: bool, domain_prefix: bool, keep_ids: bool = False) -> None:
    """What pushes do from now on: record or not, measure CPU time, prefix domain names, keep range ids."""

def set_bridge(push: Callable[[str], int] | None, pop: Callable[[int], bool] | None, first_id: int, /) -> None:
    """Ranges on GIL-holding threads through the core's scope engine (its C API, else push/pop); native ids
    from ``first_id``, the range the core reserved."""

def probe(on: bool, /) -> None:
    """Count pushes that reach the library while off (``stats()['probe_hits']``)."""

def set_channels(capsules: list[object], /) -> int:
    """The running backends' native context setters (``proton.native_context.v1`` capsules); how many."""

def resolve(id: int, /) -> tuple[int, str] | None:
    """(parent id, name) of one of this library's context ids, or None."""

def take() -> tuple[list[tuple[int, int, int]], list[tuple[int, str, int, int, int]]]:
    """([(ctx, count, cpu ns)], [(ctx, name, thread id, start ns, end ns)]): native ranges' time and events."""

def stats() -> dict[str, int]:
    """Counters: injections, probe_hits, misnested_pops, unbalanced_pops, python_errors, native_pushes, ..."""

def reset_stats() -> None:
    """Zero the counters (tests)."""
