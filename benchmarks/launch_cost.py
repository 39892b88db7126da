"""Per-launch cost of each profiler, in nanoseconds, measured in one process.

    python3 -m benchmarks.launch_cost [--launches 20000] [--windows 12] [--depth 0,20]

The overhead benchmark (run.py) compares whole processes, which differ by tens
of percent; this one alternates short windows of the same launch loop under
each profiler in one process (start, time N launches, finalize), so a few tens
of nanoseconds per launch show.  Launches are torch in-place adds (the GIL
held, as in eager PyTorch) and one-program Triton kernels, made from a Python
stack of the given extra depth, since the python context walks it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.launch_cost ...")

from benchmarks import profilers  # noqa: E402

DEFAULT_PROFILERS = "none,floor,ours-shadow,ours-python"


def at_depth(depth, fn):
    """Call fn from ``depth`` extra Python frames."""
    return fn() if depth <= 0 else at_depth(depth - 1, fn)


def make_loops(torch, n):
    from benchmarks.triton_kernels import tiny_kernel

    a = torch.zeros(1, device="cuda")

    def torch_adds():
        for _ in range(n):
            a.add_(1.0)
        torch.cuda.synchronize()

    def triton_launches():
        for _ in range(n):
            tiny_kernel[(1,)](a)
        torch.cuda.synchronize()

    from benchmarks import workloads

    mlp = workloads.MLP()
    mlp.setup()
    steps = max(1, n // 100)

    def mlp_steps():  # launches from many call sites: the python context's stack memo misses
        for _ in range(steps):
            mlp.step(workloads._no_scope)

    # name -> (loop, units it runs: launches, or MLP steps)
    return {"torch": (torch_adds, n), "triton": (triton_launches, n), "mlp-step": (mlp_steps, steps)}


def window(name, loop, depth, units):
    prof = profilers.make(name)
    window.count = getattr(window, "count", 0) + 1  # a file per window: none replaces another's
    prof.start(os.path.join("/tmp", f"proton_launch_cost_{os.getpid()}_{window.count}"))
    at_depth(depth, loop)  # warm: first launches intern their stacks
    t = time.perf_counter()
    at_depth(depth, loop)
    dt = time.perf_counter() - t
    prof.finalize()
    return dt / units * 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=20000, help="launches per window")
    ap.add_argument("--windows", type=int, default=12, help="windows per profiler and case")
    ap.add_argument("--depth", default="0,20", help="extra Python stack depths, comma list")
    ap.add_argument("--profilers", default=DEFAULT_PROFILERS)
    args = ap.parse_args(argv)
    import torch

    names = [p for p in args.profilers.split(",") if p]
    loops = make_loops(torch, args.launches)
    for loop, _ in loops.values():
        loop()  # compile and load
    print(f"{'case':<18}" + "".join(f"{n:>16}" for n in names) + "   (ns per launch or MLP step, median; +over none)")
    for kind, (loop, units) in loops.items():
        for depth in (int(d) for d in args.depth.split(",")):
            got = {n: [] for n in names}
            for w in range(args.windows):
                order = names[w % len(names):] + names[:w % len(names)]  # rotate: no profiler always first
                for n in order:
                    got[n].append(window(n, loop, depth, units))
            med = {n: statistics.median(v) for n, v in got.items()}
            base = med.get("none")
            cells = "".join(f"{med[n]:>9.0f} ({med[n] - base:+5.0f})" if base else f"{med[n]:>16.0f}" for n in names)
            print(f"{kind + ' depth ' + str(depth):<18}{cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
