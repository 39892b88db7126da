"""Triton's own ``proton-viewer`` on our files: the numbers our viewer prints (local only, not in CI).

Triton must never be importable by the suite (it would shadow what we test),
so its viewer runs in a private virtual environment through
``scripts/upstream_fixtures.py values``: set ``PROTON_TRITON_PYTHON`` to that
environment's python (``python3 -m venv /tmp/v && /tmp/v/bin/pip install
triton==3.6.0 llnl-hatchet msgpack``).  Without it, these tests are skipped.
"""

import json
import os
import subprocess

import pytest

import proton_core as proton
from proton_core.viewer.table import read as read_table
from test_file_parity import DATA, EXPECTED, METRICS, assert_same, our_values, run_workload

PYTHON = os.environ.get("PROTON_TRITON_PYTHON", "")
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "upstream_fixtures.py")

pytestmark = pytest.mark.skipif(
    not (PYTHON and os.access(PYTHON, os.X_OK)),
    reason="Triton's viewer runs only in a private venv: set PROTON_TRITON_PYTHON to its python "
           "(with triton, llnl-hatchet, msgpack)")


def triton_values(path, metrics=METRICS) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([PYTHON, SCRIPT, "values", str(path), "-m", ",".join(metrics)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_tritons_viewer_reads_our_file_as_ours(tmp_path, fake):
    """Every metric kind, on the file our writer wrote: Triton's viewer and ours print the same."""
    run_workload(fake, ((str(tmp_path / "p"),), {}))
    with proton.cpu_timed_scope("host"):
        sum(range(1000))
    proton.finalize()
    path = tmp_path / "p.hatchet"
    theirs = triton_values(path)
    assert_same(our_values(read_table(path), METRICS), theirs)
    # inclusive metrics are summed by both (marked on the root), exclusive ones and properties by neither
    assert theirs["u"]["ROOT"] == 8.0 and theirs["flops16"]["ROOT"] == 5.0e9
    assert theirs["a"]["ROOT"] is None and theirs["p"]["ROOT/test0"] == 3.0 and theirs["p"]["ROOT"] is None


def test_tritons_viewer_gives_the_expected_numbers_on_upstreams_file():
    """The numbers tests/test_file_parity.py holds ours to are Triton's viewer's own."""
    assert triton_values(os.path.join(DATA, "upstream.hatchet")) == EXPECTED["metrics"]
