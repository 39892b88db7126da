"""How long ``proton-view`` takes to merge and print a distributed run's rank files, on one core.

    python3 -m benchmarks.merge_ranks                          # 64 ranks of 100 000 nodes (issue 45: <= 10 s)
    python3 -m benchmarks.merge_ranks --ranks 4 --nodes 10000  # what CI can afford
    python3 -m benchmarks.merge_ranks --keep /tmp/ranks        # keep the files (and reuse them next time)

Every rank has the same tree (a training run's shape, from :mod:`benchmarks.viewer_speed`): the
ranks of one SPMD job run the same program; each rank's numbers differ (a per-rank factor and
jitter), rank 1 is a straggler on one layer.  Files carry the ``distributed`` metadata the rank
writer puts on them.  The command runs pinned to one core (``taskset -c 0`` where it exists), its
output to a file; the figure is its wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

from benchmarks import viewer_speed

LIMIT_S = 10.0


def _tree(nodes: int) -> list:
    """The steps of a ~``nodes``-node tree (the same for every rank)."""
    rnd = random.Random(0)
    steps, count, index = [], 1, 0
    while count < nodes:
        step = viewer_speed._step(rnd, index, 24)
        steps.append(step)
        count += viewer_speed._size(step)
        index += 1
    return steps


def _scaled(node: dict, factor: float, rnd: random.Random, straggler: bool) -> dict:
    """A copy of ``node`` with its times scaled (the rank's own numbers), three times slower under every
    ``model.layers.7`` on the straggler; iterative."""
    out = {"frame": node["frame"], "metrics": {}, "children": []}
    stack = [(node, out, False)]
    while stack:
        src, dst, slow = stack.pop()
        for key, value in src["metrics"].items():
            if key in ("time (ns)", "cpu_time (ns)"):
                value = int(value * factor * rnd.uniform(0.95, 1.05) * (3 if slow else 1))
            dst["metrics"][key] = value
        for child in src["children"]:
            copy = {"frame": child["frame"], "metrics": {}, "children": []}
            dst["children"].append(copy)
            stack.append((child, copy, slow or (straggler and child["frame"]["name"] == "model.layers.7")))
    return out


def generate(directory: str, ranks: int, nodes: int) -> int:
    """Write ``ranks`` rank files of about ``nodes`` nodes to ``directory``; returns the node count per file."""
    steps = _tree(nodes)
    size = 1 + sum(viewer_speed._size(s) for s in steps)
    devices = {"CUDA": {"0": {"arch": "90", "num_sms": 132}}}
    for rank in range(ranks):
        rnd = random.Random(rank + 1)
        factor = 1.0 + 0.02 * rank
        root = {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"time (ns)": 0, "count": 0},
                "metadata": {"name": "bench", "context": "shadow", "data": "tree",
                             "distributed": {"rank": rank, "world_size": ranks, "local_rank": rank % 8,
                                             "node_rank": rank // 8, "host": f"node{rank // 8}", "pid": 1000 + rank,
                                             "device": rank % 8, "run_id": "bench-run", "launcher": "torchrun",
                                             "backend": "nccl"}},
                "children": [_scaled(s, factor, rnd, straggler=rank == 1) for s in steps]}
        with open(os.path.join(directory, f"bench.rank{rank}.hatchet"), "w") as f:
            f.write(json.dumps([root, devices], separators=(",", ":")))
    return size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--keep", default=None, metavar="DIR", help="write the files here and keep them")
    parser.add_argument("--args", default="", help="extra proton-view arguments, e.g. '--sort imbalance'")
    args = parser.parse_args(argv)
    directory = args.keep or tempfile.mkdtemp(prefix="merge_ranks.")
    os.makedirs(directory, exist_ok=True)
    try:
        marker = os.path.join(directory, f"generated-{args.ranks}x{args.nodes}")
        if os.path.exists(marker):
            size = int(open(marker).read())
        else:
            size = generate(directory, args.ranks, args.nodes)
            with open(marker, "w") as f:
                f.write(str(size))
        mb = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)) / 1e6
        cmd = [sys.executable, "-m", "proton_core.viewer", *args.args.split(), directory]
        if shutil.which("taskset"):
            cmd = ["taskset", "-c", "0", *cmd]
        wall, rss = viewer_speed.run(cmd, os.path.join(directory, "out.txt"), timeout=600)
        verdict = "within" if wall is not None and wall <= LIMIT_S else "OVER"
        print(f"| ranks | nodes per rank | files MB | wall s (1 core) | peak RSS MB |\n|---|---|---|---|---|\n"
              f"| {args.ranks} | {size} | {mb:.0f} | {wall if wall is None else round(wall, 2)} | {rss:.0f} |")
        print(f"{verdict} the {LIMIT_S:.0f} s budget of issue 45 (which asks for 64 ranks of 100 000 nodes)")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
