"""Which job this process belongs to, so ``ctl --run RUN_ID`` reaches every process of it.

The run id is the one the distributed layer writes into the rank files' metadata
(:func:`proton_core.distributed.run_id.run_id`, where it is installed), so ``ctl --run`` takes the id a
profile shows; without that package, the launcher's own id: ``PROTON_RUN_ID`` (what ``proton-profile``
sets for a job it starts), ``TORCHELASTIC_RUN_ID`` (torchrun), ``SLURM_JOB_ID`` (Slurm, with the step
where there is one); a process of no job is a run of its own, ``pid<P>``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re

#: Launcher variables read where :mod:`proton_core.distributed` is not installed, first set wins.
ENV_VARIABLES = ("PROTON_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")

#: The longest directory name a run gets (socket paths are limited to about 107 bytes in all).
MAX_NAME = 40

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _from_distributed() -> str | None:
    """The run id :mod:`proton_core.distributed` gives the rank files, where that package is installed."""
    try:
        module = importlib.import_module("proton_core.distributed.run_id")
    except ImportError:
        return None
    function = getattr(module, "run_id", None)
    if not callable(function):
        return None
    try:
        value = function()
    except Exception:  # its own detection failed: the launcher's variables still name the job
        return None
    return str(value) if value else None


def _from_environment() -> str | None:
    for variable in ENV_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            if variable == "SLURM_JOB_ID" and os.environ.get("SLURM_STEP_ID", "").strip():
                value = f"{value}.{os.environ['SLURM_STEP_ID'].strip()}"
            return value
    return None


def current() -> str:
    """This process's run id (``pid<P>`` where it belongs to no job)."""
    return _from_distributed() or _from_environment() or f"pid{os.getpid()}"


def directory_name(run_id: str) -> str:
    """The run's directory name: the id where it is short and plain, else a readable stem and a hash of it,
    so two ids never share a directory and no id escapes the control directory (``..``, ``/``)."""
    safe = _SAFE.sub("_", run_id)
    if safe == run_id and 0 < len(run_id) <= MAX_NAME and run_id not in (".", ".."):
        return run_id
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{safe[:MAX_NAME - 13].strip('.') or 'run'}-{digest}"
