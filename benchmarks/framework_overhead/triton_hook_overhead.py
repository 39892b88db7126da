"""Per-launch cost of hook="triton"'s enter/exit hooks on CPU (no GPU, no Triton needed).

    python3 -m benchmarks.framework_overhead.triton_hook_overhead [--launches N] [--repeats R]

Calls the hooks exactly as Triton's launcher does, with a LazyDict-shaped
object, under the host backend, and prints microseconds per launch for a
kernel with launch_metadata, one without, and with no session active, for
both implementations: the native hooks (``proton_frameworks._triton_fast``,
what is installed where it was built) and the Python ones
(``PROTON_TRITON_NATIVE=0``).  Each figure is the median of R runs of N
launches, the variants interleaved run by run, so a noisy machine shifts
them alike ("no session active": the one session deactivated).  "bare" is
the floor any hook pays: building the LazyDict and evaluating
launch_metadata (``meta.get()``), as ``FloorTritonHook`` in
benchmarks/profilers.py does; for a kernel without launch_metadata, building
the LazyDict and calling a hook that does nothing.  Compare with Triton's own launch cost (a few
microseconds per launch) to see the launch-bound slowdown; the
GPU-machine figure belongs in docs/performance.md.
"""

import argparse
import os
import statistics
import tempfile
import time

import proton_core as proton
from proton_frameworks import triton_hook
from proton_frameworks.testing import LazyDict

try:
    from proton_frameworks import _triton_fast
except ImportError:  # built without a C compiler: the Python hooks only
    _triton_fast = None


def metadata(grid, meta, args):
    return {"name": "matmul_1024", "flops16": 2 * 1024 ** 3, "bytes": 6 * 1024 ** 2}


def per_launch_us(n, with_metadata, enter, leave):
    t0 = time.perf_counter()
    for _ in range(n):
        meta = LazyDict({"name": "matmul_kernel", "function": 0, "stream": 0})  # Triton builds this anyway
        if with_metadata:
            meta.add(metadata, ((8, 8, 1), None, {}))
        enter(meta)
        leave(meta)
    return (time.perf_counter() - t0) / n * 1e6


def bare_enter(meta):
    meta.get()


def bare_exit(meta):
    pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=20000, help="launches per timed run")
    parser.add_argument("--repeats", type=int, default=21, help="timed runs per variant (interleaved)")
    args = parser.parse_args()
    n = args.launches
    impls = {"python": (triton_hook.launch_enter, triton_hook.launch_exit)}
    if _triton_fast is not None:
        impls["native"] = (_triton_fast.launch_enter, _triton_fast.launch_exit)
    bare = {True: "bare hook (meta.get() only), metadata", False: "bare hook, kernel w/o metadata"}
    active = [(bare[m], m, (bare_enter, bare_exit)) for m in (True, False)]
    for with_metadata in (True, False):
        what = "with" if with_metadata else "w/o"
        active += [(f"{impl}: session, kernel {what} metadata", with_metadata, h) for impl, h in impls.items()]
    idle = [(f"{impl}: no session active", True, h) for impl, h in impls.items()]
    times = {label: [] for label, *_ in active + idle}
    sid = proton.start(os.path.join(tempfile.mkdtemp(), "bench"), backend="host")  # hooks called directly
    try:
        for _ in range(args.repeats):
            for label, with_metadata, (enter, leave) in active:
                times[label].append(per_launch_us(n, with_metadata, enter, leave))
            proton.deactivate(sid)  # no session active: the hooks return at once
            for label, with_metadata, (enter, leave) in idle:
                times[label].append(per_launch_us(n, with_metadata, enter, leave))
            proton.activate(sid)
    finally:
        proton.finalize()
    med = {label: statistics.median(v) for label, v in times.items()}
    print(f"{n} launches x {args.repeats} interleaved runs: hook cost in us/launch, median [min..max] "
          f"(LazyDict construction and launch_metadata included)")
    for label, value in med.items():
        print(f"  {label:40s} {value:6.2f}  [{min(times[label]):.2f}..{max(times[label]):.2f}]")
    for with_metadata in (True, False):  # what the hook itself adds to what any hook costs (the issue: w/o ≤ 0.3 µs)
        what = "with" if with_metadata else "w/o"
        above = {impl: med[f"{impl}: session, kernel {what} metadata"] - med[bare[with_metadata]] for impl in impls}
        print(f"  {what} metadata, above the bare hook: " + ", ".join(f"{k} {v:+.2f} us" for k, v in above.items()))
    if _triton_fast is not None:
        print(f"  native paths taken: {_triton_fast.stats()}")


if __name__ == "__main__":
    main()
