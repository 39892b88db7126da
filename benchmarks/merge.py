"""Join bench.json files of several device calls into one report.

A full run does not fit one call on the GPU machine, so it is split by
workload or profiler (``run.py --workloads ... --profilers ...``); each part
keeps its own rounds with their own unprofiled baseline, and this recomputes
the tables over all of them.

    python3 -m benchmarks.merge --out DIR part1/bench.json part2/bench.json ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.merge ...")

from benchmarks import report  # noqa: E402

ROUND_STRIDE = 1000  # a part's rounds are shifted past the previous parts' by multiples of this


def merge(docs: list[dict], label: str = "part") -> dict:
    """One bench document from several runs.

    Rounds keep their own unprofiled (and floor) run, so each part's rounds are
    renumbered apart and ratios stay within a round; a workload measured in
    several parts gets the union of their profilers.
    """
    plan, runs, notes, parts = {}, [], [], []
    offset = 0
    for i, doc in enumerate(docs):
        meta = doc.get("meta", {})
        for workload, entry in doc.get("plan", {}).items():
            if workload not in plan:
                plan[workload] = dict(entry, profilers=list(entry.get("profilers", [])))
            else:
                have = plan[workload]["profilers"]
                have += [p for p in entry.get("profilers", []) if p not in have]
        for run in doc.get("runs", []):
            runs.append(dict(run, round=offset + run["round"], part=i))
        # Past every round of this part, so a part that is itself a merge keeps its rounds apart.
        last = max((run["round"] for run in doc.get("runs", [])), default=-1)
        offset += (last // ROUND_STRIDE + 1) * ROUND_STRIDE
        notes.extend(f"{label} {i + 1}: {n}" for n in meta.get("notes") or [])
        parts.append(meta.get("title", "?"))
    first = docs[0].get("meta", {})
    meta = {key: first.get(key) for key in ("gpu", "date", "python", "versions", "mode")}
    meta.update(notes=notes, parts=parts, rounds_done=min(d.get("meta", {}).get("rounds_done", 0) for d in docs),
                title=f"{first.get('gpu')}, {first.get('date')}, merged from {len(docs)} runs")
    return {"meta": meta, "plan": plan, "runs": runs, "summary": report.summarize(runs, plan),
            "fidelity": report.fidelity(runs, plan)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the merged bench.json and bench.md")
    ap.add_argument("files", nargs="+", help="bench.json files written by run.py")
    args = ap.parse_args(argv)
    docs = []
    for path in args.files:
        try:
            with open(path) as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as exc:
            print(f"merge.py: cannot read {path}: {exc}; pass bench.json files written by run.py", file=sys.stderr)
            return 2
    try:
        doc = merge(docs)
    except (KeyError, TypeError, AttributeError) as exc:
        print(f"merge.py: not a bench.json written by run.py (missing {exc}); pass run.py's output files",
              file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(doc, f, indent=1)
    md = report.render_markdown(doc["summary"], doc["fidelity"], doc["plan"], doc["meta"])
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(md)
    print(md)
    print(report.render_text(doc["summary"], doc["fidelity"], doc["plan"], doc["meta"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
