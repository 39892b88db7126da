"""``proton-profile ctl start|stop|status [--pid P | --run RUN_ID] [--timeout S]``: control a running job.

Every process of the target is asked at once (a job's ranks start and stop together); each answers in one
line, printed as ``pid P: ...`` (on stderr as ``proton: pid P: ...`` when it is an error).  Without
``--pid`` or ``--run``, ``status`` asks every process of this user and ``start``/``stop`` the one run there
is.  Exit status: 0 when every process did what was asked, 1 when one answered an error or did not answer,
2 when nothing could be asked (a usage error, no such process).
"""

from __future__ import annotations

import errno
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

from ..errors import ProtonError
from . import location, protocol, targets

USAGE = """\
usage: proton-profile ctl start|stop|status [--pid P | --run RUN_ID] [--timeout SECONDS]

Start or stop recording in a job started with proton-profile --on-demand (or PROTON_ON_DEMAND=1),
without restarting it. stop writes the window just recorded as its own part, <name>.part_<N>.<ext>.

  start            start a recording window
  stop             end the window and write it
  status           recording or idle, session, windows written and their files
  --pid P          the process P only
  --run RUN_ID     every process of that run (torchrun, Slurm or proton-profile run id)
  --timeout S      how long to wait for each answer (default 60; stop writes the window first)
"""

DEFAULT_TIMEOUT = 60.0
#: Processes asked at the same time.
PARALLEL = 64


class UsageError(Exception):
    pass


def parse(argv: list[str]) -> tuple[str, int | None, str | None, float]:
    command, pid, run, timeout = None, None, None, DEFAULT_TIMEOUT
    items = list(argv)
    while items:
        item = items.pop(0)
        key, eq, inline = item.partition("=")
        if key in ("--pid", "--run", "--timeout"):
            if not eq:
                if not items:
                    raise UsageError(f"{key} needs a value")
                inline = items.pop(0)
            if key == "--pid":
                if not inline.isdigit() or int(inline) <= 0:
                    raise UsageError(f"--pid needs a process id (a positive number), not {inline!r}")
                pid = int(inline)
            elif key == "--run":
                if not inline.strip():
                    raise UsageError("--run needs a run id")
                run = inline.strip()
            else:
                try:
                    timeout = float(inline)
                except ValueError:
                    raise UsageError(f"--timeout needs seconds, not {inline!r}") from None
                if not timeout > 0:
                    raise UsageError("--timeout must be positive")
        elif item in protocol.COMMANDS and command is None:
            command = item
        else:
            raise UsageError(f"unexpected argument {item!r}")
    if command is None:
        raise UsageError(f"name a command: {', '.join(protocol.COMMANDS)}")
    if pid is not None and run is not None:
        raise UsageError("give --pid or --run, not both")
    return command, pid, run, timeout


def ask(target: targets.Target, command: str, timeout: float) -> tuple[bool, str]:
    """(ok, the line to print) for one process."""
    try:
        return protocol.ask(target.path, command, timeout)
    except socket.timeout:
        return False, f"did not answer within {timeout:g} s (busy writing? try --timeout)"
    except ConnectionRefusedError:  # bound sockets are renamed into place only once they listen: this one is stale
        location.remove(target.path)
        return False, "is no longer serving control (its pid belongs to another program now): removed its stale socket"
    except FileNotFoundError:
        return False, "exited before it could answer"
    except OSError as exc:
        if exc.errno == errno.EACCES:
            return False, f"its control socket is not yours ({exc.strerror})"
        return False, f"could not be asked: {exc.strerror or exc}"


def main(argv: list[str]) -> int:
    """Entry point of ``proton-profile ctl``; the exit status."""
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE, end="")
        return 0
    try:
        command, pid, run, timeout = parse(argv)
        found, notes = targets.find(pid, run)
    except (UsageError, ProtonError) as exc:
        print(f"proton: ctl: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"proton: {note}", file=sys.stderr)
    if not found:
        print(f"proton: {targets.nothing_found(pid, run)}", file=sys.stderr)
        return 2
    runs = sorted({t.run for t in found})
    if command != "status" and pid is None and run is None and len(runs) > 1:
        print(f"proton: ctl: processes of {len(runs)} runs serve control ({', '.join(runs)}): "
              f"name one with --run RUN_ID or --pid P", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(found))) as pool:
        answers = list(pool.map(lambda t: ask(t, command, timeout), found))
    status = 0
    for target, (ok, text) in zip(found, answers):
        if ok:
            print(f"pid {target.pid}: {text}")
        else:
            print(f"proton: pid {target.pid}: {text}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
