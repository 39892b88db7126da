"""Profiles of open sessions are written however the program ends, not only at ``finalize()``.

Installed when the first session starts (a program that never profiles keeps
its signal handlers untouched):

* ``atexit`` writes every open session at a normal exit and after an uncaught
  exception (the interpreter runs exit handlers after printing the traceback);
* ``os.execv``/``os.execve`` (and the ``exec*`` calls built on them) write them before the
  process becomes another program;
* SIGTERM and SIGHUP, whose default action kills the process without exit
  handlers, get a handler that writes first and then does what the previous
  disposition would have done: calls the program's own handler, or restores
  the default and re-sends the signal, so the exit status is the one the
  program would have had.  A disposition of "ignore" is left alone.  SIGINT
  needs nothing: it raises KeyboardInterrupt and exit handlers run.

A handler the program installs later replaces ours; its exit (``sys.exit``)
still runs the exit handler.  Only the process that started the sessions
writes them: a forked child never does.  A path that fails now (a full disk,
a removed directory) is written to the temporary directory instead, one line
saying where: no later ``finalize()`` can retry.  ``PROTON_FLUSH_AT_EXIT=0`` turns all
of this off.  SIGKILL and the OOM killer cannot be caught: use periodic
writing (``proton.flush``-style snapshots) for runs that may die that way.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading

from . import destinations, log

SIGNALS = ("SIGTERM", "SIGHUP")
#: The calls that replace the process with another program (execl*, execvp* and spawn's children go through them).
EXEC_CALLS = ("execv", "execve")
ENV_VAR = "PROTON_FLUSH_AT_EXIT"

_lock = threading.Lock()
_installed = False
_owner_pid = 0
_manager = None
#: signal number -> the disposition ours replaced (a callable or SIG_DFL)
_previous: dict[int, object] = {}
#: Set where Python runs inside a program that is not Python (the cupti plugin's injection library): a Python
#: handler would only run when the main thread runs Python, which it never does there; the library's own
#: handlers write the profile instead.
signals_handled_natively = False


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def install(manager) -> None:
    """Arm the exit handler and the signal handlers (once per process; idempotent)."""
    global _installed, _owner_pid, _manager
    with _lock:
        if _installed and _owner_pid == os.getpid():
            return
        if not enabled():
            return
        _installed, _owner_pid, _manager = True, os.getpid(), manager
        atexit.register(_at_exit)
        _wrap_exec()
        if threading.current_thread() is not threading.main_thread() or signals_handled_natively:
            return  # signal handlers can only be set from the main thread; atexit still covers normal exits
        for name in SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or previous is None or previous is _on_signal:
                continue  # ignored on purpose, or set outside Python: leave it
            _previous[signum] = previous
            signal.signal(signum, _on_signal)


def finalize_and_say(manager) -> str | None:
    """Write every open session at a program's end (the temporary directory where the name fails) and say each
    path in one line, one write a line (ranks of a job print at once).  Returns None when written, else
    ``"interrupted"`` (a second Ctrl-C) or ``"failed"``; either way nothing more is written at exit."""
    from .errors import ProtonError

    try:
        paths = manager.finalize(fallback=True)
    except KeyboardInterrupt:
        manager.reset()
        log.write_stderr("proton: interrupted while writing the profile: it was not written\n")
        return "interrupted"
    except (ProtonError, OSError) as exc:
        manager.reset()
        log.write_stderr(f"proton: {str(exc).splitlines()[0]}\n")
        return "failed"
    for path in paths:
        log.write_stderr(f"proton: profile written to {os.path.abspath(path)}\n")
    return None


def write_open_sessions(why: str) -> list[str]:
    """Write every open session of this process; never raises (the program is ending).

    A path that fails now goes to the temporary directory (no later call can retry); under the
    CLI the messages say nothing of ``finalize()``, which a CLI user never calls.
    """
    manager = _manager
    if manager is None or os.getpid() != _owner_pid or not manager.sessions:
        return []
    cli = manager.cli_owned
    try:
        paths = manager.finalize(None, fallback=True)
    except KeyboardInterrupt:
        log.warn(f"interrupted while writing the profile at exit ({why}): it was not written")
        return []
    except Exception as exc:  # a profile that cannot be written is reported, never a second crash
        log.warn(f"could not write the profile at exit ({why}): {str(exc).splitlines()[0] if str(exc) else exc!r}")
        return []
    for path in paths:
        if cli:
            log.warn(f"profile written to {os.path.abspath(path)} ({why})")
        else:
            log.warn(f"profile written to {path} at exit ({why}; finalize() was not called)")
    return paths


def _wrap_exec() -> None:
    """``os.execv``/``os.execve`` replace the process without exit handlers: write the open sessions first.
    The program that replaces it (profiled too, under ``proton-profile``) has this pid and finds the claims
    of these files still held, so it writes beside them, never over them."""
    for name in EXEC_CALLS:
        original = getattr(os, name, None)
        if original is None or getattr(original, "_proton_original", None) is not None:
            continue

        def before_exec(*args, _original=original, _name=name, **kwargs):
            write_open_sessions(f"os.{_name} replaces the process")
            return _original(*args, **kwargs)

        before_exec._proton_original = original
        before_exec.__name__ = before_exec.__qualname__ = name
        before_exec.__doc__ = original.__doc__
        setattr(os, name, before_exec)


def _at_exit() -> None:
    write_open_sessions("the program ended")


def _on_signal(signum, frame) -> None:
    write_open_sessions(signal.Signals(signum).name)
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)  # die as the signal would have killed us: same exit status
    destinations.release_claims()  # exit handlers will not run
    os.kill(os.getpid(), signum)
