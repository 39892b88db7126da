"""Proton's messages: one line on stderr by default, the program's logging when it has some."""

import subprocess
import sys
import textwrap

CODE = """
    import logging, proton_core as proton
    {setup}
    from proton_core import log
    log.warn("first line\\nsecond part")
"""


def run(setup):
    code = textwrap.dedent(CODE.format(setup=setup))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_one_prefixed_line_on_stderr_without_logging_configured():
    out = run("")
    assert out.returncode == 0 and out.stderr == "proton: first line second part\n"


def test_the_programs_logging_shows_it_once():
    out = run("logging.basicConfig(format='LOG %(name)s %(levelname)s %(message)s')")
    assert out.stderr == "LOG proton WARNING first line second part\n"


def test_silenced_the_usual_way():
    assert run("logging.getLogger('proton').setLevel(logging.ERROR)").stderr == ""
