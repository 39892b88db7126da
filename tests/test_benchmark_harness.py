"""The benchmark harness's plumbing, on CPU: a dry run end to end, and profile parsing.

The real measurements need the GPU machine (scripts/gpu_check.sh --bench); this
keeps the orchestration, tables, JSON and error cells from rotting in between.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(module, *args):
    """``python3 -m benchmarks.<module> args`` from the repository root, as the README runs it."""
    return [sys.executable, "-m", f"benchmarks.{module}", *map(str, args)]


def run_in_repo(cmd, timeout):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_dry_run_end_to_end(tmp_path):
    proc = run_in_repo(bench("run", "--dry-run", "--markdown", "--out", tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dry run: plumbing OK" in proc.stdout
    assert "error: RuntimeError: deliberate failure (dry run)" in proc.stdout
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert doc["meta"]["rounds_done"] == 3
    assert doc["summary"]["sleep"]["none"]["ratio_median"] == 1.0
    assert (tmp_path / "bench.md").read_text().startswith("## Proton overhead benchmark")
    # every round ran every working profiler once, in a balanced order, and says what ran before
    orders = {}
    for run in doc["runs"]:
        ran = orders.setdefault((run["workload"], run["round"]), [])
        assert run["after"] == (ran[-1] if ran else None)
        ran.append(run["profiler"])
    assert orders[("sleep", 0)][0] != orders[("sleep", 1)][0]
    # single steps are timed: quantiles bracket the window's mean, time in Python's GC is counted
    ok = [r for r in doc["runs"] if r.get("ok") and r["profiler"] == "none"]
    assert ok and all(r["step_p10_s"] <= r["step_median_s"] <= r["step_p90_s"] <= r["step_max_s"] for r in ok)
    assert all(r["step_p10_s"] <= r["per_iter_s"] <= r["step_max_s"] for r in ok)
    assert all(len(r["gc_collections"]) == 3 and r["gc_s"] >= 0 for r in ok)
    # ... and both reach the table: the ratio of median steps to the floor's, and the GC time
    cell = doc["summary"]["sleep"]["fake-ours"]
    assert len(cell["step_floor_ratios"]) == 3 and 0.5 < cell["step_floor_ratio_median"] < 2
    assert cell["gc_ms"] is not None and "step median / floor" in (tmp_path / "bench.md").read_text()


def test_every_module_imports_from_the_package_without_search_path_edits():
    """benchmarks is a package run as ``python3 -m benchmarks.<module>``: each module imports by its package
    name in a fresh interpreter (a missing third-party package such as triton aside) and no code of it reads
    or edits sys.path; started as a file, an entry point says how to run it instead of failing on an import."""
    import ast

    check = ("import importlib, pkgutil, sys, benchmarks; path = list(sys.path); missing = []\n"
             "for m in pkgutil.walk_packages(benchmarks.__path__, 'benchmarks.'):\n"
             "    try:\n        importlib.import_module(m.name)\n"
             "    except ModuleNotFoundError as exc:\n"
             "        assert not exc.name.startswith('benchmarks'), exc\n        missing.append(m.name)\n"
             "assert sys.path == path, 'sys.path changed'\n"
             "print(len(list(pkgutil.walk_packages(benchmarks.__path__, 'benchmarks.'))) - len(missing))")
    proc = run_in_repo([sys.executable, "-c", check], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[-1]) >= 20  # run, worker, lanes, merge, report, the probes ... imported
    uses = []
    for folder, _, files in os.walk(os.path.join(ROOT, "benchmarks")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    tree = ast.parse(f.read(), path)
                uses += [f"{path}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"]
    assert uses == []
    proc = run_in_repo([sys.executable, os.path.join("benchmarks", "run.py"), "--dry-run"], timeout=60)
    assert proc.returncode == 1 and "python3 -m benchmarks.run" in proc.stderr, proc.stderr


def test_balanced_order_puts_every_cell_after_every_other_equally_often():
    from benchmarks.run import balanced_order

    for n in (2, 3, 4, 5, 7, 8):
        cells = [f"p{i}" for i in range(n)]
        rounds = [balanced_order(cells, r) for r in range(n if n % 2 == 0 else 2 * n)]
        assert all(sorted(o) == cells for o in rounds)
        follows = {}
        for o in rounds:
            for a, b in zip(o, o[1:]):
                follows[(a, b)] = follows.get((a, b), 0) + 1
        assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1, (n, follows)
        firsts = [o[0] for o in rounds]
        assert len(set(firsts)) == n and len({firsts.count(c) for c in cells}) == 1


def test_hatchet_kernel_totals(tmp_path):
    from benchmarks.profilers import hatchet_kernel_totals
    kernel = lambda name, n, t: {"frame": {"name": name}, "children": [],
                                 "metrics": {"count": n, "time (ns)": t, "device_id": "0", "device_type": "CUDA"}}
    scope = {"frame": {"name": "step"}, "metrics": {"bytes": 5}, "children": [kernel("a", 3, 30), kernel("b", 2, 7)]}
    root = {"frame": {"name": "ROOT"}, "metrics": {"count": 0, "time (ns)": 0}, "children": [scope, kernel("c", 1, 1)]}
    path = tmp_path / "p.hatchet"
    path.write_text(json.dumps([root, {"CUDA": {}}]))
    assert hatchet_kernel_totals(str(path)) == (6, 38)


@pytest.mark.skipif(not os.path.isfile("/usr/local/cuda/include/cupti.h"), reason="no CUPTI headers here")
def test_floor_builds(tmp_path):
    proc = run_in_repo(bench("floor.build", tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert any(p.name.startswith("_proton_floor") for p in tmp_path.iterdir())
    # loaded from its file, as the Floor profiler and the probes load it: no search path changes
    load = ("import sys; from benchmarks.floor.build import load; path = list(sys.path); "
            f"m = load({str(tmp_path)!r}); assert load('elsewhere') is m and sys.path == path; "
            "print(m.__name__, callable(m.start) and callable(m.stop))")
    proc = run_in_repo([sys.executable, "-c", load], timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["_proton_floor", "True"]


def test_merge_joins_parts_of_a_split_run(tmp_path):
    """A run split by workload over several device calls becomes one table."""
    part = tmp_path / "part"
    proc = run_in_repo(bench("run", "--dry-run", "--workloads", "sleep", "--out", part), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((part / "bench.json").read_text())
    other = json.loads(json.dumps(doc).replace('"sleep"', '"nap"'))  # the same figures under another workload
    (tmp_path / "other.json").write_text(json.dumps(other))
    merge = bench("merge", "--out", tmp_path / "merged")
    proc = run_in_repo(merge + [str(part / "bench.json"), str(tmp_path / "other.json")], timeout=60)
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((tmp_path / "merged" / "bench.json").read_text())
    assert set(merged["summary"]) == {"sleep", "nap"}
    assert merged["summary"]["nap"]["fake-ours"]["ratios"] == doc["summary"]["sleep"]["fake-ours"]["ratios"]
    assert "| nap |" in (tmp_path / "merged" / "bench.md").read_text()
    # The same workload from two parts: each round keeps its own baseline, both parts count.
    proc = run_in_repo(merge + [str(part / "bench.json"), str(part / "bench.json")], timeout=60)
    assert proc.returncode == 0, proc.stderr
    twice = json.loads((tmp_path / "merged" / "bench.json").read_text())
    ratios = doc["summary"]["sleep"]["fake-ours"]["ratios"]
    assert sorted(twice["summary"]["sleep"]["fake-ours"]["ratios"]) == sorted(ratios * 2)
    # A merged file merged again (pooling two split runs) keeps every round apart.
    proc = run_in_repo(merge + [str(tmp_path / "merged" / "bench.json"), str(part / "bench.json")], timeout=60)
    assert proc.returncode == 0, proc.stderr
    pooled = json.loads((tmp_path / "merged" / "bench.json").read_text())
    assert sorted(pooled["summary"]["sleep"]["fake-ours"]["ratios"]) == sorted(ratios * 3)
    (tmp_path / "junk.json").write_text("[1, 2]")
    proc = run_in_repo(merge + [str(tmp_path / "junk.json")], timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "run.py" in proc.stderr


def test_lanes_run_workloads_side_by_side(tmp_path):
    """run.py --gpus 2: each workload in its own lane, on its own cores, joined into one table."""
    proc = run_in_repo(bench("run", "--dry-run", "--gpus", "2", "--out", tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dry run: plumbing OK" in proc.stdout and "[lane 1]" in proc.stdout
    doc = json.loads((tmp_path / "bench.json").read_text())
    lanes = doc["meta"]["lanes"]
    assert [lane["workloads"] for lane in lanes] == [["sleep"], ["nap"]]
    assert {lane["gpu"] for lane in lanes} == {"0", "1"}
    cpus = {r["workload"]: tuple(r["cpus"]) for r in doc["runs"] if r.get("cpus")}
    if len(os.sched_getaffinity(0)) >= 2:
        assert cpus["sleep"] != cpus["nap"]
    assert doc["summary"]["nap"]["fake-ours"]["runs"] == 3


def test_lane_assignment_balances_cost():
    from benchmarks.lanes import assign
    all_five = ["launch", "mlp", "graph", "triton_matmul", "jax"]
    four = assign(all_five, 4)
    assert sorted(w for lane in four for w in lane) == sorted(all_five)
    assert len(four) == 4 and ["triton_matmul", "jax"] in four
    assert assign(all_five, 8) == [[w] for w in ["mlp", "graph", "launch", "triton_matmul", "jax"]]
    assert assign(["launch"], 3) == [["launch"]]


def test_profilers_option_adds_pairs_and_rejects_typos(tmp_path):
    dry = bench("run", "--dry-run", "--rounds", "1", "--out", tmp_path)
    proc = run_in_repo(dry + ["--profilers", "fake-ours/fake-floor"], timeout=120)
    doc = json.loads((tmp_path / "bench.json").read_text())
    for workload in ("sleep", "nap"):
        assert set(doc["summary"][workload]) == {"none", "fake-ours/fake-floor"}, proc.stdout
        n = len(doc["summary"][workload]["fake-ours/fake-floor"]["floor_ratios"])
        assert n > 3 and n % 3 == 0, n  # --pairs 3 by default, each cut into windows of --pair-window-s
    whole = tmp_path / "whole"
    run_in_repo(dry[:-1] + [str(whole), "--workloads", "nap", "--profilers", "fake-ours/fake-floor",
                            "--pair-window-s", "0"], timeout=120)
    doc = json.loads((whole / "bench.json").read_text())
    assert len(doc["summary"]["nap"]["fake-ours/fake-floor"]["floor_ratios"]) == 3  # one window per pair
    proc = run_in_repo(dry + ["--profilers", "fake-ours,fake-our"], timeout=60)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0 and "fake-our" in proc.stderr


def test_median_interval_is_reproducible_and_brackets_the_median():
    from benchmarks.report import median_ci

    import random
    import statistics

    rng = random.Random(3)
    values = [rng.gauss(1.0, 0.15) for _ in range(40)]
    lo, hi = median_ci(values)
    assert lo < statistics.median(values) < hi and hi - lo < 0.2
    assert median_ci(values) == (lo, hi)  # seeded: a re-rendered report prints the same interval
    assert median_ci(values[:9]) is None  # too few rounds for an interval
    wide = median_ci([v * 3 - 2 for v in values])  # three times the spread, a wider interval
    assert wide[1] - wide[0] > 2 * (hi - lo)


def test_interval_drawing_rounds_is_wider_where_rounds_differ():
    """Window pairs of one round move together (one process, one machine state): drawing whole rounds must
    give the wider interval then, and none below the rounds an interval needs."""
    from benchmarks.report import median_ci, median_ci_by_round

    import random

    rng = random.Random(5)
    groups = []
    for _ in range(12):  # each round shifted by its own offset, its 9 pairs close around it
        shift = rng.gauss(0.0, 0.05)
        groups.append([1.08 + shift + rng.gauss(0.0, 0.005) for _ in range(9)])
    pairs = median_ci([v for g in groups for v in g])
    rounds = median_ci_by_round(groups)
    assert rounds[0] <= pairs[0] and rounds[1] >= pairs[1] and rounds[1] - rounds[0] > 1.5 * (pairs[1] - pairs[0])
    assert median_ci_by_round(groups) == rounds  # seeded
    assert median_ci_by_round(groups[:9]) is None


def test_lanes_pass_the_run_shape_on():
    """A lane's run.py gets this run's A/B pairs and window length, not its own defaults."""
    import argparse

    from benchmarks.lanes import lane_argv
    args = argparse.Namespace(rounds=2, dry_run=False, quick=False, target=None, profilers="ours-torch/floor",
                              keep_profiles=False, pairs=5, pair_window_s=0.25)
    argv = lane_argv(args, ["mlp"], "/tmp/lane0", 100.0)
    assert argv[argv.index("--pairs") + 1] == "5" and argv[argv.index("--pair-window-s") + 1] == "0.25"


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_thread_split_finds_a_busy_thread_by_name():
    """torch_thread_split.py's per-thread figures: a named thread that spins shows its on-CPU time
    under its name, apart from the main thread's."""
    import threading
    import time

    from benchmarks.framework_overhead import torch_thread_split as split

    stop = threading.Event()

    def spin():
        import ctypes

        ctypes.CDLL(None).prctl(15, b"busy-spinner", 0, 0, 0)  # PR_SET_NAME: Python before 3.14 names no OS thread
        while not stop.is_set():
            sum(range(1000))

    busy = threading.Thread(target=spin, name="busy-spinner")
    busy.start()
    try:
        time.sleep(0.05)
        before = split.thread_times()
        time.sleep(0.3)  # the main thread sleeps: its on-CPU time stays near nothing
        after = split.thread_times()
    finally:
        stop.set()
        busy.join()
    figures = split.per_thread(before, after, steps=3)
    name = "busy-spinner"
    assert figures[name][0] > 30e6  # ns per step: the spinner ran for most of 0.3 s over 3 "steps"
    assert figures["main"][0] < figures[name][0] / 3


def test_torch_ablation_variants_switch_one_part_and_restore_the_environment(monkeypatch):
    """torch_ablation.py: its variants join the profiler table; the scope-less wrapper opens no scope but
    starts and finalizes the profiler it wraps; a variant's environment holds during its session only."""
    from benchmarks import profilers
    from benchmarks.framework_overhead import torch_ablation as ablation

    assert set(ablation.VARIANTS) <= set(profilers.PROFILERS)
    calls = []

    class Inner:
        reports_kernels = True

        def start(self, path):
            calls.append(("start", path))

        def scope(self, name):
            raise AssertionError("the wrapped profiler's scope is not to be opened")

        def finalize(self):
            calls.append(("finalize",))
            return {"files": []}

    wrapped = ablation.NoScope(Inner())
    wrapped.start("p")
    with wrapped.scope("forward"):
        pass
    assert wrapped.finalize() == {"files": []} and calls == [("start", "p"), ("finalize",)]

    seen = {}
    monkeypatch.setattr(profilers.Ours, "start", lambda self, path: seen.update(
        during=os.environ.get("PROTON_TORCH_OBSERVE_ALL")))
    monkeypatch.setattr(profilers.Ours, "finalize", lambda self: {"files": []})
    monkeypatch.delenv("PROTON_TORCH_OBSERVE_ALL", raising=False)
    variant = profilers.make("ours-all")
    variant.start("p")
    variant.finalize()
    assert seen["during"] == "1" and "PROTON_TORCH_OBSERVE_ALL" not in os.environ


def test_ab_summary_reads_each_measure_and_pairs_rounds(tmp_path):
    """ab_bench.sh's logs (the formats launch_cost, triton_hook_overhead, nvtx_cost and run.py write) become one
    row per measure; after/before is taken per round, so a machine that drifts between rounds cancels out."""
    from benchmarks import ab_summary

    for rnd, (before, after) in enumerate([(100.0, 90.0), (200.0, 180.0), (150.0, 135.0)]):
        for side, ns in (("before", before), ("after", after)):
            stem = tmp_path / f"r{rnd}-{side}"
            (tmp_path / f"{stem.name}-launch.log").write_text(
                "case                          none           floor     ours-shadow   (ns ...)\n"
                f"torch depth 0          3000 (   +0)     3100 ( +100)     {3100 + ns:.0f} ({100 + ns:+5.0f})\n")
            (tmp_path / f"{stem.name}-triton.log").write_text(
                f"  with metadata, above the bare hook: native {ns / 1000:+.2f} us, python +1.00 us\n"
                "  w/o metadata, above the bare hook: native +0.05 us, python +0.20 us\n")
            (tmp_path / f"{stem.name}-nvtx.log").write_text(
                'NVTX push+pop...\n{"backend": "cupti", "rows": {}, "own": {"python": %f, "native": 40}}\n' % ns)
            d = tmp_path / f"{stem.name}-decoder"
            d.mkdir()
            (d / "bench.json").write_text(json.dumps({"runs": [
                {"workload": "decoder", "profiler": "ours-torch/floor", "paired_ratios": [1 + ns / 1000] * 3}]}))
    found = ab_summary.collect(str(tmp_path))
    assert found["launch: ours over unprofiled (ns)"]["after"] == {0: 190.0, 1: 280.0, 2: 235.0}
    assert found["launch: floor over unprofiled (ns)"]["before"] == {0: 100.0, 1: 100.0, 2: 100.0}
    assert found["triton: native hook, w/o metadata (us)"]["before"][2] == 0.05
    assert found["nvtx: push+pop from Python (ns)"]["before"][1] == 200.0
    assert found["decoder: hook=torch / floor"]["after"][0] == 1.09
    rows = ab_summary.table(found).splitlines()
    nvtx = next(r for r in rows if r.startswith("| nvtx: push+pop from Python"))
    assert "| 0.900 [0.900-0.900] |" in nvtx  # every round's after/before is 0.9, whatever the round's level
