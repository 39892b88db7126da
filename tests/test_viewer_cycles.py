"""``-m cycles`` and the derived ``-m normalized_cycles`` (cycles / warps) on intra-kernel scopes.

Scope metrics are of kind ``(exc)`` (a scope's cycles already include its nested scopes'), so
neither column is summed up the tree, and the average per warp is taken from each node's own values."""

import pytest

import proton_core as proton
from proton_core import viewer

from test_viewer import row, show

CY, WARPS, CALLS = "cycles (exc)", "warps (exc)", "scope_calls (exc)"


@pytest.fixture
def scoped(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("step"):
        for _ in range(2):
            fake.launch("kern", 1000, inner=[(("outer",), {CY: 800, WARPS: 8, CALLS: 8}),
                                             (("outer", "inner"), {CY: 300, WARPS: 8, CALLS: 16})])
    proton.finalize()
    return tmp_path / "p.hatchet"


def test_cycles_and_normalized_cycles_per_scope(capsys, scoped):
    out = show(capsys, "-m", "cycles,normalized_cycles", scoped)
    assert row(out, "outer") == [1600.0, 100.0]
    assert row(out, "inner") == [600.0, 37.5]
    assert row(out, "kern") == [None, None]  # nothing summed into the kernel or above
    assert row(out, "step") == [None, None]


def test_list_offers_normalized_cycles(capsys, scoped):
    out = show(capsys, "-l", scoped)
    assert "cycles (exc)" in out and "exclusive" in out
    assert "normalized_cycles" in out.split("derived metrics available:")[1]


def test_normalized_cycles_without_warps_is_one_line(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "q"), backend="fake")
    fake.launch("kern", 1000, inner=[(("s",), {CY: 5})])
    proton.finalize()
    assert viewer.main(["-m", "normalized_cycles", str(tmp_path / "q.hatchet")]) == 2
    err = capsys.readouterr().err.strip()
    assert "normalized_cycles" in err and "warps" in err and "\n" not in err
