"""Run the benchmark's workloads side by side, one lane per GPU (run.py --gpus N).

A full 5-round matrix runs about 25 minutes on one GPU, longer than one call on
the GPU machine may take.  On a machine with several GPUs each lane is a run.py
of its own over some of the workloads, on its own GPU and its own cores, so the
whole matrix fits in one call.  Every ratio stays inside one lane (the same
round, GPU and cores), so lanes never divide one another's times; the lanes'
bench.json files are joined as merge.py joins split runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

from benchmarks import REPO, merge, python_m

# Seconds one round of a workload took on the 4-GPU H200 machine, all its
# profilers (2026-11-22; graph includes torch.profiler's finalize, cut at 30 s).
# Only used to balance the lanes, so rough is fine.
ROUND_COST_S = {"launch": 77, "mlp": 93, "decoder": 90, "graph": 80, "triton_matmul": 33, "triton_launch": 40,
                "jax": 33}  # triton_launch, decoder: guesses


def assign(workloads: list[str], n: int) -> list[list[str]]:
    """Longest first onto the least-loaded lane; lanes keep the matrix's order."""
    order = sorted(workloads, key=lambda w: -ROUND_COST_S.get(w, 1))
    load = [0.0] * n
    lanes: list[list[str]] = [[] for _ in range(n)]
    for w in order:
        i = load.index(min(load))
        lanes[i].append(w)
        load[i] += ROUND_COST_S.get(w, 1)
    return [[w for w in workloads if w in lane] for lane in lanes if lane]


def core_sets(n: int) -> list[list[int]]:
    """Disjoint, contiguous core ranges, one per lane (contiguous: usually one socket)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    size = max(1, len(cores) // n)
    return [cores[i * size:(i + 1) * size] or cores[-1:] for i in range(n)]


def gpu_ids(n: int) -> list[str]:
    visible = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return visible[:n] if len(visible) >= n else [str(i) for i in range(n)]


def _gpu_count() -> int:
    visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    listed = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return min(listed, len(visible)) if visible else listed


def lane_argv(args, workloads: list[str], out: str, budget: float) -> list[str]:
    """The child run.py's arguments: this run's, for some workloads and one lane's output."""
    argv = ["--out", out, "--workloads", ",".join(workloads), "--rounds", str(args.rounds),
            "--budget", f"{budget:.0f}"]
    if args.dry_run:
        argv.append("--dry-run")
    if args.quick:
        argv.append("--quick")
    if args.target:
        argv += ["--target", str(args.target)]
    if args.profilers:
        argv += ["--profilers", args.profilers]
    argv += ["--pairs", str(args.pairs), "--pair-window-s", str(args.pair_window_s)]
    if args.keep_profiles:
        argv.append("--keep-profiles")
    return argv


def _relay(stream, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        try:
            print(f"{prefix} {line.rstrip()}", flush=True)
        except OSError:
            pass


def run(h, matrix: dict, mode: dict, run_module: str) -> None:
    """Start one child run.py per lane (``python3 -m run_module``), wait for all, and save their joined
    figures through ``h``."""
    n = h.args.gpus
    if not h.args.dry_run:
        have = _gpu_count()
        if have < n:
            raise SystemExit(f"run.py: --gpus {n} but this machine shows {have} GPU(s); pass --gpus {max(1, have)}")
    lanes = assign(list(matrix), n)
    cores, gpus = core_sets(len(lanes)), gpu_ids(len(lanes))
    if any(p == "floor" for cells in matrix.values() for p, _ in cells):
        h.build_floor()  # once; the lanes reuse it through PROTON_BENCH_FLOOR_DIR
    budget = max(30.0, mode["budget"] - h.elapsed())
    procs, threads, outs = [], [], []
    h.meta["lanes"] = []
    for i, (workloads, cpus, gpu) in enumerate(zip(lanes, cores, gpus)):
        out = os.path.join(h.out, f"lane{i}")
        env = dict(h.env, CUDA_VISIBLE_DEVICES=gpu,
                   PROTON_BENCH_CPUS=",".join(map(str, cpus[1:5] if len(cpus) >= 6 else cpus)))
        cmd = python_m(run_module, *lane_argv(h.args, workloads, out, budget))
        h.meta["lanes"].append({"gpu": gpu, "cpus": env["PROTON_BENCH_CPUS"], "workloads": workloads})
        h.log(f"lane {i}: GPU {gpu}, cores {env['PROTON_BENCH_CPUS']}, workloads {', '.join(workloads)}")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=REPO, start_new_session=True)
        t = threading.Thread(target=_relay, args=(proc.stdout, f"[lane {i}]"), daemon=True)
        t.start()
        procs.append(proc)
        threads.append(t)
        outs.append(out)
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: each lane saves what it has
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait()
        h.notes.append("interrupted: partial results")
    for t in threads:
        t.join(timeout=5)
    docs = []
    for i, (proc, out) in enumerate(zip(procs, outs)):
        try:
            with open(os.path.join(out, "bench.json")) as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as exc:
            h.notes.append(f"lane {i} ({', '.join(lanes[i])}) left no results: exit {proc.returncode}, {exc}")
    if docs:
        joined = merge.merge(docs, label="lane")
        h.runs, h.plan = joined["runs"], joined["plan"]
        h.notes += joined["meta"]["notes"]
        h.meta.update({k: joined["meta"][k] for k in ("versions", "parts", "rounds_done")})
    h.meta["title"] += f", {len(docs)} lanes side by side, {h.meta['rounds_done']} rounds, {h.elapsed():.0f} s"
    h.save(final=True)
