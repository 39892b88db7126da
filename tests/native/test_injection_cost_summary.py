"""benchmarks/injection_cost.py's arithmetic on CPU: paired differences per round, intervals, counts checked."""

from __future__ import annotations

import subprocess
import sys

import native_prog


def rounds(n: int) -> list[dict]:
    out = []
    for r in range(n):
        base = 2000 + 10 * r  # the machine drifts from round to round; the differences do not
        out.append({
            "prog/none": {"ns_per_launch": base, "kernels": None},
            "prog/floor": {"ns_per_launch": base + 300, "kernels": 21000, "dropped": 0},
            "prog/proton": {"ns_per_launch": base + 450, "kernels": 21000 if r else 20999},
            "python/none": {"ns_per_launch": base + 5, "kernels": None},
            "python/floor": {"error": "python/floor: exit 1: boom"} if r == 3 else
                            {"ns_per_launch": base + 305, "kernels": 21000},
            "python/proton": {"ns_per_launch": base + 500, "kernels": 21000},
            "prog/native": {"ns_per_launch": base + 2400, "kernels": 21000},
        })
    return out


def test_differences_are_paired_within_rounds_and_misses_are_said():
    from benchmarks.injection_cost import summarize, table

    summary = summarize(rounds(12), 20000)
    assert summary["prog/proton"]["over_none"]["median"] == 450
    assert summary["prog/proton"]["over_none"]["ci"] == [450, 450], "the drift is paired away"
    assert summary["prog/proton"]["over_floor"]["median"] == 150
    assert summary["prog/proton"]["ns"]["ci"][0] < summary["prog/proton"]["ns"]["ci"][1]
    assert summary["prog/proton"]["kernels_missed"] == 1 and summary["prog/floor"]["kernels_missed"] == 0
    assert "over_none" not in summary["prog/none"] and "kernels_missed" not in summary["prog/none"]
    assert summary["python/floor"]["rounds"] == 11 and summary["python/floor"]["errors"] == ["python/floor: exit 1: boom"]
    assert summary["python/proton"]["over_floor"]["median"] == 195
    assert summary["prog/native"]["over_floor"]["median"] == 2100, "the program's floor, not the Python process's"
    assert "over_floor" not in summary["python/none"]
    text = table(summary, 20000, 12)
    assert "MISSED in 1 rounds" in text and "error: python/floor: exit 1: boom" in text
    few = summarize(rounds(3), 20000)
    assert few["prog/proton"]["over_none"] == {"median": 450, "ci": None}, "no interval under 10 rounds"


def test_unknown_cells_are_refused_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.injection_cost", "--cells", "prog/nope"],
                          capture_output=True, text=True, cwd=native_prog.REPO, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("injection_cost: unknown cell 'prog/nope': choose from prog/none, prog/floor, "
                                   "prog/proton, python/none, python/floor, python/proton, prog/native")
