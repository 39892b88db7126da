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

import pytest


@pytest.fixture(autouse=True, scope="session")
def private_tempdir(tmp_path_factory):
    """TMPDIR (for child processes) and ``tempfile.tempdir`` (for this one) point into basetemp."""
    where = str(tmp_path_factory.mktemp("tempdir", numbered=False))
    old_env, old_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = where
    tempfile.tempdir = where
    try:
        yield where
    finally:
        tempfile.tempdir = old_tempdir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
