"""Which rank this process is: launcher variables at start, an initialised torch.distributed group at write.

Launchers export their numbering to every process they start; the first family found wins, most
specific first:

* torchrun / torch.distributed (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``GROUP_RANK``);
* MPI: Open MPI (``OMPI_COMM_WORLD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_NODE_RANK``), MPICH/Intel MPI/
  PMIx (``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``PMIX_RANK``), MVAPICH (``MV2_COMM_WORLD_*``),
  before Slurm because ``mpirun`` inside an allocation inherits the batch step's ``SLURM_PROCID=0``;
* Slurm (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``).

torch is never imported here: the process group is read only where the program imported
torch.distributed itself and initialised a group.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, replace

from ..after_import import when_imported


@dataclass(frozen=True)
class Identity:
    rank: int
    world_size: int
    local_rank: int | None
    node_rank: int | None
    launcher: str  # "torchrun", "slurm", "mpi" or "env" (RANK set by hand, or a process group alone)
    backend: str | None = None  # the process group's backend, known once a group is initialised


def _int(env, *names) -> int | None:
    for name in names:
        text = env.get(name, "").strip()
        if text:
            try:
                return int(text)
            except ValueError:
                continue
    return None


def from_environment(env=None) -> Identity | None:
    """The rank the launcher's variables give this process, or None outside a multi-process launcher."""
    env = os.environ if env is None else env
    rank = _int(env, "RANK")
    if rank is not None:
        launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") or env.get("TORCHELASTIC_RESTART_COUNT") else "env"
        return Identity(rank, _int(env, "WORLD_SIZE") or rank + 1, _int(env, "LOCAL_RANK"),
                        _int(env, "GROUP_RANK"), launcher)
    rank = _int(env, "OMPI_COMM_WORLD_RANK")
    if rank is not None:
        return Identity(rank, _int(env, "OMPI_COMM_WORLD_SIZE") or rank + 1,
                        _int(env, "OMPI_COMM_WORLD_LOCAL_RANK"), _int(env, "OMPI_COMM_WORLD_NODE_RANK"), "mpi")
    rank = _int(env, "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
    if rank is not None:
        slurm = _int(env, "SLURM_PROCID") == rank and _int(env, "SLURM_NTASKS", "SLURM_NPROCS") is not None
        return Identity(rank, _int(env, "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS") or rank + 1,
                        _int(env, "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "SLURM_LOCALID"),
                        _int(env, "SLURM_NODEID"), "slurm" if slurm else "mpi")
    rank = _int(env, "SLURM_PROCID")
    if rank is not None:
        return Identity(rank, _int(env, "SLURM_NTASKS", "SLURM_NPROCS") or rank + 1, _int(env, "SLURM_LOCALID"),
                        _int(env, "SLURM_NODEID"), "slurm")
    return None


#: The process group last seen alive: programs destroy it before they exit, when the last file is written.
_seen: tuple[int, int, str | None] | None = None


def process_group() -> tuple[int, int, str | None] | None:
    """(rank, world size, backend) of the program's initialised default process group (or of the one last
    seen by an earlier call, since destroyed), else None."""
    global _seen
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return _seen
    try:
        if not dist.is_available() or not dist.is_initialized():
            return _seen
        try:
            backend = str(dist.get_backend())
        except Exception:
            backend = None
        _seen = int(dist.get_rank()), int(dist.get_world_size()), backend
        return _seen
    except Exception:  # a group being torn down: the variables still say who we are
        return _seen


def current(env=None) -> Identity | None:
    """This process's identity now: the variables', corrected by an initialised process group (which wins)."""
    found = from_environment(env)
    group = process_group()
    if group is None:
        return found
    rank, world_size, backend = group
    if found is None:
        return Identity(rank, world_size, None, None, "env", backend)
    return replace(found, rank=rank, world_size=world_size, backend=backend)


def _remember_before_destroy(dist) -> None:
    """Make ``dist.destroy_process_group`` note the group first (once): most programs destroy it before the
    last file is written, and only a live group tells its backend."""
    destroy = getattr(dist, "destroy_process_group", None)
    if destroy is None or getattr(destroy, "_proton_remembers", False):
        return

    @functools.wraps(destroy)
    def remembering(*args, **kwargs):
        process_group()
        return destroy(*args, **kwargs)

    remembering._proton_remembers = True
    dist.destroy_process_group = remembering


def watch() -> None:
    """In a process of a distributed job: remember the process group before the program destroys it (now, or
    once the program imports torch.distributed).  torch is never imported here."""
    when_imported("torch.distributed", _remember_before_destroy)
