"""The test suite writes only under pytest's temporary directories (issue 40 item 9).

Tests used to start sessions named '/tmp/_nvtx_env' and the like, leaving profiles in /tmp after
every run.  A test's files go under ``tmp_path``; this check finds a literal /tmp path given to code
that writes (a session name, an open, a path join) in any test file.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: A quoted string that starts with /tmp/ (or is /tmp): a fixed place in the shared temporary directory.
LITERAL = re.compile(r"""(['"])/tmp(/[^'"]*)?\1""")
#: Literal /tmp paths that are never written: arguments a test only compares.
ALLOWED = {("tests/test_benchmark_harness.py", "'/tmp/lane0'"), ("tests/test_benchmark_harness.py", '"/tmp/lane0"')}


def _test_files():
    found = []
    for top in ["tests"] + [os.path.join("plugins", p, "tests") for p in sorted(os.listdir(os.path.join(ROOT, "plugins")))]:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            found += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in files if f.endswith(".py")]
    return sorted(found)


def test_no_test_names_a_fixed_path_in_tmp():
    offenders = []
    for rel in _test_files():
        if rel == "tests/test_tmp_hygiene.py":
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for m in LITERAL.finditer(line):
                    if (rel, m.group(0)) not in ALLOWED:
                        offenders.append(f"{rel}:{number}: {m.group(0)}")
    assert not offenders, "use tmp_path instead of a fixed /tmp path:\n" + "\n".join(offenders)


def test_the_temporary_directory_is_private_to_the_run(tmp_path_factory):
    """What code under test writes to the temporary directory lands under pytest's basetemp (conftest.py)."""
    import tempfile

    base = str(tmp_path_factory.getbasetemp())
    assert tempfile.gettempdir().startswith(base + os.sep)
    assert os.environ["TMPDIR"] == tempfile.gettempdir()
    fd, path = tempfile.mkstemp()
    os.close(fd)
    assert path.startswith(base + os.sep)
    os.unlink(path)
