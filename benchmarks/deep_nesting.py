"""Deeply nested scopes with metrics: seconds and peak memory (CPU, host backend; issue 40's item 7).

    python3 -m benchmarks.deep_nesting [--depth 100000]

Opens ``--depth`` scopes one inside the other, each with a metric, closes them, and writes the profile;
prints the time to record, the time to finalize (write) and the process's peak RSS.  The target: 100 000
nested scopes in seconds and well under 1 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import proton_core as proton


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", type=int, default=100_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        proton.start(os.path.join(out, "deep"), backend="host")
        for i in range(args.depth):
            proton.enter_scope(f"s{i % 7}", metrics={"bytes": 1})
        for _ in range(args.depth):
            proton.exit_scope()
        recorded = time.perf_counter()
        proton.finalize()
        done = time.perf_counter()
        size = os.path.getsize(os.path.join(out, "deep.hatchet"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.depth} nested scopes with a metric each: recorded in {recorded - start:.2f} s, written in "
          f"{done - recorded:.2f} s ({size / 1e6:.1f} MB file), peak RSS {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
