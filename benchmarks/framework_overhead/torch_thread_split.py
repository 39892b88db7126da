"""Where a profiler's cost lands, thread by thread, on a GPU training step (GPU machine).

    python3 -m benchmarks.framework_overhead.torch_thread_split [--workload mlp] [--seconds 150]
        [--profilers floor,floor-record-function,ours-torch] [--window 0.2]

A torch training step runs on two threads in turn: the Python thread (forward, optimizer, the final
synchronize) and autograd's device thread (backward, while the Python thread waits). A ratio of step
times says how much a profiler costs; this says on which thread, so a cost can be looked for where it
is. All profilers run in one process, in windows of ``--window`` seconds rotating through them (the
order reversed every other round) until ``--seconds`` are spent. Per window: the median step time and
each thread's on-CPU and run-queue time from ``/proc/self/task/*/schedstat`` (nanoseconds; no hardware
counters needed), per step. Printed: medians over the rounds, and each profiler's step time over the
first one's, paired by round (median and 90 % bootstrap interval).
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import tempfile
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.framework_overhead.torch_thread_split ...")


def thread_times() -> dict[int, tuple[str, int, int]]:
    """tid -> (name, on-CPU ns, run-queue wait ns) of every thread of this process; the Python main
    thread is named "main" (its own name is the program's)."""
    out = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        try:
            with open(f"/proc/self/task/{entry}/schedstat") as f:
                run, wait = f.read().split()[:2]
            with open(f"/proc/self/task/{entry}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        out[tid] = ("main" if tid == os.getpid() else name, int(run), int(wait))
    return out


def per_thread(before: dict, after: dict, steps: int) -> dict[str, tuple[float, float]]:
    """(on-CPU ns, wait ns) per step between two ``thread_times``, summed over threads of one name."""
    sums = collections.defaultdict(lambda: [0, 0])
    for tid, (name, run, wait) in after.items():
        _, run0, wait0 = before.get(tid, (name, 0, 0))
        sums[name][0] += run - run0
        sums[name][1] += wait - wait0
    return {name: (run / steps, wait / steps) for name, (run, wait) in sums.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="mlp")
    ap.add_argument("--profilers", default="floor,floor-record-function,ours-torch")
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--window", type=float, default=0.2)
    args = ap.parse_args(argv)
    from benchmarks.floor import build as floor_build

    os.environ["PROTON_BENCH_FLOOR_DIR"] = floor_build.build(tempfile.mkdtemp())
    from benchmarks import profilers, workloads
    from benchmarks.report import median_ci

    names = args.profilers.split(",")
    wl = workloads.make(args.workload)
    wl.setup()
    steps_of = {n: [] for n in names}
    means_of = {n: [] for n in names}  # the official benchmark's figure: a window's mean step
    threads_of = {n: collections.defaultdict(list) for n in names}
    workdir = tempfile.mkdtemp()
    end = time.time() + args.seconds
    rounds = 0
    while time.time() < end:
        for name in names if rounds % 2 == 0 else names[::-1]:
            prof = profilers.make(name)
            prof.start(os.path.join(workdir, f"{name}_{rounds}"))
            for _ in range(3):
                wl.step(prof.scope)
            gc.collect()
            gc.disable()
            before, steps = thread_times(), []
            t0 = last = time.perf_counter()
            while last - t0 < args.window:
                wl.step(prof.scope)
                now = time.perf_counter()
                steps.append(now - last)
                last = now
            after = thread_times()
            gc.enable()
            prof.finalize()
            steps_of[name].append(statistics.median(steps))
            means_of[name].append(statistics.fmean(steps))
            for thread, figures in per_thread(before, after, len(steps)).items():
                threads_of[name][thread].append(figures)
        rounds += 1
    first = steps_of[names[0]]
    print(f"{args.workload}: {rounds} rounds of {args.window} s windows")
    for name in names:
        ratios = [a / b for a, b in zip(steps_of[name], first)]
        ci = median_ci(ratios)
        mean_ratios = [a / b for a, b in zip(means_of[name], means_of[names[0]])]
        mci = median_ci(mean_ratios)
        print(f"{name:24s} step {statistics.median(steps_of[name]) * 1e6:8.1f} us   / {names[0]}: "
              f"{statistics.median(ratios):.3f}" + (f" [90% CI {ci[0]:.3f}-{ci[1]:.3f}]" if ci else "")
              + f"   window means / {names[0]}: {statistics.median(mean_ratios):.3f}"
              + (f" [{mci[0]:.3f}-{mci[1]:.3f}]" if mci else ""))
        for thread, rows in sorted(threads_of[name].items(), key=lambda kv: -statistics.median(r[0] for r in kv[1])):
            run = statistics.median(r[0] for r in rows)
            if run >= 500:  # ns per step: threads that do anything per step
                wait = statistics.median(r[1] for r in rows)
                print(f"    {thread:20s} on-CPU {run / 1e3:8.1f} us/step   waiting to run {wait / 1e3:6.1f} us/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
