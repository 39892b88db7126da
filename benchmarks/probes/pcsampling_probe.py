"""What mode="pcsampling" does on this GPU, and what it costs per launch.

    python3 -m benchmarks.probes.pcsampling_probe --out pcsampling_probe.json [--launches 1000] [--reps 7]

GPU only; needs torch with CUDA and proton-profiler-cupti (built with PROTON_CUPTI_TESTING=ON for the
native counters it prints, as scripts/install.sh builds it).  Every variant runs in a fresh process
(CUPTI and PC sampling state are process-wide).  It reports:

* info: libcupti and its API version, the GPU, the stall reasons CUPTI offers (count and names) and
  the kernel activity kind pcsampling ended up with ("auto" may fall back to serial records);
* coexistence: for continuous and serialized collection with concurrent, serial and auto kernel
  activity, whether every launch still has its kernel record (counts), and the sampler's counters;
* cost: a launch-bound loop (`--launches` tiny torch adds, synchronized), median wall time over
  `--reps` rounds per launch, with no profiler, cupti normal mode, pcsampling continuous and serialized
  at three intervals each, and upstream's pcsampling (triton.profiler) when it is installed;
* soak: RSS and the store's sizes over 200 000 launches of continuous sampling (memory stays bounded).

Figures go to docs/performance.md (instruction sampling); the design: docs/decisions/0054-pc-sampling-continuous-collection-by-default.md.
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
    sys.exit("run it from the repository root: python3 -m benchmarks.probes.pcsampling_probe ...")

from benchmarks import REPO, python_m  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def kernel_count(path: str) -> int:
    with open(path) as f:
        root = json.load(f)[0]
    total, stack = 0, [root]
    while stack:
        node = stack.pop()
        if "device_id" in node.get("metrics", {}):
            total += int(node["metrics"].get("count", 0))
        stack.extend(node.get("children", []))
    return total


def line_samples(path: str) -> int:
    with open(path) as f:
        root = json.load(f)[0]
    total, stack = 0, [root]
    while stack:
        node = stack.pop()
        if not node.get("children") and "device_id" not in node.get("metrics", {}):
            total += int(node.get("metrics", {}).get("samples", 0))
        stack.extend(node.get("children", []))
    return total


def native_stats():
    try:
        from proton_cupti import _cupti

        return dict(_cupti.pcsampling_stats())
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------ children ----
def child_info(spec):
    import torch

    import proton_core as proton
    from proton_cupti import _cupti

    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    path = os.path.join(spec["dir"], "info")
    proton.start(path, backend="cupti", mode="pcsampling")
    for _ in range(200):
        x.mul_(1.0001)
    torch.cuda.synchronize()
    stats = native_stats()
    proton.finalize()
    props = torch.cuda.get_device_properties(0)
    return {"libcupti": _cupti.cupti_path(), "cupti_api_version": int(_cupti.cupti_version()),
            "gpu": props.name, "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
            "stall_reason_count": len(stats.get("stall_reasons", [])), "stall_reasons": stats.get("stall_reasons"),
            "metrics": stats.get("metrics"), "kernel_activity": stats.get("kernel_activity"),
            "samples_in_profile": line_samples(path + ".hatchet"), "stats": stats}


def child_coexist(spec):
    import torch

    import proton_core as proton

    n = spec["n"]
    x = torch.ones(1 << 22, device="cuda")
    w = torch.rand(1024, 1024, device="cuda")
    x.add_(1)
    torch.mm(w, w)
    torch.cuda.synchronize()
    path = os.path.join(spec["dir"], "coexist")
    out = {"collection": spec["collection"], "kernels": spec["kernels"], "launches": 2 * n}
    try:
        proton.start(path, backend="cupti", mode=f"pcsampling:collection={spec['collection']}:kernels={spec['kernels']}")
    except Exception as exc:  # noqa: BLE001 - a refusal is a finding
        out["start_error"] = str(exc)
        return out
    t0 = time.perf_counter()
    with proton.scope("work"):
        for _ in range(n):
            x.add_(1)
            torch.mm(w, w)
    torch.cuda.synchronize()
    out["wall_s"] = time.perf_counter() - t0
    out["stats"] = native_stats()
    proton.finalize()
    out["kernel_count"] = kernel_count(path + ".hatchet")
    out["samples_in_profile"] = line_samples(path + ".hatchet")
    out["counts_equal"] = out["kernel_count"] == 2 * n
    return out


def child_cost(spec):
    import torch

    n, reps = spec["launches"], spec["reps"]
    x = torch.ones(16, device="cuda")
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()

    def loop():
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    path = os.path.join(spec["dir"], "cost")
    profiler, finalize, out = spec["profiler"], None, {"profiler": spec["profiler"], "mode": spec.get("mode")}
    try:
        if profiler == "ours":
            import proton_core as proton

            proton.start(path, backend="cupti", mode=spec.get("mode"))
            finalize = proton.finalize
        elif profiler == "upstream":
            import triton.profiler as upstream

            upstream.start(path, backend="cupti", mode=spec.get("mode"))
            finalize = upstream.finalize
    except Exception as exc:  # noqa: BLE001
        out["start_error"] = f"{type(exc).__name__}: {exc}"
        return out
    loop()
    loop()
    times = [loop() for _ in range(reps)]
    if profiler == "ours":
        out["stats"] = native_stats()
    if finalize is not None:
        t0 = time.perf_counter()
        finalize()
        out["finalize_s"] = time.perf_counter() - t0
        if os.path.exists(path + ".hatchet"):
            out["kernel_count"] = kernel_count(path + ".hatchet")
            out["expected_count"] = n * (reps + 2)
            out["samples_in_profile"] = line_samples(path + ".hatchet")
    out["median_s"] = statistics.median(times)
    out["per_launch_ns"] = out["median_s"] / n * 1e9
    return out


def child_soak(spec):
    import torch

    import proton_core as proton

    xs = [torch.ones(1 << k, device="cuda") for k in (10, 14, 18)]
    torch.cuda.synchronize()
    path = os.path.join(spec["dir"], "soak")
    sid = proton.start(path, backend="cupti", mode="pcsampling")
    for _ in range(1000):
        for x in xs:
            x.add_(1)
    torch.cuda.synchronize()
    proton.data.get(sid)  # a complete flush: the store's first figures
    rss0, t0 = rss_mib(), time.perf_counter()
    samples = []
    for i in range(spec["n"] // 3):
        with proton.scope(f"s{i % 10}"):
            for x in xs:
                x.add_(1)
        if i % 20_000 == 0:
            torch.cuda.synchronize()
            samples.append({"i": i, "rss_mib": rss_mib(), **{k: v for k, v in native_stats().items()
                                                             if k in ("pending_keys", "window_keys", "out_keys",
                                                                      "function_names", "line_cache")}})
    torch.cuda.synchronize()
    stats = native_stats()
    wall = time.perf_counter() - t0
    rss1 = rss_mib()
    proton.finalize()
    return {"launches": spec["n"], "wall_s": wall, "rss_growth_mib": rss1 - rss0, "trace": samples,
            "stats": stats, "kernel_count": kernel_count(path + ".hatchet")}


CHILDREN = {"info": child_info, "coexist": child_coexist, "cost": child_cost, "soak": child_soak}


# -------------------------------------------------------------------- parent ----
def run_child(spec, timeout=150):
    proc = subprocess.run(python_m("benchmarks.probes.pcsampling_probe", "--child", json.dumps(spec)),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"spec": spec, "error": (proc.stderr or proc.stdout)[-2000:], "returncode": proc.returncode}
    result = json.loads(lines[-1])
    if proc.stderr.strip():
        result["stderr"] = proc.stderr.strip()[-1500:]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSON file to write (required)")
    parser.add_argument("--launches", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--intervals", default="10,14,18", help="sampling periods (2**n cycles) for the cost rows")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: info,coexist,cost,soak")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILDREN[spec["kind"]](spec)), flush=True)
        return
    if not args.out:
        parser.error("the following arguments are required: --out")
    skip = set(filter(None, args.skip.split(",")))
    intervals = [int(i) for i in args.intervals.split(",")]
    report = {"launches": args.launches, "reps": args.reps}
    with tempfile.TemporaryDirectory() as tmp:
        if "info" not in skip:
            report["info"] = run_child({"kind": "info", "dir": tmp})
            info = report["info"]
            print(f"info: {info.get('gpu')} cc {info.get('capability')}, libcupti {info.get('libcupti')} "
                  f"(API {info.get('cupti_api_version')}), {info.get('stall_reason_count')} stall reasons, "
                  f"kernel activity {info.get('kernel_activity')}, {info.get('samples_in_profile')} samples"
                  f"{'; ERROR ' + info['error'][-300:] if 'error' in info else ''}", flush=True)
        if "coexist" not in skip:
            rows = report["coexist"] = []
            for collection in ("continuous", "serialized"):
                for kernels in ("concurrent", "serial", "auto"):
                    row = run_child({"kind": "coexist", "dir": tmp, "collection": collection, "kernels": kernels,
                                     "n": 300})
                    rows.append(row)
                    stats = row.get("stats", {})
                    print(f"coexist {collection:10s} kernels={kernels:10s}: "
                          + (f"start error: {row['start_error']}" if "start_error" in row else
                             f"ERROR {row['error'][-300:]}" if "error" in row else
                             f"{row['kernel_count']}/{row['launches']} kernel records, "
                             f"{row['samples_in_profile']} samples, activity {stats.get('kernel_activity')}, "
                             f"restarts {stats.get('restarts')}, staging reads {stats.get('staging_reads')}, "
                             f"dropped {stats.get('dropped_samples')}, errors {stats.get('last_error')!r}"),
                          flush=True)
        if "cost" not in skip:
            variants = [("none", None), ("ours", None)]
            variants += [("ours", f"pcsampling:interval={i}") for i in intervals]
            variants += [("ours", f"pcsampling:interval={i}:collection=serialized") for i in intervals]
            variants += [("upstream", None), ("upstream", "pcsampling")]
            rows = report["cost"] = []
            base = None
            for profiler, mode in variants:
                row = run_child({"kind": "cost", "dir": tmp, "profiler": profiler, "mode": mode,
                                 "launches": args.launches, "reps": args.reps})
                rows.append(row)
                if profiler == "none" and "median_s" in row:
                    base = row["median_s"]
                if base and "median_s" in row:
                    row["slowdown"] = row["median_s"] / base
                    row["added_ns_per_launch"] = (row["median_s"] - base) / args.launches * 1e9
                print(f"cost {profiler:8s} {str(mode):45s}: "
                      + (f"{row['per_launch_ns']:8.0f} ns/launch, x{row.get('slowdown', float('nan')):.2f}, "
                         f"kernels {row.get('kernel_count')}/{row.get('expected_count')}, "
                         f"samples {row.get('samples_in_profile')}" if "median_s" in row else
                         f"start error: {row.get('start_error')}" if "start_error" in row else
                         f"ERROR {row.get('error', '')[-300:]}"), flush=True)
        if "soak" not in skip:
            report["soak"] = run_child({"kind": "soak", "dir": tmp, "n": 200_000}, timeout=1800)
            soak = report["soak"]
            print(f"soak: {soak.get('launches')} launches, RSS growth {soak.get('rss_growth_mib')} MiB, "
                  f"kernels {soak.get('kernel_count')}, stats {soak.get('stats')}"
                  f"{'; ERROR ' + soak['error'][-300:] if 'error' in soak else ''}", flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
