"""Join bench.json files of several device calls into one report.

A full run does not fit one call on the GPU machine, so it is split by
workload (``run.py --workloads ...``); each part keeps its own rounds and its
own unprofiled baseline, and this recomputes the tables over all of them.

    python3 benchmarks/merge.py --out DIR part1/bench.json part2/bench.json ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import report  # noqa: E402


def merge(docs: list[dict]) -> dict:
    """One bench document: plans and runs side by side; a workload measured twice is an error."""
    plan, runs, notes, parts = {}, [], [], []
    for doc in docs:
        meta = doc.get("meta", {})
        overlap = sorted(set(plan) & set(doc.get("plan", {})))
        if overlap:
            raise ValueError(f"workload {', '.join(overlap)} is in more than one file; merge parts of one run only")
        plan.update(doc.get("plan", {}))
        runs.extend(doc.get("runs", []))
        notes.extend(meta.get("notes") or [])
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
    except ValueError as exc:
        print(f"merge.py: {exc}", file=sys.stderr)
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
