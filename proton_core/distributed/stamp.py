"""What a written profile says about where it came from: the root metadata's ``distributed``, ``part``, ``final``.

``distributed`` follows one schema (readers such as ``proton-view``'s merge rely on it)::

    {"rank": int, "world_size": int, "local_rank": int|None, "node_rank": int|None, "host": str,
     "pid": int, "device": int|None, "run_id": str, "launcher": "torchrun"|"slurm"|"mpi"|"env",
     "backend": str|None}

beside ``"part": N`` (None for a whole-run file) and ``"final"``: True for the file a session writes when it
ends (its last part under periodic writing), False for a part written while it ran, so a reader tells a
rank that finished from one that died after its last part.  Written only where a rank is known:
single-process files are unchanged.  The write in progress is held in a context variable set by
:mod:`proton_core.output`, so every sink reads the same facts.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import socket
import sys

from . import identity, run_id

_WRITING: contextvars.ContextVar = contextvars.ContextVar("proton_write", default=None)


@contextlib.contextmanager
def writing(part: int | None, final: bool):
    """The write in progress is ``part`` (None: the whole run) and ``final`` or not."""
    token = _WRITING.set((part, final))
    try:
        yield
    finally:
        _WRITING.reset(token)


def device(profile) -> int | None:
    """The device this rank ran on: the one device its kernels ran on, else torch's current CUDA device."""
    ids = {i for found in getattr(profile.tree, "device_ids", {}).values() for i in found}
    if len(ids) == 1:
        return int(next(iter(ids)))
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:
        pass
    return None


def record(profile, who: identity.Identity) -> dict:
    """The ``distributed`` record of ``profile`` written by the process ``who``."""
    return {"rank": who.rank, "world_size": who.world_size, "local_rank": who.local_rank,
            "node_rank": who.node_rank, "host": socket.gethostname(), "pid": os.getpid(),
            "device": device(profile), "run_id": run_id.run_id(), "launcher": who.launcher,
            "backend": who.backend}


def metadata(profile) -> dict:
    """The root metadata keys for ``profile``'s write now; {} outside a multi-process job."""
    who = identity.current()
    if who is None:
        return {}
    part, final = _WRITING.get() or (None, True)
    return {"distributed": record(profile, who), "part": part, "final": final}


def metadata_wanted() -> bool:
    """Whether writes now carry the keys (a rank is known); cheap: no host or clock lookups."""
    return identity.current() is not None
