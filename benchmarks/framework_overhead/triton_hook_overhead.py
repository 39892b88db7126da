"""Per-launch cost of hook="triton"'s enter/exit hooks on CPU (no GPU, no Triton needed).

    python3 benchmarks/framework_overhead/triton_hook_overhead.py [--launches N]

Calls the hooks exactly as Triton's launcher does, with a LazyDict-shaped
object, under the host backend, and prints microseconds per launch for a
kernel with launch_metadata, one without, and with no session active.
Compare with Triton's own launch cost (a few microseconds per launch) to
see the launch-bound slowdown; the GPU-machine figure belongs in
docs/performance.md.
"""

import argparse
import os
import tempfile
import time

import proton_core as proton
from proton_frameworks.triton_hook import launch_enter, launch_exit
from proton_frameworks.testing import LazyDict


def metadata(grid, meta, args):
    return {"name": "matmul_1024", "flops16": 2 * 1024 ** 3, "bytes": 6 * 1024 ** 2}


def per_launch_us(n, with_metadata):
    t0 = time.perf_counter()
    for _ in range(n):
        meta = LazyDict({"name": "matmul_kernel", "function": 0, "stream": 0})  # Triton builds this anyway
        if with_metadata:
            meta.add(metadata, ((8, 8, 1), None, {}))
        launch_enter(meta)
        launch_exit(meta)
    return (time.perf_counter() - t0) / n * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=200000)
    n = parser.parse_args().launches
    base = per_launch_us(n, False)  # no session: the hooks return at once
    out = os.path.join(tempfile.mkdtemp(), "bench")
    proton.start(out, backend="host")  # the hooks are called directly: no Triton needed
    try:
        plain = per_launch_us(n, False)
        rich = per_launch_us(n, True)
    finally:
        proton.finalize()
    print(f"{n} launches: hook cost in us/launch (LazyDict construction included)")
    print(f"  no session active:              {base:6.2f}")
    print(f"  session, kernel w/o metadata:   {plain:6.2f}")
    print(f"  session, kernel with metadata:  {rich:6.2f}")


if __name__ == "__main__":
    main()
