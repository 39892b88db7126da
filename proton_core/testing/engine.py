"""The scope engine's insides that tests of native plugins check (never for plugin code itself)."""

from __future__ import annotations


def launch_op_cache() -> tuple[dict, list]:
    """(the cached launch step's entries, [how many times they were emptied]): a test may empty the cache as the
    core does when it is full (``cache.clear(); clears[0] += 1``)."""
    from ..launch_ops import _CLEARS, _OPS

    return _OPS, _CLEARS


def engine_counts() -> dict[str, int]:
    """How the C API's calls ran since import: ``<function>_fast`` natively, ``_slow`` handed to Python,
    ``launch_recalled`` answered from a remembered hit; empty where the core's extension is not built."""
    try:
        from .. import _scope_fast
    except ImportError:
        return {}
    return _scope_fast.engine_counts()


def add_setter(setter) -> None:
    """Have ``setter(context_id)`` called with every context published from now on (until the next session
    starts or ends, which sets the running backends' setters again): a test's recorder of published ids."""
    from ..manager import MANAGER

    MANAGER.setters = (*MANAGER.setters, setter)
