"""Per-launch cost of the AMD backend against the simulated ROCm, beside the CUPTI backend's recorder.

    python3 -m benchmarks.roctracer_recorder [--n 200000] [--rounds 5]

No GPU.  Two tables, ns per launch, best of --rounds:

* ``recorder`` -- both backends' recorders driven the same way from Python, one launch and its
  record per iteration through the test bindings (cupti: ``_test_launch`` + ``_test_kernel``;
  rocprofiler: ``_test_launch`` + ``_test_dispatch``), with a session's epoch set (``recording``) or
  0 (``idle``).  The Python loop and two binding calls are in every cell alike: compare columns.
  cupti needs a build with PROTON_CUPTI_TESTING=ON (scripts/install.sh makes one).
* ``simulated ROCm`` -- a C loop in the simulator dispatching through rocprofiler-sdk's callbacks,
  in fresh processes: ``no tool`` (the simulator alone), ``null tool`` (a do-nothing tool with the
  same services: what the simulator spends making callbacks and buffering records), ``idle``
  (Proton attached, no session), ``recording`` (a shadow session open, one scope); and delivering
  the records (``flush``, per record: the buffer callback, correlation and aggregation).  Proton's
  launch cost is ``recording`` minus ``null tool``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

if not __package__:
    sys.exit("run it from the repository root: python3 -m benchmarks.roctracer_recorder ...")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPERS = os.path.join(ROOT, "plugins", "roctracer", "tests", "roc_helpers.py")


def recorder_rows(n: int, rounds: int) -> dict:
    import time

    out = {}
    rows = []
    try:
        from proton_cupti import _cupti
        if hasattr(_cupti, "_test_reset"):
            def cupti(corr0, epoch):
                _cupti._test_reset()
                _cupti.configure(False, False)
                _cupti.set_context(7)
                _cupti.set_epoch(epoch)
                launch, kernel = _cupti._test_launch, _cupti._test_kernel
                t = time.perf_counter_ns()
                for corr in range(corr0, corr0 + n):
                    launch(corr)
                    kernel(corr, "k", 0, 7, 1000, 1500, 0)
                dt = time.perf_counter_ns() - t
                _cupti.set_epoch(0)
                _cupti._test_flush()
                return dt / n
            rows.append(("cupti", cupti))
    except ImportError:
        pass
    from proton_roctracer import _rocprofiler as roc

    def rocprofiler(corr0, epoch):
        roc.reset()
        roc.configure(False, False)
        roc.set_context(7)
        roc.set_epoch(epoch)
        launch, dispatch = roc._test_launch, roc._test_dispatch
        t = time.perf_counter_ns()
        for corr in range(corr0, corr0 + n):
            launch(corr)
            dispatch(corr, 1, 0, 1, 1000, 1500)
        dt = time.perf_counter_ns() - t
        roc.set_epoch(0)
        roc._test_flush()
        return dt / n

    rows.append(("rocprofiler", rocprofiler))
    corr = 1 << 24
    for name, fn in rows:
        cells = {}
        for label, epoch in (("idle", 0), ("recording", 1)):
            best = []
            for _ in range(rounds):
                best.append(fn(corr, epoch))
                corr += n
            cells[label] = min(best)
        out[name] = cells
    return out


CHILD = r"""
import importlib.util, json, time
spec = importlib.util.spec_from_file_location("roc_helpers", {helpers!r})
roc_helpers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(roc_helpers)
sim = roc_helpers.Sim({path!r})
kid = sim.kernel_id("k")
setup, n = {setup!r}, {n}
import proton_core as proton
if setup == "null tool":
    sim.lib.simrocm_null_tool()
elif setup != "no tool":
    import proton_roctracer
    proton_roctracer.attach()
if setup == "recording":
    proton.start({out!r}, backend="rocprofiler")
    proton.enter_scope("s")
sim.lib.simrocm_dispatch_loop.restype = __import__("ctypes").c_uint64
sim.lib.simrocm_dispatch_loop(1000, kid, 0)
launch = sim.lib.simrocm_dispatch_loop(n, kid, 0) / n
flush = 0.0
if setup == "recording":
    from proton_core.manager import MANAGER
    backend = MANAGER.backends["rocprofiler"].backend
    t = time.perf_counter_ns()
    backend.native.flush([])
    flush = (time.perf_counter_ns() - t) / (n + 1000)
    proton.exit_scope("s")
    proton.finalize()
print(json.dumps({{"launch": launch, "flush": flush}}))
"""


def load_helpers():
    """plugins/roctracer/tests/roc_helpers.py (builds and drives the simulator), loaded by file path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("roc_helpers", HELPERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulated_rows(n: int, rounds: int) -> dict:
    roc_helpers = load_helpers()

    work = tempfile.mkdtemp(prefix="roc_bench_")
    path = roc_helpers.build(work)
    env = dict(os.environ, PROTON_ROCPROFILER_SDK_PATH=work)
    results: dict = {s: [] for s in ("no tool", "null tool", "idle", "recording")}
    for _ in range(rounds):
        for setup in results:  # interleaved: a slow moment of the machine hits every setup alike
            code = CHILD.format(helpers=HELPERS, path=path, setup=setup, n=n, out=os.path.join(work, "p"))
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=work,
                                  check=True)
            results[setup].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {s: {"launch": min(r["launch"] for r in v), "flush": min(r["flush"] for r in v)} for s, v in results.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000, help="launches per measurement")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    rec = recorder_rows(args.n, args.rounds)
    print(f"recorder, ns per launch + record through the test bindings (best of {args.rounds}, n={args.n})")
    print(f"{'backend':<14}{'idle':>10}{'recording':>12}")
    for name, cells in rec.items():
        print(f"{name:<14}{cells['idle']:>10.0f}{cells['recording']:>12.0f}")
    sim = simulated_rows(args.n, args.rounds)
    print(f"\nsimulated ROCm, ns per dispatch in a C loop (best of {args.rounds}, n={args.n})")
    print(f"{'setup':<14}{'launch':>10}{'flush/rec':>12}")
    for name, cells in sim.items():
        print(f"{name:<14}{cells['launch']:>10.0f}{cells['flush']:>12.0f}")
    print(f"\nProton per launch (recording - null tool): {sim['recording']['launch'] - sim['null tool']['launch']:.0f} ns;"
          f" per record delivered: {sim['recording']['flush']:.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
