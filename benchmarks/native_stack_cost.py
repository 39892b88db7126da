"""What context="native" costs: per launch, against the shadow context and no profiler, in one process.

    python3 -m benchmarks.native_stack_cost [--launches 20000] [--windows 12] [--depth 0,30]
    python3 -m benchmarks.native_stack_cost --capture-only      # CPU: the unwinders alone, no GPU needed

Three tables.  The first times one native stack capture with each unwinder the recorder could use
(libunwind's unw_backtrace, glibc's backtrace(), and the frame-pointer walk it does not use, which
cannot cross libcuda and libcupti), a given number of frames deeper than the Python caller.  The second
times the recorder's launch path alone (the test bindings, no CUPTI) with native stacks off and on.  The
third (GPU) alternates short windows of the same launch loop under each profiler (start, time N launches, finalize;
the order rotates each window): empty-kernel launches through cuLaunchKernel from C (the test bindings'
``_test_user_noop_launches``, as a CUDA program without Python launches), from ``depth`` extra native
frames of the caller's, so a few tens of nanoseconds per launch show.  Needs the cupti extension built
with PROTON_CUPTI_TESTING=ON (scripts/gpu_check.sh does).  PROTON_NATIVE_UNWINDER=backtrace runs the
launches with glibc's unwinder instead of libunwind.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.native_stack_cost ...")

PROFILERS = ("none", "shadow", "native")
UNWINDERS = ("libunwind", "backtrace", "frame_pointers")


def bindings():
    try:
        from proton_cupti import _cupti
    except ImportError as exc:
        sys.exit(f"native_stack_cost: the proton-profiler-cupti extension is not built ({exc})")
    if not hasattr(_cupti, "_test_user_noop_launches"):
        sys.exit("native_stack_cost: proton_cupti._cupti lacks its test bindings; rebuild with "
                 "SKBUILD_CMAKE_DEFINE=PROTON_CUPTI_TESTING=ON pip install -e plugins/cupti")
    return _cupti


def capture_table(cupti, depths, iterations) -> None:
    print(f"unwinder used for launches: {cupti._test_native_unwinder()}")
    print(f"{'frames deeper':<14}" + "".join(f"{u:>22}" for u in UNWINDERS) + "   (ns per capture, frames found)")
    for depth in depths:
        cells = []
        for unwinder in UNWINDERS:
            ns, frames = cupti._test_native_capture_ns(unwinder, depth, iterations)
            cells.append(f"{'unavailable':>22}" if frames < 0 else f"{ns:>14.0f} ({frames:>3} fr)")
        print(f"{depth:<14}" + "".join(cells), flush=True)


def recorder_table(cupti, launches, rounds) -> None:
    """The recorder's launch path alone (no CUPTI, no GPU): ns per launch from Python with native stacks off
    and on, the two alternating round by round; the difference is what capturing and filing the stack costs."""
    cupti._test_reset()
    cupti.configure(False, False, [], [])
    cupti.set_epoch(1)
    cupti.set_context(0)
    got = {False: [], True: []}
    corr = 1 << 28
    try:
        for r in range(rounds * 2):
            native = r % 2 == 1
            cupti.native_frames(native)
            launch = cupti._test_user_launch
            t = time.perf_counter()
            for i in range(corr, corr + launches):
                launch(i)
            got[native].append((time.perf_counter() - t) / launches * 1e9)
            corr += launches
    finally:
        cupti.native_frames(False)
        cupti.set_epoch(0)
        cupti._test_reset()
    off, on = statistics.median(got[False]), statistics.median(got[True])
    print(f"recorder per launch (CPU, from Python): native off {off:.0f} ns, on {on:.0f} ns ({on - off:+.0f})",
          flush=True)


def native_context_registered() -> None:
    """context="native" is a built-in once the core lists it; until then this registers it."""
    from proton_core.plugins import get_plugins
    from proton_core.contexts import native

    plugins = get_plugins()
    if plugins.contexts.get("native") is None:
        plugins.register(native, name="native_context")


def window(cupti, proton, profiler, n, depth, path) -> float:
    if profiler != "none":
        window.count = getattr(window, "count", 0) + 1  # a file per window: none replaces another's
        proton.start(f"{path}{window.count}", backend="cupti", context=profiler)
    cupti._test_user_noop_launches(n, depth)  # warm: the first launches intern their stacks
    t = time.perf_counter()
    error = cupti._test_user_noop_launches(n, depth)
    dt = time.perf_counter() - t
    if profiler != "none":
        proton.finalize()
    if error:
        sys.exit(f"native_stack_cost: {error}")
    return dt / n * 1e9


def launch_table(cupti, depths, launches, windows) -> None:
    import proton_core as proton

    native_context_registered()
    error = cupti._test_launch_noop(10)
    if error:
        sys.exit(f"native_stack_cost: no GPU launches here ({error}); --capture-only measures the unwinders alone")
    path = os.path.join(tempfile.mkdtemp(prefix="proton_native_cost_"), "p")
    print(f"{'case':<14}" + "".join(f"{p:>18}" for p in PROFILERS) + "   (ns per launch, median; +over none)")
    for depth in depths:
        got = {p: [] for p in PROFILERS}
        for w in range(windows):
            order = PROFILERS[w % len(PROFILERS):] + PROFILERS[:w % len(PROFILERS)]  # rotate: none is not always first
            for profiler in order:
                got[profiler].append(window(cupti, proton, profiler, launches, depth, path))
        med = {p: statistics.median(v) for p, v in got.items()}
        base = med["none"]
        print(f"{'depth ' + str(depth):<14}" + "".join(f"{med[p]:>10.0f} ({med[p] - base:+6.0f})" for p in PROFILERS),
              flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=20000, help="launches per window")
    ap.add_argument("--windows", type=int, default=12, help="windows per profiler and depth")
    ap.add_argument("--depth", default="0,30", help="extra native frames of the caller, comma list")
    ap.add_argument("--iterations", type=int, default=2000, help="captures per unwinder and depth")
    ap.add_argument("--capture-only", action="store_true", help="only the unwinders (no GPU needed)")
    args = ap.parse_args(argv)
    depths = [int(d) for d in args.depth.split(",") if d.strip()]
    cupti = bindings()
    capture_table(cupti, depths, args.iterations)
    recorder_table(cupti, max(1000, args.launches // 4), max(3, args.windows // 2))
    if not args.capture_only:
        launch_table(cupti, depths, args.launches, args.windows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
