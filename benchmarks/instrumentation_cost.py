"""Per-launch cost of intra-kernel instrumentation: none, ours, upstream Proton's (GPU only).

    python3 -m benchmarks.instrumentation_cost [--rounds 5] [--launches 2000] [--windows 5] [--out cost.json]

Two workloads:

- ``tiny``: a one-CTA kernel with one ``pl.scope`` launched in a loop (launch-bound);
- ``two_scopes``: the GPU test's kernel (grid 8, 4 warps, two scopes 'one'/'four', n=512).

Three configurations, each in its own process (ours and upstream both install process-wide
Triton hooks, so they never share one):

- ``none``: no profiler (the ``pl`` records emit nothing);
- ``ours``: ``proton_core.start(backend="instrumentation")``;
- ``upstream``: the installed Triton's ``triton.profiler.start(backend="instrumentation")``.

Per workload and configuration a worker compiles and warms the kernel, then times ``--windows``
windows of ``--launches`` launches: host time per launch is the wall clock of the window including a
final ``torch.cuda.synchronize()``; device time per launch is ``torch.cuda.Event`` elapsed time
around the window's launches (in a launch-bound loop this includes the GPU's idle gaps, so it
follows the host time). ``finalize`` is timed apart. Rounds interleave the configurations in a
rotated order; the table shows medians over rounds (each round's value is its worker's median
window) and the ratio to ``none`` of the same round. All values go to ``--out`` as JSON.

Without a GPU (or torch/Triton) it exits with one line saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.instrumentation_cost ...")

from benchmarks import REPO, python_m  # noqa: E402

CONFIGS = ("none", "ours", "upstream")
WORKLOADS = ("tiny", "two_scopes")


def fail(reason: str) -> None:
    print(f"instrumentation_cost: {reason}", file=sys.stderr)
    sys.exit(2)


def check_gpu() -> str:
    """The device name, or exit with one line."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is one line
        fail(f"torch is not importable ({type(exc).__name__}: {exc})".splitlines()[0])
    if not torch.cuda.is_available():
        fail("no CUDA GPU is visible (torch.cuda.is_available() is False); run this on the GPU machine")
    try:
        import triton
    except Exception as exc:  # noqa: BLE001
        fail(f"triton is not importable ({type(exc).__name__}: {exc})".splitlines()[0])
    version = tuple(int(p) for p in triton.__version__.split(".")[:2] if p.isdigit())
    if version < (3, 6):
        fail(f"triton {triton.__version__} is too old: the instrumentation backends need Triton 3.6 or newer")
    return torch.cuda.get_device_name()


# ------------------------------------------------------------------ worker ----
def _launcher(workload: str):
    import torch

    from proton_instrumentation.testing import tiny, two_loops

    if workload == "tiny":
        a = torch.zeros(1, device="cuda")
        return lambda: tiny[(1,)](a)
    x = torch.ones(128, device="cuda")
    out = torch.empty(8 * 128, device="cuda")
    return lambda: two_loops[(8,)](x, out, 512, BLOCK=128, num_warps=4)


def _window(fn, launches: int):
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    begin.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t0) / launches
    return host * 1e6, begin.elapsed_time(end) * 1e3 / launches


def worker(config: str, launches: int, windows: int) -> dict:
    import torch

    folder = tempfile.mkdtemp(prefix="instr_cost_")
    if config == "ours":
        import proton_core as proton

        proton.start(os.path.join(folder, "ours"), backend="instrumentation")
        stop = proton.finalize
    elif config == "upstream":
        import triton.profiler as tp

        tp.start(os.path.join(folder, "upstream"), backend="instrumentation")
        stop = tp.finalize
    else:
        stop = None
    result = {"config": config, "workloads": {}}
    fns = {w: _launcher(w) for w in WORKLOADS}
    for fn in fns.values():  # compile (instrumented under ours/upstream) and warm
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
    for name, fn in fns.items():
        n = launches if name == "tiny" else max(1, launches // 4)
        samples = [_window(fn, n) for _ in range(windows)]
        result["workloads"][name] = {"host_us": statistics.median(h for h, _ in samples),
                                     "device_us": statistics.median(d for _, d in samples),
                                     "launches_per_window": n, "windows": windows}
    if stop is not None:
        t0 = time.perf_counter()
        stop()
        result["finalize_s"] = time.perf_counter() - t0
    return result


# ------------------------------------------------------------------ parent ----
def run_worker(config: str, args) -> dict:
    cmd = python_m("benchmarks.instrumentation_cost", "--worker", config, "--launches", str(args.launches),
                   "--windows", str(args.windows))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"config": config, "error": f"worker timed out after {args.timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
    return {"config": config, "error": f"exit {proc.returncode}: {lines[-1] if lines else 'no output'}"}


def summarize(rounds: list[list[dict]], configs) -> dict:
    """Medians over rounds of each (workload, config) and of its ratio to the same round's 'none'."""
    out = {}
    for workload in WORKLOADS:
        for config in configs:
            host, dev, host_r, dev_r, fin, errors = [], [], [], [], [], []
            for results in rounds:
                by = {r["config"]: r for r in results}
                r = by.get(config, {})
                if "error" in r:
                    errors.append(r["error"])
                    continue
                w = r.get("workloads", {}).get(workload)
                if w is None:
                    continue
                host.append(w["host_us"])
                dev.append(w["device_us"])
                if "finalize_s" in r:
                    fin.append(r["finalize_s"])
                base = by.get("none", {}).get("workloads", {}).get(workload)
                if base:
                    host_r.append(w["host_us"] / base["host_us"])
                    dev_r.append(w["device_us"] / base["device_us"])
            med = (lambda xs: statistics.median(xs) if xs else None)
            out[f"{workload}/{config}"] = {
                "workload": workload, "config": config, "host_us": med(host), "device_us": med(dev),
                "host_ratio": med(host_r), "device_ratio": med(dev_r), "finalize_s": med(fin),
                "rounds": len(host), "errors": errors[:3]}
    return out


def markdown(summary: dict, device: str, args) -> str:
    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = [f"Instrumentation cost on {device}: medians of {args.rounds} rounds, each the median of "
             f"{args.windows} windows ({args.launches} launches of `tiny`, {max(1, args.launches // 4)} of "
             "`two_scopes`)", "",
             "| workload | config | host µs/launch | device µs/launch | host × none | device × none | finalize s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in summary.values():
        if row["rounds"] == 0:
            why = row["errors"][0] if row["errors"] else "no result"
            lines.append(f"| {row['workload']} | {row['config']} | error: {why} | | | | |")
            continue
        lines.append(f"| {row['workload']} | {row['config']} | {f(row['host_us'], '.1f')} | "
                     f"{f(row['device_us'], '.1f')} | {f(row['host_ratio'], '.2f')} | "
                     f"{f(row['device_ratio'], '.2f')} | {f(row['finalize_s'], '.3f')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--launches", type=int, default=2000, help="launches per window of 'tiny' (two_scopes: a quarter)")
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--timeout", type=int, default=300, help="seconds per worker")
    p.add_argument("--out", default=None, help="write all results as JSON here")
    p.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        check_gpu()
        print("RESULT " + json.dumps(worker(args.worker, args.launches, args.windows)), flush=True)
        return 0
    configs = [c for c in args.configs.split(",") if c]
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        fail(f"unknown configuration(s) {bad}; choose from {list(CONFIGS)}")
    device = check_gpu()
    rounds = []
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        results = []
        for config in order:
            res = run_worker(config, args)
            res["round"], res["position"] = r, order.index(config)
            results.append(res)
            status = res.get("error") or ", ".join(f"{w} {v['host_us']:.1f}/{v['device_us']:.1f} us"
                                                   for w, v in res["workloads"].items())
            print(f"round {r + 1}/{args.rounds} {config}: {status}", file=sys.stderr, flush=True)
        rounds.append(results)
    summary = summarize(rounds, configs)
    table = markdown(summary, device, args)
    print(table)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": device, "args": vars(args), "summary": summary, "rounds": rounds}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
