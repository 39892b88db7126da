"""Many processes, one job: which rank this process is, the job's run id, per-rank file names, what to capture.

* :mod:`.identity`: the rank, world size, local and node rank, from torchrun, Slurm or MPI variables, an
  initialised ``torch.distributed`` process group winning at write time;
* :mod:`.run_id`: one id for every rank of a job, read from the launcher's variables (no communication);
* :mod:`.naming`: ``<name>.rank<k>`` for a rank, ``<name>.pid<P>`` for a followed process without one;
* :mod:`.stamp`: the ``"distributed"``, ``"part"`` and ``"final"`` keys of the profile root's metadata;
* :mod:`.selection`: ``PROTON_RANKS`` / ``--ranks``: which ranks profile at all;
* :mod:`.schedule`: ``PROTON_SCHEDULE`` / ``--schedule`` and ``proton.step()``: which steps are recorded.

This package imports nothing at import time: the output path (:mod:`proton_core.destinations`) reads it,
and only :mod:`.schedule` sits above the session manager.
"""
