"""Per-launch cost of the injected path (a CUDA program without Python under ``proton-profile``) beside the
Python path's (the same launches from a Python process with Proton started in it), in the same rounds.

    python3 -m benchmarks.injection_cost [--launches 20000] [--rounds 12] [--json FILE]

The launches are tests/native/prog.cu's timed loop: an empty kernel launched ``--launches`` times on one
stream, then one sync, after 1 000 untimed launches; the program times it itself, so process start,
CUDA's and the profiler's start-up and the write at exit are left out.  Each round runs every cell once,
each in a fresh process, in an order rotated from round to round (no cell always first):

* ``prog``: ``./prog --bench L`` unprofiled, under the bare-CUPTI floor (benchmarks/floor as the
  program's injection library), and under ``proton-profile`` (the cupti plugin's injection library);
* ``python``: the same loop, built as a library and called through ctypes (the GIL released) from a
  Python process: unprofiled, under the floor injection, and with ``proton.start(backend="cupti")``;
* ``prog/native`` (only when ``--cells`` names it): the program under ``proton-profile -c native``, each
  launch's native call stack captured.

Printed per cell: ns per launch, median over rounds with its 90% bootstrap interval (report.median_ci),
and the same for the difference to the unprofiled cell of the same path and round (+none) and to the
floor's (+floor).  Each profiled cell's kernel count is checked against the launches it made.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.injection_cost ...")

from benchmarks import REPO, python_m  # noqa: E402
from benchmarks.report import median_ci  # noqa: E402

CELLS = ("prog/none", "prog/floor", "prog/proton", "python/none", "python/floor", "python/proton", "prog/native")
#: Run unless --cells says otherwise; prog/native (proton-profile -c native: each launch's native call stack,
#: decision 0315) is asked for by name.
DEFAULT_CELLS = CELLS[:6]
WARM = 1000  # prog.cu's untimed launches before the timed ones
FOREIGN = ("PROTON_FOLLOW", "PROTON_BACKEND", "PROTON_RUN_ID", "PROTON_RANKS", "PROTON_SCHEDULE", "PROTON_ON_DEMAND",
           "PROTON_DISABLE", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")


def native_prog():
    """tests/native/native_prog.py (builds prog.cu), loaded from its file."""
    path = os.path.join(REPO, "tests", "native", "native_prog.py")
    spec = importlib.util.spec_from_file_location("native_prog", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in FOREIGN and not k.startswith("PROTON_INJECT_")}


def noop_kernels(files: list[str]) -> int:
    """The launches of the timed loop's kernel (np_noop) the profiles in ``files`` recorded."""
    helper = native_prog()
    total = 0
    for path in files:
        with open(path) as f:
            total += helper.kernel_counts(json.load(f)[0]).get("np_noop", 0)
    return total


# ------------------------------------------------------------------ a Python process's cell ----
def child(mode: str, library: str, launches: int, out: str) -> int:
    """One ``python/*`` cell: the loop through ctypes, with Proton started in this process for ``proton``."""
    import ctypes

    lib = ctypes.CDLL(library)
    lib.np_bench.restype = ctypes.c_longlong
    lib.np_bench.argtypes = [ctypes.c_longlong]
    result = {}
    if mode == "proton":
        import proton_core as proton

        proton.start(out, backend="cupti")
        ns = lib.np_bench(launches)
        proton.finalize()
        result["kernels"] = noop_kernels([out + ".hatchet"])
    else:
        ns = lib.np_bench(launches)
    result["ns"] = ns
    print(json.dumps(result), flush=True)
    return 0


# ------------------------------------------------------------------ the cells ----
class Cells:
    def __init__(self, work: str, launches: int) -> None:
        from benchmarks.floor.build import build_injection

        helper = native_prog()
        reason = helper.missing_reason()
        if reason:
            raise SystemExit(f"injection_cost: {reason}")
        self.work, self.launches = work, launches
        self.prog = helper.build(os.path.join(work, "prog"))
        self.library = helper.build_library(os.path.join(work, "prog"))
        self.floor = build_injection(os.path.join(work, "floor"))
        self.report = helper.report

    def floor_env(self, out: str) -> dict:
        from benchmarks.floor.build import injection_environment

        return injection_environment(self.floor, out, clean_env())

    def run(self, cell: str, n: int) -> dict:
        """{ns per launch, kernels seen by the profiler (None unprofiled)}, or {error}."""
        where = tempfile.mkdtemp(dir=self.work)
        try:
            return self._run(cell, n, where)
        finally:
            shutil.rmtree(where, ignore_errors=True)

    def _run(self, cell: str, n: int, where: str) -> dict:
        path, mode = cell.split("/")
        floor_out = os.path.join(where, "floor.json")
        env = self.floor_env(floor_out) if mode == "floor" else clean_env()
        if path == "prog":
            cmd = [self.prog, "--iters", "0", "--replays", "0", "--bench", str(n)]
            if mode in ("proton", "native"):
                context = ["-c", "native"] if mode == "native" else []
                cmd = python_m("proton_core", *context, "-n", os.path.join(where, "inj"), *cmd)
        else:
            cmd = python_m("benchmarks.injection_cost", "--child", "proton" if mode == "proton" else "none",
                           "--library", self.library, "--launches", str(n), "--out", os.path.join(where, "py"))
        proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            said = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
            return {"error": f"{cell}: exit {proc.returncode}: {said[-1][-400:] if said else 'nothing said'}"}
        if path == "prog":
            report = self.report(proc.stdout)
            ns = report["bench"]["ns"]
        else:
            report = json.loads(proc.stdout.strip().splitlines()[-1])
            ns = report["ns"]
        out = {"ns_per_launch": ns / n, "kernels": None}
        if mode == "floor":
            with open(floor_out) as f:
                floor = json.load(f)
            out["kernels"] = floor["per_kernel"].get("np_noop", 0)
            out["dropped"] = floor["dropped"]
        elif mode in ("proton", "native") and path == "prog":
            out["kernels"] = noop_kernels([os.path.join(where, f) for f in os.listdir(where)
                                           if f.startswith("inj.pid") and f.endswith(".hatchet")])
        elif mode == "proton":
            out["kernels"] = report["kernels"]
        return out


def summarize(rounds: list[dict], launches: int) -> dict:
    """Per cell: the median ns per launch and its interval, and the same of the paired differences to the
    path's unprofiled and floor cells of the same round; kernel counts that miss launches are said."""
    summary = {}
    for cell in (c for c in CELLS if any(c in r for r in rounds)):
        path = cell.split("/")[0]
        own = [r[cell]["ns_per_launch"] for r in rounds if "ns_per_launch" in r.get(cell, {})]
        entry = {"rounds": len(own), "errors": [r[cell]["error"] for r in rounds if "error" in r.get(cell, {})]}
        if own:
            entry["ns"] = _median_with_interval(own)
        for ref in ("none", "floor"):
            other = f"{path}/{ref}"
            if other == cell or (ref == "floor" and cell.endswith("/none")):
                continue
            diffs = [r[cell]["ns_per_launch"] - r[other]["ns_per_launch"] for r in rounds
                     if "ns_per_launch" in r.get(cell, {}) and "ns_per_launch" in r.get(other, {})]
            if diffs:
                entry[f"over_{ref}"] = _median_with_interval(diffs)
        expected = launches + WARM
        seen = [r[cell]["kernels"] for r in rounds if r.get(cell, {}).get("kernels") is not None]
        if seen:
            entry["kernels_missed"] = sum(1 for s in seen if s != expected)
        summary[cell] = entry
    return summary


def _median_with_interval(values: list[float]) -> dict:
    import statistics

    ci = median_ci(values)
    return {"median": statistics.median(values), "ci": list(ci) if ci else None}


def _fmt(entry: dict | None) -> str:
    if not entry:
        return f"{'-':>22}"
    ci = entry["ci"]
    interval = f" [{ci[0]:.0f}, {ci[1]:.0f}]" if ci else ""
    return f"{entry['median']:>8.0f}{interval:<14}"


def table(summary: dict, launches: int, rounds: int) -> str:
    lines = [f"ns per launch ({launches} launches of an empty kernel per cell, {rounds} rounds; median [90% interval]):",
             f"{'cell':<14}{'ns/launch':>22}{'+none':>22}{'+floor':>22}  kernels",
             ]
    for cell, e in summary.items():
        counted = "" if "kernels_missed" not in e else (
            "all counted" if e["kernels_missed"] == 0 else f"MISSED in {e['kernels_missed']} rounds")
        lines.append(f"{cell:<14}{_fmt(e.get('ns'))}{_fmt(e.get('over_none'))}{_fmt(e.get('over_floor'))}  {counted}")
        for err in e["errors"][:2]:
            lines.append(f"    error: {err}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=20000, help="timed launches per cell")
    ap.add_argument("--rounds", type=int, default=12, help="rounds (an interval needs 10)")
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS), help="comma list of " + ", ".join(CELLS))
    ap.add_argument("--json", help="also write the rounds and the summary here")
    ap.add_argument("--child", choices=("none", "proton"), help=argparse.SUPPRESS)
    ap.add_argument("--library", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.library, args.launches, args.out)
    names = [c for c in args.cells.split(",") if c]
    unknown = [c for c in names if c not in CELLS]
    if unknown:
        raise SystemExit(f"injection_cost: unknown cell {unknown[0]!r}: choose from {', '.join(CELLS)}")
    with tempfile.TemporaryDirectory(prefix="proton_injection_cost_") as work:
        cells = Cells(work, args.launches)
        rounds = []
        for i in range(args.rounds):
            order = names[i % len(names):] + names[:i % len(names)]
            rounds.append({cell: cells.run(cell, args.launches) for cell in order})
            done = ", ".join(f"{c} {r['ns_per_launch']:.0f}" if "ns_per_launch" in r else f"{c} error"
                             for c, r in rounds[-1].items())
            print(f"round {i + 1}/{args.rounds}: {done}", file=sys.stderr, flush=True)
    summary = summarize(rounds, args.launches)
    print(table(summary, args.launches, len(rounds)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"launches": args.launches, "rounds": rounds, "summary": summary}, f, indent=1)
    return 1 if any(e["errors"] or e.get("kernels_missed") for e in summary.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
