"""Where a profile goes (issue 40, items 1, 6 and 9's CLI parts): checked at start, never over this job's own
file, a fallback at exit, absolute in the CLI's last line, one line for a Ctrl-C during the write."""

import dataclasses
import errno
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import proton_core as proton
from proton_core import destinations, exit_flush
from proton_core.errors import ProtonError
from proton_core.session import MANAGER
from proton_core.testing import get_plugins, load_profile as load


def cli(tmp_path, *args, cwd=None):
    env = dict(os.environ, PROTON_BACKEND="host")
    return subprocess.run([sys.executable, "-m", "proton_core", *map(str, args)], cwd=cwd or tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def python(tmp_path, body, *args):
    env = dict(os.environ, PROTON_BACKEND="host")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def frames(path):
    return {c["frame"]["name"] for c in load(path)[0]["children"]}


RAN = "print('the program ran')\n"


# ------------------------------------------------------- item 1: checked before ----
def bad_names(tmp_path):
    (tmp_path / "adir.hatchet").mkdir()
    return {
        "missing": (str(tmp_path / "no" / "such" / "dir" / "out"), "does not exist"),
        "directory": (str(tmp_path / "adir"), "is a directory"),
        "too long": (str(tmp_path / ("x" * 300)), "over the file system's limit"),
    }


@pytest.mark.parametrize("case", ["missing", "directory", "too long"])
def test_cli_checks_the_output_before_the_program_runs(tmp_path, case):
    name, message = bad_names(tmp_path)[case]
    write(tmp_path, "prog.py", RAN)
    proc = cli(tmp_path, "-n", name, "prog.py")
    assert proc.returncode == 2 and "ran" not in proc.stdout
    assert proc.stderr.startswith("proton: ") and proc.stderr.count("\n") == 1 and message in proc.stderr


@pytest.mark.parametrize("case", ["missing", "directory", "too long"])
def test_start_checks_the_output(tmp_path, case):
    name, message = bad_names(tmp_path)[case]
    with pytest.raises(ProtonError, match=message) as err:
        proton.start(name, backend="host")
    assert "\n" not in str(err.value) and MANAGER.sessions == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_cli_read_only_directory(tmp_path):
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    write(tmp_path, "prog.py", RAN)
    try:
        proc = cli(tmp_path, "-n", tmp_path / "ro" / "out", "prog.py")
    finally:
        os.chmod(tmp_path / "ro", 0o755)
    assert proc.returncode == 2 and "ran" not in proc.stdout and "not writable" in proc.stderr


def test_read_only_directory_as_the_check_sees_it(tmp_path, monkeypatch):
    """What a non-root user gets from a read-only directory (root may write anywhere, so simulated)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if os.fspath(p) == str(tmp_path) else real(p, m, **kw))
    with pytest.raises(ProtonError, match="is not writable"):
        proton.start(str(tmp_path / "out"), backend="host")
    assert MANAGER.sessions == {}


def failing_on(directory):
    """The hatchet sink, failing (disk full) for files in ``directory`` only."""
    real = get_plugins().sinks.get("hatchet")

    def writer(profile, path):
        if os.path.dirname(os.path.abspath(path)) == str(directory):
            raise OSError(errno.ENOSPC, "No space left on device")
        real.writer(profile, path)

    return dataclasses.replace(real, writer=writer)


def test_a_failing_write_at_exit_goes_to_the_temporary_directory(tmp_path, monkeypatch, caplog):
    sid = proton.start(str(tmp_path / "p"), backend="host")
    with proton.scope("work", metrics={"n": 1}):
        pass
    monkeypatch.setitem(get_plugins().sinks.items, "hatchet", failing_on(tmp_path))
    monkeypatch.setattr(exit_flush, "_manager", MANAGER)
    monkeypatch.setattr(exit_flush, "_owner_pid", os.getpid())
    (path,) = exit_flush.write_open_sessions("the program ended")
    try:
        assert os.path.dirname(path) == tempfile.gettempdir()
        assert "work" in frames(path) and sid not in MANAGER.sessions
        err = "\n".join(caplog.messages)
        assert f"cannot write the profile to {tmp_path / 'p.hatchet'} (No space left on device): wrote it to {path}" \
            in err
        assert list(tmp_path.iterdir()) == []  # no partial file
    finally:
        os.unlink(path)


VANISH = """
    import os, shutil, sys
    import proton_core as proton
    with proton.scope("work", metrics={"n": 1}):
        pass
    shutil.rmtree(sys.argv[1])   # the output directory vanishes while the program runs
    sys.exit(3)
"""


def test_cli_write_fails_at_the_end_fallback_and_the_programs_status(tmp_path):
    (tmp_path / "out").mkdir()
    write(tmp_path, "prog.py", VANISH)
    proc = cli(tmp_path, "-n", tmp_path / "out" / "run", "prog.py", tmp_path / "out")
    assert proc.returncode == 3, proc.stderr  # the program's, not ours
    assert "finalize" not in proc.stderr and "Traceback" not in proc.stderr
    first, second = proc.stderr.splitlines()
    assert first.startswith(f"proton: cannot write the profile to {tmp_path / 'out' / 'run.hatchet'} (")
    fallback = first.rsplit("wrote it to ", 1)[1].split(" instead")[0]
    try:
        assert second == f"proton: profile written to {fallback}"
        assert "work" in frames(fallback)
    finally:
        os.unlink(fallback)


def test_at_exit_messages_under_the_cli_do_not_mention_finalize(tmp_path):
    write(tmp_path, "prog.py", """
        import os, signal, proton_core as proton
        with proton.scope("work", metrics={"n": 1}):
            pass
        os.kill(os.getpid(), signal.SIGTERM)
    """)
    proc = cli(tmp_path, "-n", "out", "prog.py")
    assert proc.returncode == -signal.SIGTERM
    assert proc.stderr == f"proton: profile written to {tmp_path / 'out.hatchet'} (SIGTERM)\n"


# ------------------------------------------------ item 6: no overwrite by the job ----
def test_one_start_and_finalize_per_epoch_keeps_every_epoch(tmp_path, caplog):
    name = str(tmp_path / "train")
    written = []
    for epoch in range(3):
        proton.start(name, backend="host")
        with proton.scope(f"epoch{epoch}", metrics={"n": 1}):
            pass
        written += proton.finalize()
    assert written == [name + ".hatchet", name + ".1.hatchet", name + ".2.hatchet"]
    assert [frames(p) for p in written] == [{"epoch0"}, {"epoch1"}, {"epoch2"}]
    assert caplog.messages == [f"{name}.hatchet was written earlier by this program: this session writes "
                     f"{name}.{n}.hatchet instead (no profile of this job is replaced)" for n in (1, 2)]


def test_a_second_run_replaces_the_first(tmp_path):
    write(tmp_path, "prog.py", "import sys, proton_core as proton\nwith proton.scope(sys.argv[1], metrics={'n': 1}):\n    pass\n")
    for run in ("first", "second"):
        assert cli(tmp_path, "-n", "out", "prog.py", run).returncode == 0
    assert frames(tmp_path / "out.hatchet") == {"second"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hatchet", "prog.py"]


FORK = """
    import os, sys
    import proton_core as proton
    proton.start("train", backend="host")
    with proton.scope("parent", metrics={"n": 1}):
        pass
    if sys.argv[1] == "after":
        proton.finalize()
    pid = os.fork()
    if pid == 0:   # a forked child starting a session with its parent's name
        proton.start("train", backend="host")
        with proton.scope("child", metrics={"n": 1}):
            pass
        print(proton.finalize(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    proton.finalize()
"""


@pytest.mark.parametrize("when", ["after", "during"])
def test_a_forked_child_never_replaces_its_parents_profile(tmp_path, when):
    proc = python(tmp_path, FORK, when)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "['train.1.hatchet']\n"
    assert frames(tmp_path / "train.hatchet") == {"parent"}
    assert frames(tmp_path / "train.1.hatchet") == {"child"}


WAITER = """
    import os, sys, time
    import proton_core as proton
    with proton.scope(sys.argv[1], metrics={"n": 1}):
        pass
    print("ready", flush=True)
    while sys.argv[2:] == ["wait"] and not os.path.exists("go"):
        time.sleep(0.05)
"""


def test_two_live_processes_with_one_name_keep_both_profiles(tmp_path):
    write(tmp_path, "prog.py", WAITER)
    env = dict(os.environ, PROTON_BACKEND="host")
    first = subprocess.Popen([sys.executable, "-m", "proton_core", "-n", "out", "prog.py", "rank0", "wait"],
                             cwd=tmp_path,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline() == "ready\n"
        second = cli(tmp_path, "-n", "out", "prog.py", "rank1")  # runs to its end while the first is alive
        (tmp_path / "go").touch()
        _, first_err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0 and second.returncode == 0, (first_err, second.stderr)
    assert frames(tmp_path / "out.hatchet") == {"rank0"}
    assert frames(tmp_path / "out.1.hatchet") == {"rank1"}
    assert "is being written by another running process of this job" in second.stderr
    assert f"profile written to {tmp_path / 'out.1.hatchet'}" in second.stderr


def test_a_claim_of_a_dead_process_is_not_honoured(tmp_path):
    path = str(tmp_path / "p.hatchet")
    claim = destinations.claim_file(path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    with open(claim, "w") as f:
        f.write(dead)
    try:
        assert destinations.claim(str(tmp_path / "p"), "hatchet") == str(tmp_path / "p")
        assert open(claim).read() == str(os.getpid())
    finally:
        destinations.release_claims()
    assert not os.path.exists(claim)


def test_claims_of_dead_processes_are_swept(tmp_path):
    directory = tmp_path / "claims"
    directory.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (directory / "dead").write_text(dead)
    (directory / "live").write_text(str(os.getpid()))
    destinations.sweep(str(directory))
    assert sorted(p.name for p in directory.iterdir()) == ["live"]


# ------------------------------------------------------- item 9: the CLI's end ----
def test_the_last_line_names_the_absolute_path_after_a_chdir(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path, "prog.py", "import os\nos.chdir('elsewhere')\n")
    proc = cli(tmp_path, "-n", "out", "prog.py")
    assert proc.returncode == 0
    assert proc.stderr == f"proton: profile written to {tmp_path / 'out.hatchet'}\n"
    assert (tmp_path / "out.hatchet").exists() and not (tmp_path / "elsewhere" / "out.hatchet").exists()


def test_ctrl_c_during_the_write_is_one_line(tmp_path):
    """The second Ctrl-C (the first stopped the program) arrives while the sink writes."""
    proc = python(tmp_path, """
        import dataclasses, os, signal, sys
        from proton_core import cli
        from proton_core.plugins import get_plugins
        sinks = get_plugins().sinks.items

        def interrupted(profile, path):
            open(path, "w").write("[{")
            os.kill(os.getpid(), signal.SIGINT)
            import time; time.sleep(5)

        sinks["hatchet"] = dataclasses.replace(sinks["hatchet"], writer=interrupted)
        open("prog.py", "w").write("raise KeyboardInterrupt\\n")
        sys.exit(cli.main(["-n", "out", "prog.py"]))
    """)
    assert proc.returncode == 130
    lines = [line for line in proc.stderr.splitlines() if line.startswith("proton:")]
    assert lines == ["proton: interrupted while writing the profile: it was not written"]
    assert proc.stderr.count("Traceback") == 1  # the program's own KeyboardInterrupt, as python prints it
    assert "proton_core" not in proc.stderr.split("KeyboardInterrupt", 1)[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.py"]  # no partial or temporary file


def test_two_sigints_to_a_program_writing_a_large_profile(tmp_path):
    """Real signals: Ctrl-C stops the program, a second one lands in the long write."""
    write(tmp_path, "prog.py", """
        import proton_core as proton
        for i in range(60000):
            with proton.scope(f"s{i}", metrics={"n": 1}):
                pass
        print("ready", flush=True)
        import time
        time.sleep(60)
    """)
    env = dict(os.environ, PROTON_BACKEND="host")
    proc = subprocess.Popen([sys.executable, "-m", "proton_core", "-n", "big", "prog.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)   # the write has started (it takes seconds at this size)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130
    ours = err.split("KeyboardInterrupt", 1)[1]
    if (tmp_path / "big.hatchet").exists():   # the write won the race: nothing to say but where
        assert ours.strip().startswith("proton: profile written to")
    else:
        assert ours.strip() == "proton: interrupted while writing the profile: it was not written"
    assert "Traceback" not in ours
