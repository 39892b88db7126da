"""A profiled Python program that execs another program: what it recorded is written before the exec, and the
program that replaces it (same pid) is profiled too, beside that file, never over it."""

import sys

from distributed_helpers import cli, names, write

FIRST = """
    import os, sys
    import proton_core as proton
    with proton.scope("before_exec", metrics={"items": 1}):
        pass
    os.execv(sys.executable, [sys.executable, "second.py"])
"""

SECOND = """
    import proton_core as proton
    with proton.scope("after_exec", metrics={"items": 2}):
        pass
"""


def test_the_script_of_the_command_line_writes_before_it_execs(tmp_path):
    write(tmp_path, "first.py", FIRST)
    write(tmp_path, "second.py", SECOND)
    result = cli(tmp_path, "-n", "out", "first.py")
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / "out.hatchet") == {"before_exec"}
    (followed,) = tmp_path.glob("out.pid*.hatchet")  # the program it became is followed
    assert names(followed) == {"after_exec"}
    assert "os.execv replaces the process" in result.stderr


def test_a_followed_process_that_execs_keeps_both_files(tmp_path):
    write(tmp_path, "first.py", FIRST)
    write(tmp_path, "second.py", SECOND)
    result = cli(tmp_path, "-n", "out", sys.executable, "first.py")
    assert result.returncode == 0, result.stderr
    files = sorted(tmp_path.glob("out.pid*.hatchet"))
    assert len(files) == 2, (files, result.stderr)
    by_names = {frozenset(names(f)) for f in files}
    assert by_names == {frozenset({"before_exec"}), frozenset({"after_exec"})}
    assert "was written by this process before it became this program (exec)" in result.stderr
