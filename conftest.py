"""Suite-wide test hygiene: the temporary directory every test and child process sees is a private
one under pytest's own base directory (issue 40 item 9).

Proton writes to the temporary directory by design (fallback profiles when the output cannot be
written, periodic parts kept for a retry, the claims that keep two processes of one run from
replacing each other's file), and compilers, pip and torch put their scratch files there: run
against /tmp, every test run left them behind.  Pointed here, they go with the rest of pytest's
temporary files, which pytest keeps for the last few runs only.
"""

import os
import tempfile

_saved: list = []


def pytest_sessionstart(session):
    """Before collection: TMPDIR (for child processes) and ``tempfile.tempdir`` (for this one) point into
    basetemp, and hypothesis keeps its caches there, not in a .hypothesis folder in the checkout."""
    factory = getattr(session.config, "_tmp_path_factory", None)  # pytest's own, with the run's basetemp
    if factory is None:  # the tmpdir plugin is off (-p no:tmpdir): leave the environment alone
        return
    where = str(factory.mktemp("tempdir", numbered=False))
    _saved.append((os.environ.get("TMPDIR"), tempfile.tempdir))
    os.environ["TMPDIR"] = where
    tempfile.tempdir = where
    try:
        from hypothesis import configuration
    except ImportError:
        return
    configuration.set_hypothesis_home_dir(os.path.join(where, "hypothesis"))


def pytest_sessionfinish(session):
    if not _saved:
        return
    old_env, old_tempdir = _saved.pop()
    tempfile.tempdir = old_tempdir
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env
