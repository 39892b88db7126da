"""Profiling on demand: a running job is told to start and stop recording without a restart.

With ``PROTON_ON_DEMAND=1`` (``proton-profile --on-demand``), :func:`serve` leaves the process's sessions
idle (deactivated, recording nothing) and opens a control socket for it: a Unix domain socket, mode 0600,
in a private per-user directory, named for the pid under a directory per run, served by one daemon thread
blocked in ``accept()`` (it costs nothing while idle: no polling, no wakeups).  ``proton-profile ctl
start|stop|status [--pid P | --run RUN_ID]`` (:mod:`proton_core.control.cli`) talks to it: ``start`` opens a
recording window, ``stop`` closes it and writes it as its own part (``<name>.part_<N>.<ext>``), ``status``
says what the process does.  Only the job's own user gets in (the peer's credentials are checked).
"""

from __future__ import annotations

from .server import on_demand, serve

__all__ = ["serve", "on_demand"]
