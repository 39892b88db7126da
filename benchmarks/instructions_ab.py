"""Instructions per event of Proton's host-side paths, before and after a change (callgrind: exact, no noise).

    python3 -m benchmarks.instructions_ab --python BEFORE_PY --python AFTER_PY [--events nvtx,scope,...]

Timings of these paths swing by tens of percent on shared machines, so a change to the scope engine is
checked by counting instructions instead: each interpreter (one per venv, each with its own install) runs
each event ``--small`` and ``--large`` times under valgrind's callgrind, and the difference divided by the
difference in count is that event's instructions, start-up and finalize cancelled.  Events:

* ``nvtx``   -- an NVTX push+pop from Python (the ``nvtx`` package) inside a scope, host backend;
* ``scope``  -- ``with proton.scope(name)`` (the scope type's C path);
* ``enter``  -- ``proton.enter_scope(name)`` + ``proton.exit_scope()``;
* ``triton`` -- the native Triton hooks around a launch with launch_metadata (a LazyDict as Triton builds);
* ``triton_plain`` -- the same for a kernel without launch_metadata.

Needs valgrind on PATH.  Raw per-run counts go to stdout as JSON on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PROGRAM = r'''
import sys
import proton_core as proton
event, n = sys.argv[1], int(sys.argv[2])
proton.start(sys.argv[3], backend="host")
if event == "nvtx":
    import nvtx
    push, pop = nvtx.push_range, nvtx.pop_range
    with proton.scope("outer"):
        for _ in range(n):
            push("r"); pop()
elif event == "scope":
    s = proton.scope("s")
    for _ in range(n):
        with s:
            pass
elif event == "enter":
    enter, leave = proton.enter_scope, proton.exit_scope
    for _ in range(n):
        enter("s"); leave()
elif event in ("triton", "triton_plain"):
    from proton_frameworks import triton_hook
    from proton_frameworks.testing import LazyDict
    enter, leave = triton_hook.hooks()
    def meta_fn(grid, metadata, args):
        return {"name": "matmul", "flops16": 1024}
    for _ in range(n):
        meta = LazyDict({"name": "kernel", "function": 1, "stream": 0})
        if event == "triton":
            meta.add(meta_fn, ((1, 1, 1), None, {}))
        enter(meta); leave(meta)
proton.finalize()
'''


def count(python: str, event: str, n: int, workdir: str) -> int:
    """Instructions of one run of ``event`` n times (whole process)."""
    out = os.path.join(workdir, f"cg.{os.getpid()}.out")
    script = os.path.join(workdir, "events.py")
    with open(script, "w") as f:
        f.write(PROGRAM)
    env = {**os.environ, "PROTON_NVTX_CPU_TIME": "0"}
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", python, script, event, str(n),
                           os.path.join(workdir, "p")], capture_output=True, text=True, env=env, cwd=workdir)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{python} {event}: {proc.stderr.strip().splitlines()[-1:]}")
    os.remove(out)
    return int(found.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", required=True, help="an interpreter to measure (give two: before, after)")
    ap.add_argument("--events", default="nvtx,scope,enter,triton,triton_plain")
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=12000)
    args = ap.parse_args(argv)
    raw, per = {}, {}
    with tempfile.TemporaryDirectory() as workdir:
        for event in args.events.split(","):
            for python in args.python:
                small, large = (count(python, event, n, workdir) for n in (args.small, args.large))
                raw[f"{python} {event}"] = (small, large)
                per.setdefault(event, []).append((large - small) / (args.large - args.small))
    print(f"{'event':14s}" + "".join(f"{os.path.basename(os.path.dirname(os.path.dirname(p)))[:16]:>18s}"
                                     for p in args.python) + "   (instructions per event)")
    for event, values in per.items():
        cells = "".join(f"{v:>18.0f}" for v in values)
        change = f"   {values[-1] / values[0] - 1:+.1%}" if len(values) == 2 and values[0] else ""
        print(f"{event:14s}{cells}{change}")
    print(json.dumps({"per_event": per, "raw": raw}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
