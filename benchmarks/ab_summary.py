"""The table of a before/after run (scripts/ab_bench.sh): each measure's median per side, with intervals.

    python3 -m benchmarks.ab_summary DIR        # DIR: $OUT/ab of ab_bench.sh (files r<round>-<side>-<measure>...)

Measures, one value per round and side:

* ``launch`` -- ns per torch launch that ours (shadow context) and the bare-CUPTI floor add to the unprofiled
  loop, same process, same windows (launch_cost.py's "torch depth 0" row);
* ``triton`` -- us per launch of the native Triton hooks, kernel with launch_metadata, above the bare hook
  (triton_hook_overhead.py's "with metadata, above the bare hook" line), and the same without metadata;
* ``nvtx`` -- ns of Proton's own per NVTX push+pop, from Python and from a native thread (nvtx_cost.py);
* ``decoder`` -- hook="torch" on the decoder step over the floor, median of the round's in-process window pairs.

Each row gives the median over rounds per side with a bootstrap 90 % interval (report.median_ci), and
after/before with the interval of the per-round ratios (rounds pair the two sides: they ran back to back).
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys

from benchmarks.report import median_ci

SIDES = ("before", "after")


def _launch(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("torch depth 0"):
            added = [float(x) for x in re.findall(r"\(\s*([+-]\d+)\)", line)]  # over none: none, floor, ours-shadow
            if len(added) >= 3:
                return {"launch: ours over unprofiled (ns)": added[2], "launch: floor over unprofiled (ns)": added[1]}
    return {}


def _triton(path):
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*(with|w/o) metadata, above the bare hook: (.*)", line)
        if m:
            native = re.search(r"native ([+-]\d+(?:\.\d+)?) us", m.group(2))
            if native:
                out[f"triton: native hook, {m.group(1)} metadata (us)"] = float(native.group(1))
    return out


def _nvtx(path):
    for line in reversed(open(path, encoding="utf-8", errors="replace").read().splitlines()):
        if line.startswith("{"):
            own = json.loads(line)["own"]
            return {"nvtx: push+pop from Python (ns)": own["python"], "nvtx: native thread (ns)": own["native"]}
    return {}


def _decoder(path):
    try:
        doc = json.load(open(os.path.join(path, "bench.json"), encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    for run in doc.get("runs", []):
        if run.get("workload") == "decoder" and run.get("paired_ratios"):
            return {"decoder: hook=torch / floor": statistics.median(run["paired_ratios"])}
    return {}


READERS = {"launch.log": _launch, "triton.log": _triton, "nvtx.log": _nvtx, "decoder": _decoder}


def collect(folder):
    """{measure: {side: {round: value}}} from one ab_bench.sh output folder."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "r*-*-*"))):
        m = re.match(r"r(\d+)-(before|after)-(.+)$", os.path.basename(path))
        if not m or m.group(3) not in READERS:
            continue
        for measure, value in READERS[m.group(3)](path).items():
            found.setdefault(measure, {}).setdefault(m.group(2), {})[int(m.group(1))] = value
    return found


def _fmt(values):
    if not values:
        return "-"
    lo, hi = median_ci(values) or (min(values), max(values))  # too few values for an interval: their range
    return f"{statistics.median(values):.3f} [{lo:.3f}-{hi:.3f}]"


def table(found):
    lines = ["| measure | before | after | after / before, per round |", "|---|---|---|---|"]
    for measure, sides in found.items():
        before, after = sides.get("before", {}), sides.get("after", {})
        both = sorted(set(before) & set(after))
        ratios = [after[r] / before[r] for r in both if before[r]]
        lines.append(f"| {measure} ({len(both)} rounds) | {_fmt(list(before.values()))} | {_fmt(list(after.values()))} | "
                     f"{_fmt(ratios)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    print(table(collect(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
