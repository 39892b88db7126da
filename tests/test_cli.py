"""The `proton-profile` command in a subprocess, on tiny programs written to tmp_path (host backend)."""

import json
import os
import re
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
    proc = proton(tmp_path, "-n", "mod", "--module", "pkg.tool", "--flag", "x")
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
    from importlib.metadata import packages_distributions

    core = packages_distributions()["proton_core"][0]  # the distribution the in-tree plugins come with
    for name, kind in expected.items():
        assert rows[name][1] == core and rows[name][3] == kind and rows[name][5] == "loaded", rows[name]
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
    (["--module", "no_such_module_xyz"], "proton: no module named 'no_such_module_xyz'"),
    (["--module", "pkg.nope"], "proton: no module named 'pkg.nope'"),
    (["--module", "pkg"], "proton: pkg is a package without __main__.py"),
    (["--module"], "proton: option --module needs a value"),
    (["-m", "my_package.main"], "proton: nothing to run: give a script, --module NAME or pytest (see proton-profile "
                                "-h) (-m is the backend mode, as in Triton's proton: run a module with --module NAME)"),
    (["-m", "pkg.tool", "--flag"], "proton: unknown option --flag"),
    (["-m", "bogus", "prog.py"], "proton: backend 'host' has no mode 'bogus'"),
    (["-i", "bogus", "prog.py"], "proton: unknown instrument 'bogus': choose print-mem-spaces"),
    (["--mod", "pkg"], "proton: ambiguous option --mod: could be --mode, --module"),
    (["dir_without_main"], "proton: dir_without_main has no __main__.py to run"),
    (["--bogus", "prog.py"], "proton: unknown option --bogus"),
    (["-n"], "proton: option -n needs a value"),
    ([], "proton: nothing to run"),
])
def test_bad_command_lines_exit_2_with_one_line(tmp_path, args, message):
    write(tmp_path, "prog.py", "raise SystemExit(0)\n")
    write(tmp_path, "pkg/__init__.py", "")
    (tmp_path / "dir_without_main").mkdir()
    proc = proton(tmp_path, *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "proton.hatchet").exists()


def test_help(tmp_path):
    proc = proton(tmp_path, "-h")
    assert proc.returncode == 0 and "proton-profile [options] --module pkg.mod" in proc.stdout
    for option in ("-n, --name", "-b, --backend", "-c, --context", "-m, --mode", "-d, --data", "-k, --hook",
                   "-i, --instrument", "--version"):
        assert option in proc.stdout


def test_version(tmp_path):
    from proton_core._version import __version__

    proc = proton(tmp_path, "--version")
    assert proc.returncode == 0 and proc.stdout == f"proton-profile {__version__}\n"
    proc = proton(tmp_path, "--vers")  # long options abbreviate, as upstream's argparse allows
    assert proc.stdout == f"proton-profile {__version__}\n"


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
    """The console scripts from pyproject.toml reach the same mains; a module is found from the cwd."""
    import shutil

    exe = shutil.which("proton-profile")
    viewer = shutil.which("proton-view")
    if not exe or not viewer:
        pytest.skip("proton-profile is not installed (pip install -e .)")
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/prog.py", """
        import proton_core as proton
        with proton.scope("s", metrics={"n": 4}):
            pass
    """)
    env = dict(os.environ, PROTON_BACKEND="host")
    proc = subprocess.run([exe, "--module", "pkg.prog"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([viewer, "-m", "n", "proton.hatchet"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and re.search(r"^\s*4\.000\s+└─ s$", out.stdout, re.M), out.stdout
    for command, name in ((exe, "proton-profile"), (viewer, "proton-view")):
        proc = subprocess.run([command, "--version"], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.startswith(f"{name} "), proc.stderr


# ------------------------------------------------- programs resolve as python ----
PROBE = """
    import json, os, sys
    print("PROBE", json.dumps({
        "path": sys.path, "argv": sys.argv, "file": __file__, "name": __name__,
        "spec": __spec__.name if __spec__ else None,
        "main": sys.modules["__main__"].__dict__ is globals(),
        "helper": __import__("helper").where if os.environ.get("PROBE_HELPER") else None,
    }))
"""


def probe(proc):
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


def launcher(tmp_path):
    """A stand-in for the installed console script: a file in another directory calling main()."""
    return write(tmp_path, "bin/proton-profile", """
        import sys
        from proton_core.cli import main
        sys.exit(main())
    """)


@pytest.mark.parametrize("how", ["console_script", "python_m"])
@pytest.mark.parametrize("target", [
    ["sub/prog.py", "a", "-b"],       # a script: its own directory first on sys.path
    ["-m", "pkg.tool", "x"],          # a module: the working directory first, found from it
    ["-m", "pkg", "y"],               # a package runs its __main__
    ["dirmain", "z"],                 # a directory with __main__.py
    ["link.py"],                      # a symlinked script: the link target's directory
])
def test_programs_resolve_as_python_resolves_them(tmp_path, how, target):
    """sys.path, argv, __file__, __spec__ and the helper imported next to the program: as under `python`."""
    for where in ("sub/prog.py", "pkg/tool.py", "pkg/__main__.py", "dirmain/__main__.py", "real/prog.py"):
        write(tmp_path, where, PROBE)
    write(tmp_path, "pkg/__init__.py", "")
    for where in ("sub", "pkg", "dirmain", "real", "."):
        write(tmp_path, f"{where}/helper.py", f"where = {where!r}")
    (tmp_path / "link.py").symlink_to(tmp_path / "real" / "prog.py")
    env = dict(os.environ, PROTON_BACKEND="host", PROBE_HELPER="1")
    env.pop("PYTHONPATH", None)
    run = lambda *argv: subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    expected = probe(run(*target))
    ours = ["--module", *target[1:]] if target[0] == "-m" else target
    if how == "console_script":
        got = probe(run(str(launcher(tmp_path)), "-n", "out", *ours))
    else:
        got = probe(run("-m", "proton_core", "-n", "out", *ours))
    assert got == expected
    assert (tmp_path / "out.hatchet").exists()


# --------------------------------------------------------- upstream's flags ----
def test_upstream_command_line_works_renamed(tmp_path):
    """Triton's `proton -n NAME -b BACKEND -c CONTEXT -d DATA script.py args` with the program renamed."""
    write(tmp_path, "prog.py", """
        import sys
        def launch():
            import proton_core as proton
            with proton.scope("work", metrics={"items": 1}):
                pass
        launch()
        print("args", sys.argv[1:])
    """)
    proc = proton(tmp_path, "-n", "up", "-b", "host", "-c", "python", "-d", "tree", "prog.py", "-m", "x")
    assert proc.returncode == 0, proc.stderr
    assert "args ['-m', 'x']" in proc.stdout
    assert (tmp_path / "up.hatchet").exists()
    proc = proton(tmp_path, "--name", "long", "--backend=host", "--context", "shadow", "--data", "trace", "prog.py")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "long.chrome_trace").exists()
    proc = proton(tmp_path, "--na", "abbrev", "-cshadow", "prog.py")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "abbrev.hatchet").exists()


def test_mode_reaches_the_backend(tmp_path):
    """-m is upstream's --mode: it reaches the backend (host has no modes, so it says which it has)."""
    write(tmp_path, "prog.py", "pass\n")
    for spelling in (["-m", "pc"], ["--mode", "pc"], ["--mode=pc"], ["-mpc"]):
        proc = proton(tmp_path, *spelling, "prog.py")
        assert proc.returncode == 2 and proc.stderr.startswith("proton: backend 'host' has no mode 'pc'"), spelling


def fake_triton(tmp_path, with_pass=True):
    root = tmp_path / "site" / "triton"
    write(tmp_path, "site/triton/__init__.py", "raise ImportError('the CLI must not import triton')\n")
    if with_pass:
        (root / "instrumentation").mkdir()
        (root / "instrumentation" / "libPrintLoadStoreMemSpaces.so").write_bytes(b"")
    return root


def test_instrument_runs_the_program_under_tritons_pass(tmp_path):
    """-i print-mem-spaces, as upstream: no profile, Triton told to recompile through its LLVM pass."""
    root = fake_triton(tmp_path)
    write(tmp_path, "prog.py", """
        import os, sys
        print({k: os.environ.get(k) for k in ("TRITON_ALWAYS_COMPILE", "TRITON_DISABLE_LINE_INFO",
                                              "LLVM_PASS_PLUGIN_PATH")})
        sys.exit(4)
    """)
    env = dict(os.environ, PROTON_BACKEND="host", PYTHONPATH=str(tmp_path / "site"))
    proc = subprocess.run([sys.executable, "-m", "proton_core", "-i", "print-mem-spaces", "prog.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    lib = str(root / "instrumentation" / "libPrintLoadStoreMemSpaces.so")
    want = {"TRITON_ALWAYS_COMPILE": "1", "TRITON_DISABLE_LINE_INFO": "0", "LLVM_PASS_PLUGIN_PATH": lib}
    assert str(want) in proc.stdout
    assert not list(tmp_path.glob("*.hatchet"))


def test_instrument_without_the_pass_is_one_line(tmp_path):
    fake_triton(tmp_path, with_pass=False)
    write(tmp_path, "prog.py", "print('ran')\n")
    env = dict(os.environ, PROTON_BACKEND="host", PYTHONPATH=str(tmp_path / "site"))
    proc = subprocess.run([sys.executable, "-m", "proton_core", "--instrument", "print-mem-spaces", "prog.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "ran" not in proc.stdout
    assert proc.stderr == "proton: -i print-mem-spaces: the installed Triton has no libPrintLoadStoreMemSpaces.so " \
                          "(a Triton wheel ships it)\n"
