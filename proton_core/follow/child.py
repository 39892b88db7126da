"""The session of a followed process: started by the start-up hook, written at exit unless it is empty.

Each followed process writes its own file: ``<name>.rank<k>.<ext>`` where the launcher gave it a rank,
else ``<name>.pid<P>.<ext>``.  Like the CLI's program, the process's own ``proton.start``/``finalize``
calls are ignored.  A rank always writes its file, empty or not (the merged view then names every rank).
A followed process without a rank that recorded nothing (a launcher's helper, a tool run by the
job) writes nothing: only processes with data leave files.  A rank left out by ``PROTON_RANKS``,
or a process where profiling is switched off, starts nothing.
"""

from __future__ import annotations

from ..log import write_stderr  # one write a line: ranks print at once

import atexit
import os

from . import OPTIONS_VAR, after_start, decode


def start_from_environment(text: str | None = None) -> int | None:
    """Start the session of ``text`` (default: ``PROTON_FOLLOW``); one line where it is not session options."""
    options = decode(os.environ.get(OPTIONS_VAR, "") if text is None else text)
    if options is None:
        write_stderr(f"proton: {OPTIONS_VAR} is not a JSON object of session options; this process runs unprofiled\n")
        return None
    return start(options)


def start_in_program(follow_children: bool = True) -> int | None:
    """Start the session of a program that is not Python, in which the cupti plugin's injection library started
    the interpreter (decision 0300).  ``follow_children=False`` (``--no-follow``): what it starts is not followed.
    Signals are the library's to handle: a Python handler would never run on the program's threads."""
    from .. import exit_flush
    from . import disarm

    exit_flush.signals_handled_natively = True
    text = os.environ.get(OPTIONS_VAR, "")
    if not follow_children:
        disarm()
    return start_from_environment(text)


def extension(options: dict) -> str:
    """The extension the session's file will have ("" where the options are wrong: start says so)."""
    from ..output import DEFAULT_FORMAT
    from ..plugins import get_plugins

    fmt = options.get("output_format") or DEFAULT_FORMAT.get(options.get("data") or "tree")
    reg = get_plugins().sinks.get(fmt) if isinstance(fmt, str) else None
    return reg.extension if reg is not None else ""


def start(options: dict) -> int | None:
    """Start this process's session with ``options``; None where it does not profile."""
    from .. import disabled
    from ..distributed import identity, naming, selection
    from ..errors import ProtonError
    from ..manager import MANAGER

    try:
        if disabled() or not selection.selected():
            return None
        name = options.get("name") or "proton"
        if identity.from_environment() is None:
            name = naming.for_pid(name, extension(options), os.getpid())
        sid = MANAGER.start(name, context=options.get("context") or "shadow", data=options.get("data") or "tree",
                            backend=options.get("backend"), mode=options.get("mode"), hook=options.get("hook"),
                            output_format=options.get("output_format"))
    except ProtonError as exc:
        write_stderr(f"proton: process {os.getpid()} runs unprofiled: {str(exc).splitlines()[0]}\n")
        return None
    MANAGER.cli_owned = True
    atexit.register(write_at_exit, sid)  # after the exit flush's registration: runs before it
    after_start.run(sid)
    return sid


def recorded_nothing(session) -> bool:
    """Whether ``session`` holds no data at all (flushed first: the backend may still hold some)."""
    from ..manager import MANAGER
    from ..output import is_empty

    with MANAGER.lock:
        MANAGER.flush(session.backend_state)
        session.resolve_pending()
        return not session.parts and all(is_empty(p) for p in session.phases.profiles.values())


def write_at_exit(session_id: int) -> None:
    """Write the session when the process ends; a session that recorded nothing is closed unwritten."""
    from ..distributed import identity
    from ..errors import ProtonError
    from ..exit_flush import finalize_and_say
    from ..manager import MANAGER

    session = MANAGER.sessions.get(session_id)
    if session is None or session.closed:
        return
    try:
        if recorded_nothing(session) and identity.from_environment() is None:  # a rank's file is always written
            MANAGER.reset()
            return
    except KeyboardInterrupt:
        MANAGER.reset()
        write_stderr("proton: interrupted while writing the profile: it was not written\n")
        return
    except (ProtonError, OSError) as exc:
        MANAGER.reset()
        write_stderr(f"proton: {str(exc).splitlines()[0]}\n")
        return
    finalize_and_say(MANAGER)
