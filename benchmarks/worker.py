"""One measurement in one fresh process: a workload under one profiler (run.py starts
``python3 -m benchmarks.worker``).

A process of its own per measurement, so profilers never share CUPTI state,
caches or allocator history.  The profiler starts before warm-up (start cost
excluded), the measured window is K synchronized iterations, finalize is timed
apart, and the outcome is written as JSON to ``--result`` (also on failure).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

T_PROCESS = time.perf_counter()
MEASURED_SUFFIX = ".measured"  # the result so far, written before finalize


def pin_cpus() -> list[int] | None:
    """Keep every measurement on the same few cores (PROTON_BENCH_CPUS: "auto", a
    comma list, or "none"): a launch-bound loop's speed depends on the core it
    lands on, which is much of the spread between processes.  Several cores, so
    the profiler's buffer thread never competes with the launching thread."""
    spec = os.environ.get("PROTON_BENCH_CPUS", "auto").strip().lower()
    if spec in ("", "none") or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if spec == "auto":
        cpus = allowed[1:5] if len(allowed) >= 6 else None
    else:
        cpus = [int(c) for c in spec.split(",") if c.strip()]
    if cpus:
        os.sched_setaffinity(0, cpus)
    return cpus


def write_result(path: str, result: dict) -> None:
    """Atomically, so the orchestrator never reads half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def versions() -> dict:
    out = {}
    for mod in ("torch", "triton", "jax", "jaxlib", "proton_core"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = str(getattr(m, "__version__", "?"))
    return out


def run_window(wl, prof, path, warmup, iters, calibrate=0.0):
    """Start ``prof``, warm up, time ``iters`` steps (or ``calibrate`` seconds); no finalize."""
    t = time.perf_counter()
    prof.start(path)
    start_s = time.perf_counter() - t
    scope = prof.scope
    wl.prepare(scope)
    for _ in range(warmup):
        wl.step(scope)
    steps = []  # each step's wall time: one clock read per step, against milliseconds of work
    clock, step = time.perf_counter, wl.step
    with GcWatch() as gc_watch:
        t = last = clock()
        while (len(steps) < iters) if calibrate <= 0 else (last - t < calibrate or len(steps) < 2):
            step(scope)
            now = clock()
            steps.append(now - last)
            last = now
        measure_s = last - t
    wl.sync()
    iters = len(steps)
    return {"iters": iters, "warmup": warmup, "measure_s": measure_s, "per_iter_s": measure_s / max(iters, 1),
            "start_s": start_s, **step_stats(steps), **gc_watch.figures()}


def step_stats(steps: list[float]) -> dict:
    """Quantiles of the single steps: they tell a uniformly slower process from
    one with a few long interruptions, which the window's mean cannot."""
    if not steps:
        return {}
    q = statistics.quantiles(steps, n=10, method="inclusive") if len(steps) > 1 else steps * 9
    return {"step_median_s": statistics.median(steps), "step_p10_s": q[0], "step_p90_s": q[8],
            "step_max_s": max(steps)}


class GcWatch:
    """Python garbage collections inside the measured window, and their time:
    a full collection over torch's heap takes milliseconds, so whether one
    lands inside a short window moves its mean."""

    def __init__(self):
        self.counts, self.seconds, self._t = [0, 0, 0], 0.0, None

    def _callback(self, phase, info):
        if phase == "start":
            self._t = time.perf_counter()
        elif self._t is not None:
            self.seconds += time.perf_counter() - self._t
            self.counts[min(int(info.get("generation", 0)), 2)] += 1
            self._t = None

    def __enter__(self):
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._callback)
        return False

    def figures(self) -> dict:
        return {"gc_collections": list(self.counts), "gc_s": self.seconds}


def finalize(prof) -> dict:
    t = time.perf_counter()
    info = prof.finalize() or {}
    files = info.pop("files", [])
    info.update(finalize_s=time.perf_counter() - t,
                profile_bytes=sum(os.path.getsize(p) for p in files) if files else None,
                files=[os.path.basename(p) for p in files])
    return info


def measure(args) -> dict:
    from benchmarks import profilers, workloads

    cpus = pin_cpus()
    wl = workloads.make(args.workload)
    pair = profilers.paired(args.profiler)
    prof = None if pair else profilers.make(args.profiler)
    t = time.perf_counter()
    wl.setup()
    base = {"ok": True, "setup_s": time.perf_counter() - t, "kernels_per_step": getattr(wl, "kernels_per_step", None),
            "cpus": cpus, "versions": versions()}
    os.makedirs(args.profile_dir, exist_ok=True)
    if pair:
        return dict(base, **measure_paired(args, wl, pair))

    path = os.path.join(args.profile_dir, f"{args.workload}_{args.profiler}")
    result = dict(base, **run_window(wl, prof, path, args.warmup, args.iters, args.calibrate), finalize_s=None)
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    # The measured time is known now: a finalize that never ends (torch.profiler
    # on a million kernels) must not take the overhead figure with it.
    write_result(args.result + MEASURED_SUFFIX, dict(result, workload=args.workload, profiler=args.profiler))
    result.update(finalize(prof))
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result


def measure_paired(args, wl, pair) -> dict:
    """Two profilers in one process, windows alternating A B B A A B ...: the ratio
    of each pair of windows is free of the tens of percent by which processes
    differ, the noise that dominates ratios taken across processes."""
    from benchmarks import profilers

    times = {name: [] for name in pair}
    kept = {}
    for i in range(args.pairs):
        for name in pair if i % 2 == 0 else pair[::-1]:
            prof = profilers.make(name)
            path = os.path.join(args.profile_dir, f"{args.workload}_{name}_{i}")
            window = run_window(wl, prof, path, args.warmup, args.iters)
            info = finalize(prof)
            times[name].append(window["per_iter_s"])
            if name == pair[0]:
                kept = dict(window, **info)  # the last window of A stands for the run (size, count)
    a, b = (times[name] for name in pair)
    kept.update(per_iter_s=statistics.median(a), paired_ratios=[x / y for x, y in zip(a, b)],
                pair_reference=pair[1], reference_per_iter_s=statistics.median(b), windows=2 * args.pairs,
                rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    return kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--profiler", required=True)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3, help="window pairs when --profiler is A/B (same process)")
    ap.add_argument("--calibrate", type=float, default=0.0, help="seconds: measure by time, not --iters")
    ap.add_argument("--profile-dir", required=True)
    ap.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    base = {"workload": args.workload, "profiler": args.profiler}
    try:
        result = measure(args)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the table
        traceback.print_exc()
        msg = f"{type(exc).__name__}: {exc}".strip()
        result = {"ok": False, "error": msg, "traceback": traceback.format_exc()[-4000:]}
    result.update(base)
    result["process_s"] = time.perf_counter() - T_PROCESS
    write_result(args.result, result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
