"""Several mode="pcsampling" sessions in a row in one process, on an MLP training step (issue 40, item 8).

    python3 -m benchmarks.probes.pcsampling_sessions_probe [--sessions 3] [--steps 20] [--variant "[ENV=V ...] MODE"]

GPU only (torch with CUDA, proton-profiler-cupti).  Each variant runs in a fresh process.  Per session it
prints the sampler's counters just before finalize (hardware buffers found full, GetData errors, drains,
samples in and attributed) and, from the written file, the samples under each kernel and which kernels
that ran long enough (over 200 us in total) got none.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

if not __package__:
    sys.exit("run it from the repository root: python3 -m benchmarks.probes.pcsampling_sessions_probe ...")

CHILD = r"""
import json, os, sys
import torch
import proton_core as proton
from proton_core.session import MANAGER

mode, sessions, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                            torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(2048, 2048, device="cuda")
y = torch.randint(0, 10, (2048,), device="cuda")

def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()

import time
step(); torch.cuda.synchronize()  # warm: cuBLAS handles, kernels loaded
t0 = time.perf_counter()
for _ in range(steps):
    step()
torch.cuda.synchronize()
bare = time.perf_counter() - t0
report = []
for s in range(sessions):
    path = os.path.join(out, f"s{s}")
    sid = proton.start(path, backend="cupti", mode=mode)
    t0 = time.perf_counter()
    with proton.scope("train"):
        for _ in range(steps):
            step()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    backend = MANAGER.backends["cupti"].backend
    MANAGER.flush(MANAGER.backends["cupti"])
    stats = dict(backend.native.pcsampling_stats())
    (written,) = proton.finalize(sid)
    root = json.load(open(written))[0]
    kernels = {}
    def walk(node):
        for c in node["children"]:
            m = c["metrics"]
            if "device_id" in m:
                k = kernels.setdefault(c["frame"]["name"][:60], {"time_ns": 0, "samples": 0})
                k["time_ns"] += m.get("time (ns)", 0)
                stack = [c]
                while stack:
                    n = stack.pop()
                    for g in n["children"]:
                        k["samples"] += int(g["metrics"].get("samples", 0)) if "device_id" not in g["metrics"] else 0
                        stack.append(g)
            walk(c)
    walk(root)
    unsampled = sorted(k for k, v in kernels.items() if v["time_ns"] > 200_000 and v["samples"] == 0)
    keep = ("hardware_full", "get_errors", "enable_failures", "drains", "restarts", "staging_reads", "samples_in",
            "attributed", "unattributed", "late", "dropped_samples", "total_samples", "contexts", "last_error",
            "kernel_activity", "pending_samples")
    report.append({"session": s, "wall_over_bare": round(wall / bare, 2), "stats": {k: stats.get(k) for k in keep},
                   "kernels": len(kernels), "sampled_kernels": sum(1 for v in kernels.values() if v["samples"]),
                   "samples": sum(v["samples"] for v in kernels.values()), "unsampled_long_kernels": unsampled})
print(json.dumps(report))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--variant", action="append", help="'[ENV=VALUE ...] MODE' to try (default: pcsampling, "
                        "pcsampling:interval=13, pcsampling:collection=serialized)")
    args = parser.parse_args()
    variants = args.variant or ["pcsampling", "pcsampling:interval=13", "pcsampling:collection=serialized"]
    for variant in variants:
        *assignments, mode = variant.split()
        env = {**os.environ, **dict(a.split("=", 1) for a in assignments)}
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.sessions), str(args.steps), out],
                                  capture_output=True, text=True, timeout=600, env=env)
        print(f"== {variant}: exit {proc.returncode}")
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            continue
        for line in proc.stderr.splitlines()[-6:]:
            print("   stderr:", line[:200])
        for row in json.loads(proc.stdout.strip().splitlines()[-1]):
            print("  ", json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
