"""Plugins' import-time steps: the entry-point group ``proton.on_import``, run once by ``import proton_core``.

A few preparations must happen before the program does anything else, long
before plugins load (at the first ``start()``): NVTX, for one, reads
``NVTX_INJECTION64_PATH`` at a library's first range.  A plugin names a
function taking no arguments in this group; the core calls each once, at
import, guarded: one that fails says so in one line and the import goes on.
The core names no plugin: what runs is what the installed distributions declare.
"""

from __future__ import annotations

from . import entry_points, log

GROUP = "proton.on_import"


def run() -> None:
    """Call every step of the group; a failing one (to load or to run) is one warning, never an error."""
    try:
        steps = entry_points.select(GROUP)
    except Exception as exc:  # unreadable distribution metadata must not break the import either
        log.warn(f"cannot read the {GROUP} entry points ({type(exc).__name__}: {_first_line(exc)}); "
                 "no plugin prepared anything at import")
        return
    for ep in steps:
        try:
            ep.load()()
        except Exception as exc:
            log.warn(f"the import-time step {ep.name!r} ({ep.value}) failed ({type(exc).__name__}: "
                     f"{_first_line(exc)}); going on without it")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "no message"
