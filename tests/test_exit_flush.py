"""Open sessions are written however the program ends: real programs, real signals."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PRELUDE = """
    import os, signal, sys, time
    import proton_core as proton
    proton.start({name!r}, backend="host")
    with proton.scope("work", {{"items": 3}}):
        pass
"""


# Default dispositions, whatever the test runner inherited (under nohup SIGHUP is ignored, and an
# ignored signal rightly ends nothing); set by the program itself (a preexec_fn would fork a
# threaded pytest).
DEFAULT_SIGNALS = "import signal as _s\nfor _n in (_s.SIGHUP, _s.SIGTERM):\n    _s.signal(_n, _s.SIG_DFL)\n"


def program(tmp_path, body, env=None, wait_for_ready=False):
    """Start a program that opens a session, runs ``body`` and never calls finalize."""
    name = str(tmp_path / "prof")
    code = DEFAULT_SIGNALS + textwrap.dedent(PRELUDE.format(name=name)) + textwrap.dedent(body)
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=tmp_path)
    if wait_for_ready:
        assert proc.stdout.readline().strip() == "ready"
    return proc, tmp_path / "prof.hatchet"


def written_scope(path):
    root = json.loads(path.read_text())[0]
    (work,) = [c for c in root["children"] if c["frame"]["name"] == "work"]
    return work["metrics"]["items"]


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def test_normal_exit_writes_and_says_so(tmp_path):
    proc, path = program(tmp_path, "print('bye')")
    rc, out, err = finish(proc)
    assert rc == 0 and out == "bye\n"
    assert written_scope(path) == 3
    assert err == f"proton: profile written to {path} at exit (the program ended; finalize() was not called)\n"


def test_uncaught_exception_writes_and_keeps_the_traceback_and_status(tmp_path):
    proc, path = program(tmp_path, "raise ValueError('boom')")
    rc, _, err = finish(proc)
    assert rc == 1 and "ValueError: boom" in err
    assert written_scope(path) == 3


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_default_signal_writes_then_dies_of_it(tmp_path, signame):
    proc, path = program(tmp_path, "print('ready', flush=True)\ntime.sleep(60)", wait_for_ready=True)
    proc.send_signal(getattr(signal, signame))
    rc, _, err = finish(proc)
    assert rc == -getattr(signal, signame)  # the status the signal gives without Proton
    assert written_scope(path) == 3 and f"at exit ({signame};" in err


def test_sigint_writes_through_keyboard_interrupt(tmp_path):
    proc, path = program(tmp_path, "print('ready', flush=True)\ntime.sleep(60)", wait_for_ready=True)
    proc.send_signal(signal.SIGINT)
    rc, _, err = finish(proc)
    assert rc in (-signal.SIGINT, 1, 130) and "KeyboardInterrupt" in err
    assert written_scope(path) == 3


def test_the_programs_earlier_handler_is_chained(tmp_path):
    name = str(tmp_path / "prof")
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        def mine(signum, frame):
            print("mine", flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)   # before the session starts
        import proton_core as proton
        proton.start({name!r}, backend="host")
        with proton.scope("work", {{"items": 3}}):
            pass
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    rc, out, _ = finish(proc)
    assert rc == 7 and out == "mine\n"
    assert written_scope(tmp_path / "prof.hatchet") == 3


def test_a_handler_installed_later_still_gets_the_profile_written(tmp_path):
    body = """
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(5))
        print('ready', flush=True)
        time.sleep(60)
        """
    proc, path = program(tmp_path, body, wait_for_ready=True)
    proc.send_signal(signal.SIGTERM)
    rc, _, _ = finish(proc)
    assert rc == 5 and written_scope(path) == 3


def test_ignored_signal_stays_ignored(tmp_path):
    name = str(tmp_path / "prof")
    code = textwrap.dedent(f"""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        import proton_core as proton
        proton.start({name!r}, backend="host")
        print("ready", flush=True)
        time.sleep(1.5)
        print("alive", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    rc, out, _ = finish(proc)
    assert rc == 0 and out == "alive\n" and (tmp_path / "prof.hatchet").exists()


def test_turned_off_by_the_environment(tmp_path):
    proc, path = program(tmp_path, "print('ready', flush=True)\ntime.sleep(60)", {"PROTON_FLUSH_AT_EXIT": "0"},
                         wait_for_ready=True)
    proc.send_signal(signal.SIGTERM)
    rc, _, err = finish(proc)
    assert rc == -signal.SIGTERM and not path.exists() and err == ""


def test_a_forked_child_never_writes_the_parents_session(tmp_path):
    body = """
        pid = os.fork()
        if pid == 0:
            with proton.scope("child_work", {"items": 100}):
                pass
            proton.finalize()          # the child has no session: nothing is written
            sys.exit(0)                # exit handlers run in the child too
        os.waitpid(pid, 0)
        with proton.scope("work", {"items": 1}):
            pass
        proton.finalize()
        """
    proc, path = program(tmp_path, body)
    rc, out, err = finish(proc)
    assert rc == 0, err
    root = json.loads(path.read_text())[0]
    names = [c["frame"]["name"] for c in root["children"]]
    assert names == ["work"] and root["children"][0]["metrics"]["items"] == 4
    assert "at exit" not in err


def test_sigterm_under_the_command_line_writes_with_the_signal_status(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "proton_core", "-n", "cli", "-b", "host", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    rc, _, err = finish(proc)
    assert rc == -signal.SIGTERM
    assert (tmp_path / "cli.hatchet").exists(), err
