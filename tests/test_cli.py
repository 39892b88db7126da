"""The `proton` command in a subprocess, on tiny programs written to tmp_path (host backend)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from proton_core.testing import load_profile as load


def proton(tmp_path, *args):
    env = dict(os.environ, PROTON_BACKEND="host")
    return subprocess.run([sys.executable, "-m", "proton_core", *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def write(tmp_path, name, body):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def scopes(path):
    """Top-level frame names of a written profile."""
    root = load(path)[0]
    return {c["frame"]["name"]: c for c in root["children"]}


SCRIPT = """
    import sys
    import proton_core as proton
    sid = proton.start("inner_name", backend="host")   # ignored under the CLI
    with proton.scope("work", metrics={"items": 7}):
        pass
    proton.deactivate(0)       # session 0 is the CLI's
    with proton.scope("paused", metrics={"items": 1}):
        pass
    proton.activate(0)
    assert proton.finalize() == []
    print("sid", sid, "argv", sys.argv[1:])
    if "--raise" in sys.argv:
        raise ValueError("boom from the script")
    sys.exit(int(sys.argv[1]))
"""


def test_exit_code_passthrough_and_inner_calls_ignored(tmp_path):
    write(tmp_path, "prog.py", SCRIPT)
    proc = proton(tmp_path, "-n", "out", "prog.py", "3", "-n", "not_ours")
    assert proc.returncode == 3, proc.stderr
    assert "sid 0 argv ['3', '-n', 'not_ours']" in proc.stdout
    assert not (tmp_path / "inner_name.hatchet").exists()
    frames = scopes(tmp_path / "out.hatchet")
    assert frames["work"]["metrics"]["items"] == 7
    assert "paused" not in frames


def test_profile_written_when_script_raises(tmp_path):
    write(tmp_path, "prog.py", SCRIPT)
    proc = proton(tmp_path, "prog.py", "0", "--raise")
    assert proc.returncode == 1
    assert "ValueError: boom from the script" in proc.stderr
    assert 'prog.py", line' in proc.stderr and "runpy" not in proc.stderr
    assert "work" in scopes(tmp_path / "proton.hatchet")


def test_sys_exit_zero_and_message(tmp_path):
    write(tmp_path, "ok.py", """
        import sys, proton_core as proton
        with proton.scope("s", metrics={"n": 1}):
            pass
        sys.exit("fatal: message")
    """)
    proc = proton(tmp_path, "--name=msg", "ok.py")
    assert proc.returncode == 1 and "fatal: message" in proc.stderr
    assert "s" in scopes(tmp_path / "msg.hatchet")


def test_module_mode(tmp_path):
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/tool.py", """
        import sys, proton_core as proton
        with proton.scope("in_module", metrics={"n": 2}):
            pass
        print("module argv", sys.argv[1:], __name__)
        sys.exit(5)
    """)
    proc = proton(tmp_path, "-n", "mod", "-m", "pkg.tool", "--flag", "x")
    assert proc.returncode == 5, proc.stderr
    assert "module argv ['--flag', 'x'] __main__" in proc.stdout
    assert scopes(tmp_path / "mod.hatchet")["in_module"]["metrics"]["n"] == 2


def test_pytest_mode(tmp_path):
    write(tmp_path, "test_inner.py", """
        import proton_core as proton
        def test_one():
            with proton.scope("in_test", metrics={"n": 3}):
                pass
        def test_two():
            assert proton.start("ignored") == 0
    """)
    proc = proton(tmp_path, "-n", "pt", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    assert scopes(tmp_path / "pt.hatchet")["in_test"]["metrics"]["n"] == 3
    write(tmp_path, "test_fail.py", "def test_bad():\n    assert False\n")
    proc = proton(tmp_path, "pytest", "-q", "-p", "no:cacheprovider", "test_fail.py")
    assert proc.returncode == 1


def test_plugins_lists_in_tree_plugins(tmp_path):
    proc = proton(tmp_path, "plugins")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "KINDS", "PROVIDES", "STATUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    expected = {"hatchet": "sink", "chrome_trace": "sink", "host": "backend", "shadow": "context",
                "python": "context"}
    for name, kind in expected.items():
        assert rows[name][1] == "proton" and rows[name][3] == kind and rows[name][5] == "loaded", rows[name]
    status_col = lines[0].index("STATUS")
    assert all(line[status_col - 2:status_col] == "  " for line in lines[1:])  # aligned columns
    for line in lines[1:]:
        status = line[status_col:]
        assert status.startswith(("loaded", "unavailable: ", "failed: ", "disabled")), line


def test_plugins_shows_disabled(tmp_path):
    env = dict(os.environ, PROTON_DISABLE_PLUGINS="chrome_trace")
    proc = subprocess.run([sys.executable, "-m", "proton_core", "plugins"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    row = next(line for line in proc.stdout.splitlines() if line.startswith("chrome_trace "))
    assert "disabled (PROTON_DISABLE_PLUGINS)" in row


def test_script_named_plugins_runs_as_script(tmp_path):
    write(tmp_path, "plugins", "print('I am a script')\n")
    proc = proton(tmp_path, "plugins")
    assert proc.returncode == 0 and "I am a script" in proc.stdout
    assert (tmp_path / "proton.hatchet").exists()


@pytest.mark.parametrize("args, message", [
    (["missing.py"], "proton: no such script: missing.py"),
    (["-b", "no_such_backend", "prog.py"], "proton: unknown backend 'no_such_backend'"),
    (["-c", "nope", "prog.py"], "proton: unknown context 'nope'"),
    (["-m", "no_such_module_xyz"], "proton: no module named 'no_such_module_xyz'"),
    (["--bogus", "prog.py"], "proton: unknown option --bogus"),
    (["-n"], "proton: option -n needs a value"),
    ([], "proton: nothing to run"),
])
def test_bad_command_lines_exit_2_with_one_line(tmp_path, args, message):
    write(tmp_path, "prog.py", "raise SystemExit(0)\n")
    proc = proton(tmp_path, *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "proton.hatchet").exists()


def test_help(tmp_path):
    proc = proton(tmp_path, "-h")
    assert proc.returncode == 0 and "proton [options] -m module" in proc.stdout


def test_data_option_reaches_the_session(tmp_path):
    write(tmp_path, "prog.py", """
        import proton_core as proton
        with proton.cpu_timed_scope("step"):
            pass
    """)
    proc = proton(tmp_path, "-n", "tr", "-d", "trace", "prog.py")
    assert proc.returncode == 0, proc.stderr
    assert "traceEvents" in json.loads((tmp_path / "tr.chrome_trace").read_text())
    assert not (tmp_path / "tr.hatchet").exists()


def test_installed_entry_points(tmp_path):
    """The console scripts from pyproject.toml reach the same mains."""
    import shutil

    exe = shutil.which("proton")
    viewer = shutil.which("proton-viewer")
    if not exe or not viewer:
        pytest.skip("proton is not installed (pip install -e .)")
    write(tmp_path, "prog.py", """
        import proton_core as proton
        with proton.scope("s", metrics={"n": 4}):
            pass
    """)
    env = dict(os.environ, PROTON_BACKEND="host")
    assert subprocess.run([exe, "prog.py"], cwd=tmp_path, env=env).returncode == 0
    out = subprocess.run([viewer, "-m", "n", "proton.hatchet"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and "4.000 s" in out.stdout
