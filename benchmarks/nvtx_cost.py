"""What an NVTX range push+pop costs under Proton (CPU: host backend; GPU: add --backend cupti).

    python3 -m benchmarks.nvtx_cost [--backend host|cupti] [--n 200000]

Each setup runs in --repeat fresh processes (interleaved), 5 rounds each, in ns per push+pop; the
best counts:

* ``python`` -- the ``nvtx`` package's push_range/pop_range from Python (the thread holds the
  GIL: the range becomes a scope through Proton's Python side);
* ``native`` -- a C loop on a thread without the GIL (the NVTX v3 client in
  plugins/nvtx/tests/native): ranges are interned natively and published to the backend.

for three setups: ``no tool`` (NVTX with no injection: the cost NVTX itself has),
``no session`` (Proton imported and injected, no session open) and ``session`` (recording).
Proton's own cost is ``session`` minus ``no tool``; the target is at most 1 000 ns.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.nvtx_cost ...")

from benchmarks import REPO, python_m  # noqa: E402

CLIENT = os.path.join(REPO, "plugins", "nvtx", "tests", "native", "nvtx_client.c")
SETUPS = ("no tool", "no session", "session")


def build_client(out_dir: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("nvtx_cost: no C compiler (cc) for the native client")
    out = os.path.join(out_dir, "libnvtx_client.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", out, CLIENT, "-lpthread", "-ldl"], check=True)
    return out


def child(setup: str, backend: str, n: int, client_path: str) -> dict:
    import time

    import nvtx

    if setup != "no tool":
        import proton_core as proton
    lib = ctypes.CDLL(client_path)
    lib.client_loop.restype = ctypes.c_uint64
    lib.client_loop.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.client_init()
    if setup == "session":
        proton.start(os.path.join(tempfile.mkdtemp(), "p"), backend=backend)
    push, pop = nvtx.push_range, nvtx.pop_range
    out = {}
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter_ns()
        for _ in range(n):
            push("step")
            pop()
        best = min(best, (time.perf_counter_ns() - t) / n)
    out["python"] = best
    out["native"] = min(lib.client_loop(b"step", n) / n for _ in range(5))
    if setup == "session":
        proton.finalize()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="host")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per setup, interleaved; the best counts")
    ap.add_argument("--child", nargs=2, metavar=("SETUP", "CLIENT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.backend, args.n, args.child[1])))
        return 0
    client_path = build_client(tempfile.mkdtemp())
    rows: dict[str, dict] = {}
    for _ in range(args.repeat):  # setups interleaved: a slow spell of the host hits all of them
        for setup in SETUPS:
            env = dict(os.environ)
            env.pop("NVTX_INJECTION64_PATH", None)
            if setup == "no tool":
                env["PROTON_ENABLE_NVTX"] = "0"
            r = subprocess.run(python_m("benchmarks.nvtx_cost", "--backend", args.backend, "--n", str(args.n),
                                        "--child", setup, client_path),
                               env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            got = json.loads(r.stdout.strip().splitlines()[-1])
            best = rows.setdefault(setup, got)
            rows[setup] = {k: min(best[k], got[k]) for k in got}
    print(f"NVTX push+pop, ns (backend {args.backend}, best of {args.repeat} processes x 5 rounds x {args.n:,})")
    print(f"{'':12s} {'python':>8s} {'native':>8s}")
    for setup in SETUPS:
        print(f"{setup:12s} {rows[setup]['python']:8.0f} {rows[setup]['native']:8.0f}")
    own = {k: rows["session"][k] - rows["no tool"][k] for k in ("python", "native")}
    print(f"{'Proton own':12s} {own['python']:8.0f} {own['native']:8.0f}   (session - no tool; target <= 1000)")
    print(json.dumps({"backend": args.backend, "rows": rows, "own": own}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
