"""One id for every process of a job, read from what the launcher gave all of them (no communication).

``PROTON_RUN_ID`` first: the user's, or the one ``proton-profile`` sets for everything it starts (from the
job's own id where there is one, so the ``proton-profile`` of each node of an ``srun`` agree); then
torchrun's rendezvous id (not its default ``none``), Slurm's job and step, Open MPI's and PMIx's job ids.
Without any of those, the rendezvous address of torch.distributed's variables, else this host and the
parent process (ranks a launcher started on one host share it).
"""

from __future__ import annotations

import os
import socket

ENV_VAR = "PROTON_RUN_ID"


def from_launcher(env=None) -> str | None:
    """The job's id as its launcher exported it, or None."""
    env = os.environ if env is None else env
    torchrun = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if torchrun and torchrun != "none":
        return f"torchrun-{torchrun}"
    job = env.get("SLURM_JOB_ID", "").strip() or env.get("SLURM_JOBID", "").strip()
    if job:
        step = env.get("SLURM_STEP_ID", "").strip() or env.get("SLURM_STEPID", "").strip()
        return f"slurm-{job}.{step}" if step else f"slurm-{job}"
    for name in ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_JOBID"):
        value = env.get(name, "").strip()
        if value:
            return f"mpi-{value}"
    return None


def run_id(env=None) -> str:
    """This job's run id (the same in every rank of it)."""
    env = os.environ if env is None else env
    explicit = env.get(ENV_VAR, "").strip()
    if explicit:
        return explicit
    found = from_launcher(env)
    if found:
        return found
    address, port = env.get("MASTER_ADDR", "").strip(), env.get("MASTER_PORT", "").strip()
    if address and port:
        return f"rendezvous-{address}:{port}"
    return f"{socket.gethostname()}-{os.getppid()}"
