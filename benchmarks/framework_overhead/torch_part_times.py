"""How long each native entry point of ``hook="torch"`` runs per training step, thread by thread.

    PROTON_TORCH_TIMING=1 pip install --no-build-isolation --no-deps -e plugins/torch
    python3 -m benchmarks.framework_overhead.torch_part_times [--workload mlp] [--seconds 20]

Needs the extension built with ``PROTON_TORCH_TIMING=1``: each entry point (a record's entry and exit,
the provider a launch asks, a module call's enter and exit, the backward call's enter and exit, an
autograd node's engine record) then counts its TSC cycles and calls per thread. Runs the workload under
``hook="torch"`` and prints, per thread, microseconds and calls per step of each, beside the step time,
so that what our code itself takes can be told from what it makes others take (the rest of a ratio).
Each timed call pays two TSC reads (measured here, printed as "timer"). Parts in parentheses are pieces
of the others (a provider's or a record's classification, a module's name and core scope), not added
to the thread's total.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.framework_overhead.torch_part_times ...")


def thread_names() -> dict[int, str]:
    """os thread id -> name; the Python main thread is "main"."""
    out = {}
    for entry in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{entry}/comm") as f:
                out[int(entry)] = "main" if int(entry) == os.getpid() else f.read().strip()
        except OSError:
            continue
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="mlp")
    ap.add_argument("--profiler", default="ours-torch")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    import torch  # noqa: F401  (the extension links against its libraries)
    from proton_torch import _C

    if _C.timing() is None:
        print("proton_torch._C was built without PROTON_TORCH_TIMING=1: rebuild it with it (see the docstring)")
        return 2
    from benchmarks import profilers, workloads

    wl = workloads.make(args.workload)
    wl.setup()
    prof = profilers.make(args.profiler)
    prof.start(os.path.join(tempfile.mkdtemp(), "parts"))
    for _ in range(20):
        wl.step(prof.scope)
    hz, _ = _C.timing(True)
    steps, t0 = [], time.perf_counter()
    last = t0
    while last - t0 < args.seconds:
        wl.step(prof.scope)
        now = time.perf_counter()
        steps.append(now - last)
        last = now
    hz, threads = _C.timing(True)
    prof.finalize()
    n = len(steps)
    names = thread_names()
    timer = [p["(empty timer)"] for _, p in threads if p["(empty timer)"][1]]
    timer_ns = timer[0][0] / hz * 1e9 / timer[0][1] if timer else float("nan")
    print(f"{args.workload} under {args.profiler}: {n} steps, median step {statistics.median(steps) * 1e6:.1f} us, "
          f"TSC {hz / 1e9:.3f} GHz, timer {timer_ns:.1f} ns a call (not subtracted)")
    for tid, parts in threads:
        parts.pop("(empty timer)", None)
        calls = sum(c for p, (_, c) in parts.items() if not p.startswith("("))
        if calls == 0:
            continue
        total = sum(cy for p, (cy, _) in parts.items() if not p.startswith("(")) / hz * 1e6 / n
        print(f"  thread {names.get(tid, tid)!s:20s} {total:7.1f} us/step in {calls / n:6.1f} calls/step")
        for part, (cycles, count) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
            if count:
                print(f"    {part:16s} {cycles / hz * 1e6 / n:7.2f} us/step {count / n:7.1f} calls/step "
                      f"{cycles / hz * 1e9 / count:8.1f} ns/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
