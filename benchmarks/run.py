"""Proton overhead benchmark: how much does profiling cost, against what users would pick instead.

    python3 -m benchmarks.run --out DIR [--quick] [--markdown]   # on the GPU machine, from the repository root
    python3 -m benchmarks.run --dry-run                          # anywhere: plumbing only

Every (workload, profiler) measurement runs in its own process (worker.py).
Rounds are interleaved -- each round runs every profiler once per workload, in
a balanced order (``balanced_order``) -- and each profiled time is divided by the same round's
unprofiled time, because these machines drift by tens of percent between
processes.  A time budget keeps the whole run bounded: measurement length is
chosen from a calibration run, low-priority cells are dropped when the rounds
would not fit, and rounds stop early (with a note) when the budget is spent.
Raw figures go to DIR/bench.json after every round, so a killed run keeps them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

if not __package__:  # started as a file: the package and its modules cannot be found that way
    sys.exit("run it from the repository root: python3 -m benchmarks.run ...")

from benchmarks import REPO, lanes, profilers, python_m, report  # noqa: E402
from benchmarks.worker import MEASURED_SUFFIX  # noqa: E402

WORKER = "benchmarks.worker"  # each measurement's process: python3 -m benchmarks.worker, from REPO

# workload -> [(profiler, priority)]; priority 3 goes first, then 2, when the budget is short.
MATRIX = {
    "launch": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-python", 1), ("ours-triton", 1),
               ("upstream-shadow", 1), ("upstream-python", 1), ("torch", 2), ("ours-pcsampling", 2),
               ("ours-pcsampling-serialized", 2), ("upstream-pcsampling", 2)],
    "mlp": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-python", 1), ("ours-torch", 1),
            ("floor-record-function", 1), ("upstream-shadow", 1), ("upstream-python", 2), ("torch", 2),
            ("ours-pcsampling", 2), ("ours-pcsampling-serialized", 2), ("upstream-pcsampling", 2)],
    "decoder": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-torch", 1), ("floor-record-function", 1),
                ("upstream-shadow", 1), ("torch", 2)],
    "graph": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-python", 1), ("upstream-shadow", 1),
              ("upstream-python", 2), ("torch", 2)],
    "triton_matmul": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-python", 2), ("ours-triton", 1),
                      ("upstream-shadow", 1), ("upstream-triton", 2)],
    "triton_launch": [("none", 1), ("floor", 1), ("floor-triton-hook", 1), ("ours-triton", 1), ("ours-python", 1),
                      ("upstream-triton", 1), ("upstream-python", 2)],
    "jax": [("none", 1), ("floor", 1), ("ours-shadow", 1), ("ours-python", 1), ("upstream-shadow", 1),
            ("upstream-python", 2)],
}
# A cell may also be an in-process A/B pair such as "ours-shadow/floor" (worker.measure_paired):
# not in the default matrix; --profilers ours-shadow/floor adds it to every workload.
DRY_MATRIX = {"sleep": [("none", 1), ("fake-ours", 1), ("fake-floor", 1), ("broken", 1), ("stuck", 1)],
              "nap": [("none", 1), ("fake-ours", 1), ("fake-floor", 1), ("fake-ours/fake-floor", 1)]}  # A/B: see below

# rounds, measured seconds per run (target, floor), calibration seconds, total budget seconds,
# a worker's time limit (at least min_timeout, else timeout_x times its expected run), and
# how long a finalize may run before the worker is killed (its measurement kept), and the seconds of
# one in-process A/B window
MODES = {
    "full": dict(rounds=5, target=1.0, min_target=0.3, calibrate=0.5, budget=450.0,
                 min_timeout=60.0, timeout_x=10.0, finalize_limit=30.0, pair_window_s=0.1),
    "quick": dict(rounds=2, target=0.3, min_target=0.15, calibrate=0.25, budget=125.0,
                  min_timeout=60.0, timeout_x=10.0, finalize_limit=30.0, pair_window_s=0.1),
    # dry: windows of a few 2 ms steps, so that the A/B cell's pairs are cut
    "dry": dict(rounds=3, target=0.04, min_target=0.02, calibrate=0.04, budget=60.0,
                min_timeout=3.0, timeout_x=2.0, finalize_limit=1.5, pair_window_s=0.01),
}
EXIT_GRACE_S = 5.0  # a worker that wrote its result but does not exit is killed after this
PROFILED_SLOWDOWN = 1.4  # planning guess for the average profiled/unprofiled time
PROFILER_EXTRA_S = 0.8  # planning guess: a profiler's imports, start and finalize, per process
WINDOW_EXTRA_S = 0.05  # planning guess: one A/B window's start and finalize


class Harness:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        self.work = os.path.join(self.out, "bench_work")  # logs of failures, round-0 profiles, the floor build
        self.t0 = time.perf_counter()
        self.runs: list[dict] = []
        self.calibration: dict = {}
        self.plan: dict = {}
        self.notes: list[str] = []
        self.meta: dict = {}
        self.env = dict(os.environ)
        self.env.update(XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
        self.current = None
        self.exit_hangs: dict[str, int] = {}  # profiler -> workers killed after writing their result

    # ------------------------------------------------------------- plumbing
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str) -> None:
        try:
            print(f"[{self.elapsed():6.1f}s] {msg}", flush=True)
        except OSError:  # a closed pipe (tee gone) must not end the measurements; bench.json still gets written
            pass

    def run_worker(self, workload, profiler, tag, *, iters=0, warmup=2, calibrate=0.0, timeout=120.0,
                   finalize_limit=None, pairs=None) -> dict:
        """Run one worker process; always return a run record, never raise.

        A worker still in finalize ``finalize_limit`` seconds after its measurement
        is killed: the overhead figure stands, the finalize cell says it was cut."""
        for sub in ("results", "logs", "profiles"):
            os.makedirs(os.path.join(self.work, sub), exist_ok=True)
        result_path = os.path.join(self.work, "results", tag + ".json")
        log_path = os.path.join(self.work, "logs", tag + ".log")
        profile_dir = os.path.join(self.work, "profiles", tag)
        measured_path = result_path + MEASURED_SUFFIX
        for stale in (result_path, result_path + ".tmp", measured_path):
            if os.path.exists(stale):
                os.remove(stale)
        cmd = python_m(WORKER, "--workload", workload, "--profiler", profiler,
                       "--iters", str(iters), "--warmup", str(warmup), "--calibrate", str(calibrate),
                       "--pairs", str(pairs or self.args.pairs),
                       "--profile-dir", profile_dir, "--result", result_path)
        note, rc = None, None
        t = time.perf_counter()
        with open(log_path, "w") as log:
            try:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO,
                                        start_new_session=True)
            except OSError as exc:
                return {"workload": workload, "profiler": profiler, "ok": False, "error": f"cannot start worker: {exc}"}
            self.current = proc
            seen = None
            try:
                while True:
                    rc = proc.poll()
                    if rc is not None:
                        break
                    now = time.perf_counter()
                    if os.path.exists(result_path):
                        seen = seen or now
                        grace = 1.0 if self.exit_hangs.get(profiler, 0) >= 2 else EXIT_GRACE_S
                        if now - seen > grace:
                            note = f"killed: still running {grace:.0f} s after writing its result"
                            self.exit_hangs[profiler] = self.exit_hangs.get(profiler, 0) + 1
                            rc = self._kill(proc)
                            break
                    if finalize_limit is not None and _age_s(measured_path) > finalize_limit:
                        note = f"timeout: finalize still running after {finalize_limit:g} s"
                        rc = self._kill(proc)
                        break
                    if now - t > timeout:
                        note = f"timeout after {timeout:.0f} s"
                        rc = self._kill(proc)
                        break
                    time.sleep(0.05)
            finally:
                if proc.poll() is None:
                    self._kill(proc)
                self.current = None
        wall = time.perf_counter() - t
        record = None
        if os.path.exists(result_path):
            try:
                with open(result_path) as f:
                    record = json.load(f)
            except (OSError, ValueError) as exc:
                note = f"unreadable result: {exc}"
        if record is None and note and note.startswith("timeout") and os.path.exists(measured_path):
            try:  # measured, then killed in a finalize that did not end: the overhead figure stands, the finalize cell says so
                with open(measured_path) as f:
                    record = json.load(f)
                record["finalize_killed_s"] = max(0.0, _age_s(measured_path))
                note = f"finalize cut ({note})"
            except (OSError, ValueError):
                record = None
        for done in (result_path, measured_path):
            if os.path.exists(done):
                os.remove(done)  # bench.json keeps every figure
        tail = _tail(log_path)
        if record is None:
            why = note or (f"worker died ({_rc_text(rc)})")
            last = report.first_line("\n".join(reversed(tail.splitlines()))) if tail.strip() else ""
            record = {"ok": False, "error": f"{why}; last output: {last}" if last else why}
        record.update(workload=workload, profiler=profiler, wall_s=wall, rc=rc)
        if note and record.get("ok"):
            record["warning"] = note
        if not record.get("ok") or rc not in (0, None):
            record["log_tail"] = tail[-2000:]
        else:
            os.remove(log_path)
        return record

    def _kill(self, proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own session: it and its children only
        except (ProcessLookupError, PermissionError):
            pass
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def save(self, final=False) -> None:
        summary = report.summarize(self.runs, self.plan)
        fid = report.fidelity(self.runs, self.plan)
        self.meta.update(elapsed_s=self.elapsed(), notes=self.notes, final=final)
        doc = {"meta": self.meta, "plan": self.plan, "calibration": self.calibration,
               "runs": self.runs, "summary": summary, "fidelity": fid}
        _write_json(os.path.join(self.out, "bench.json"), doc)
        if self.args.markdown:
            with open(os.path.join(self.out, "bench.md"), "w") as f:
                f.write(report.render_markdown(summary, fid, self.plan, self.meta))
        self.summary, self.fid = summary, fid

    # -------------------------------------------------------------- phases
    def build_floor(self) -> None:
        from benchmarks.floor import build as floor_build

        if os.path.isdir(self.env.get("PROTON_BENCH_FLOOR_DIR", "")) or "PROTON_BENCH_FLOOR_ERROR" in self.env:
            self.log("floor: built by the parent run")  # a lane of run.py --gpus
            return
        try:
            d = floor_build.build(os.path.join(self.work, "floor_build"))
            self.env["PROTON_BENCH_FLOOR_DIR"] = d
            self.meta["floor"] = {"built": True, "dir": d}
            self.log(f"floor built into {d}")
        except Exception as exc:  # noqa: BLE001 - a broken toolchain must not stop the run
            msg = f"floor build failed: {exc}"
            print("=" * 72 + f"\n{msg}\n" + "=" * 72, flush=True)
            self.env.pop("PROTON_BENCH_FLOOR_DIR", None)
            self.env["PROTON_BENCH_FLOOR_ERROR"] = report.first_line(msg)
            self.meta["floor"] = {"built": False, "error": str(exc)[-4000:]}
            self.notes.append(report.first_line(msg))

    def calibrate(self, workloads, mode) -> None:
        for w in workloads:
            rec = self.run_worker(w, "none", f"calibrate.{w}", warmup=2, calibrate=mode["calibrate"], timeout=150)
            self.calibration[w] = rec
            if rec.get("ok"):
                rec["overhead_s"] = max(0.5, rec["wall_s"] - rec["measure_s"] - 2 * rec["per_iter_s"])
                self.log(f"calibrated {w}: {rec['per_iter_s'] * 1e3:.3f} ms/iter, process overhead "
                         f"{rec['overhead_s']:.1f} s")
                for k, v in rec.get("versions", {}).items():
                    self.meta.setdefault("versions", {})[k] = v
            else:
                self.log(f"calibration of {w} FAILED: {report.first_line(rec.get('error'))}")

    def windows(self, profiler) -> int:
        """Measured windows in one run: 1, or both halves of every pair for an in-process A/B."""
        return 2 * self.args.pairs if profilers.paired(profiler) else 1

    def run_shape(self, entry, profiler) -> tuple[int, int, int | None]:
        """(iterations, warm-up, pairs) of one window of a run; pairs is None unless it is an in-process
        A/B run. The pairs' measured time
        is cut into windows of about --pair-window-s: a process's speed drifts by tens of percent over
        seconds (the H200 machine's step median moved 1.0-2.8 ms between windows half a second apart),
        and only windows close together in time cancel that drift."""
        iters, warmup = slow_iters(entry, profiler)
        if not profilers.paired(profiler):
            return iters, warmup, None
        if self.args.pair_window_s <= 0:
            return iters, warmup, self.args.pairs
        window = max(3, int(round(self.args.pair_window_s / entry["per_iter_s"])))
        if window >= iters:
            return iters, warmup, self.args.pairs
        return window, max(2, window // 4), self.args.pairs * max(1, int(round(iters / window)))

    def est_run_s(self, entry, profiler) -> float:
        if not profilers.paired(profiler) or "per_iter_s" not in entry:
            return entry["est_run_s"] * self.windows(profiler)
        iters, warmup, pairs = self.run_shape(entry, profiler)  # each window: start, warm-up, finalize
        return entry["est_run_s"] + 2 * pairs * ((iters + warmup) * entry["per_iter_s"] * 1.25 + WINDOW_EXTRA_S)

    def make_plan(self, matrix, mode, rounds) -> None:
        ok = {w: c for w, c in self.calibration.items() if c.get("ok")}
        active = {w: list(cells) for w, cells in matrix.items() if w in ok}
        remaining = max(1.0, mode["budget"] - self.elapsed()) * 0.92

        def fixed_s(w, p):
            return ok[w]["overhead_s"] + (PROFILER_EXTRA_S * self.windows(p) if p != "none" else 0.0)

        def estimate(t, act):
            return sum(fixed_s(w, p) + PROFILED_SLOWDOWN * t * 1.25 * self.windows(p) for w in act for p, _ in act[w])

        def fit(act):
            fixed = sum(fixed_s(w, p) for w in act for p, _ in act[w])
            var = sum(PROFILED_SLOWDOWN * 1.25 * self.windows(p) for w in act for p, _ in act[w]) or 1.0
            return min(mode["target"], max(mode["min_target"], (remaining / rounds - fixed) / var))

        t = fit(active)
        for level in (3, 2):
            if rounds * estimate(t, active) <= remaining:
                break
            dropped = [f"{w}/{p}" for w in active for p, pr in active[w] if pr >= level]
            if dropped:
                active = {w: [(p, pr) for p, pr in cells if pr < level] for w, cells in active.items()}
                self.notes.append(f"budget: dropped priority-{level} cells {', '.join(dropped)}")
                t = fit(active)
        est = rounds * estimate(t, active)
        self.log(f"plan: {rounds} rounds x {sum(len(c) for c in active.values())} runs, {t:.2f} s measured per "
                 f"run, estimated {est:.0f} s of {remaining / 0.92:.0f} s left")
        self.target = t
        for w, cells in matrix.items():
            entry = {"profilers": [p for p, _ in active.get(w, cells)]}
            cal = self.calibration.get(w)
            if not cal or not cal.get("ok"):
                entry["error"] = (cal or {}).get("error", "not calibrated")
            else:
                per = cal["per_iter_s"]
                iters = max(3, int(round(t / per)))
                entry.update(iters=iters, warmup=max(2, int(math.ceil(0.2 * iters))), per_iter_s=per,
                             kernels_per_step=cal.get("kernels_per_step"),
                             est_run_s=cal["overhead_s"] + PROFILER_EXTRA_S + PROFILED_SLOWDOWN * t * 1.25)
            self.plan[w] = entry

    def rounds(self, rounds, mode) -> int:
        failed: dict[tuple, str] = {}
        block_s: dict[str, float] = {}
        timeouts: dict[str, int] = {}
        done = 0
        for rnd in range(rounds):
            for w, entry in self.plan.items():
                if entry.get("error"):
                    continue
                cells = entry["profilers"]
                order = balanced_order(cells, rnd)
                guess = block_s.get(w, sum(self.est_run_s(entry, p) for p in cells))
                if (rnd > 0 and self.elapsed() + guess > mode["budget"]) or self.elapsed() > mode["budget"]:
                    partial = any(r["round"] == rnd for r in self.runs)
                    self.notes.append(f"budget of {mode['budget']:.0f} s reached: {done} complete rounds "
                                      f"of {rounds}" + (f" (round {rnd + 1} partial)" if partial else ""))
                    self.log(self.notes[-1])
                    return done
                t = time.perf_counter()
                prev = None  # the process that ran just before, within this round
                for pos, p in enumerate(order):
                    if (w, p) in failed or timeouts.get(p, 0) >= 2:
                        continue
                    if p == "floor" and "PROTON_BENCH_FLOOR_ERROR" in self.env:  # no process to spend on it
                        rec = {"workload": w, "profiler": p, "round": rnd, "ok": False,
                               "error": self.env["PROTON_BENCH_FLOOR_ERROR"]}
                        self.runs.append(rec)
                        failed[(w, p)] = rec["error"]
                        continue
                    left = mode["budget"] - self.elapsed()
                    timeout = min(240.0, max(mode["min_timeout"], mode["timeout_x"] * self.est_run_s(entry, p)),
                                  max(30.0, left + 30.0))
                    iters, warmup, pairs = self.run_shape(entry, p)
                    tag = f"r{rnd}.{w}.{p}".replace(profilers.PAIR_SEP, "_vs_")  # a file name
                    rec = self.run_worker(w, p, tag, iters=iters, warmup=warmup, pairs=pairs,
                                          timeout=timeout, finalize_limit=mode["finalize_limit"])
                    rec.update(round=rnd, position=pos, after=prev)
                    prev = p
                    self.runs.append(rec)
                    self._progress(rec)
                    if not rec.get("ok") and p != "none":
                        failed[(w, p)] = rec.get("error", "")  # do not spend budget on it again
                    if str(rec.get("error", "")).startswith("timeout"):
                        timeouts[p] = timeouts.get(p, 0) + 1  # twice: skipped everywhere
                    if rnd > 0 and not self.args.keep_profiles:
                        shutil.rmtree(os.path.join(self.work, "profiles", tag), ignore_errors=True)
                block_s[w] = time.perf_counter() - t
            done += 1
            self.meta["rounds_done"] = done
            self.save()
            self.log(f"round {rnd + 1}/{rounds} done")
        return done

    def _progress(self, rec) -> None:
        head = f"r{rec['round']} {rec['workload']:<14} {rec['profiler']:<16}"
        if rec.get("ok"):
            base = next((r for r in self.runs if r["round"] == rec["round"] and r["workload"] == rec["workload"]
                         and r["profiler"] == "none" and r.get("ok")), None)
            ratio = f"x{rec['per_iter_s'] / base['per_iter_s']:.3f}" if base else "x?"
            extra = f" kernels={rec['kernel_count']}" if rec.get("kernel_count") is not None else ""
            fin = "killed" if rec.get("finalize_s") is None else f"{rec['finalize_s'] * 1e3:7.1f} ms"
            self.log(f"{head} {rec['per_iter_s'] * 1e3:9.3f} ms/iter {ratio:>8}  finalize "
                     f"{fin:>10}  rss {rec['rss_mb']:6.0f} MB  wall {rec['wall_s']:5.1f} s"
                     f"{extra}{'  WARNING ' + rec['warning'] if rec.get('warning') else ''}")
        else:
            self.log(f"{head} FAILED: {report.first_line(rec.get('error'))}")


def balanced_order(cells: list, rnd: int) -> list:
    """Round ``rnd``'s running order: a Williams design, so across rounds every
    cell runs in every position and directly after every other cell equally
    often (over len(cells) rounds, twice that when the count is odd).  A plain
    rotation would always run a cell right after the same neighbour, and any
    effect one process leaves on the next would then pass for overhead."""
    n = len(cells)
    if n < 3:
        return list(cells) if rnd % 2 == 0 or n < 2 else list(reversed(cells))
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    row = [cells[(i + rnd) % n] for i in first]
    return row[::-1] if n % 2 and (rnd // n) % 2 else row


def _tail(path, n=4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _age_s(path) -> float:
    """Seconds since ``path`` was written; -inf when it does not exist."""
    try:
        return time.time() - os.path.getmtime(path)
    except OSError:
        return float("-inf")


def _rc_text(rc) -> str:
    if rc is None:
        return "no exit status"
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _write_json(path, doc) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, path)


def _gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-smi"
    if not out:
        return "no GPU reported"
    name, _, driver = out[0].rpartition(",")
    return f"{len(out)}x {name.strip() or out[0]} (driver {driver.strip()})"


def _select(matrix, workloads, names):
    if workloads:
        unknown = set(workloads) - set(matrix)
        if unknown:
            raise SystemExit(f"unknown workload(s) {', '.join(sorted(unknown))}; known: {', '.join(matrix)}")
        matrix = {w: c for w, c in matrix.items() if w in workloads}
    if names:
        try:
            pairs = [n for n in names if profilers.paired(n)]
        except ValueError as exc:
            raise SystemExit(f"run.py: {exc}") from None
        unknown = [n for n in names if n not in profilers.PROFILERS and n not in pairs]
        if unknown:
            raise SystemExit(f"run.py: unknown profiler(s) {', '.join(unknown)}; known: {', '.join(profilers.PROFILERS)}"
                             f", or an in-process pair A{profilers.PAIR_SEP}B")
        keep = set(names) | {"none"}  # ratios need the unprofiled run
        # Named on the command line: never dropped for budget (priority 1); pairs join every workload.
        matrix = {w: [(p, 1) for p, _ in c if p in keep] + [(p, 1) for p in pairs] for w, c in matrix.items()}
    return matrix


def self_check(h: Harness) -> list[str]:
    """What the dry run must show; an empty list means the plumbing works."""
    problems = []
    with open(os.path.join(h.out, "bench.json")) as f:
        doc = json.load(f)
    cells = doc["summary"].get("sleep", {})
    none = cells.get("none", {})
    if none.get("ratio_median") != 1.0:
        problems.append(f"none ratio is {none.get('ratio_median')}, not 1.0")
    if not (cells.get("fake-ours", {}).get("ratio_median") or 0) > 0:
        problems.append("fake-ours has no ratio")
    if not cells.get("fake-ours", {}).get("profile_bytes"):
        problems.append("fake-ours profile size missing")
    if "deliberate failure" not in str(cells.get("broken", {}).get("error")):
        problems.append("broken profiler's error not reported")
    stuck = cells.get("stuck", {})
    if stuck.get("ratio_median") is None or not stuck.get("finalize_killed_s"):
        problems.append(f"a finalize that never ends lost the measurement or went unreported: {stuck}")
    pair = doc["summary"].get("nap", {}).get("fake-ours/fake-floor", {})
    nap = h.plan.get("nap", {})
    per_run = h.run_shape(nap, "fake-ours/fake-floor")[2] if "per_iter_s" in nap else h.args.pairs
    if "nap" in doc["summary"] and (len(pair.get("floor_ratios") or []) != h.args.rounds * per_run
                                    or per_run <= h.args.pairs or pair.get("ratio_median") is None):
        problems.append(f"in-process A/B cell wrong: {pair}")
    if h.args.gpus > 1 and len(doc["meta"].get("lanes", [])) != min(h.args.gpus, len(doc["summary"])):
        problems.append(f"lanes: {doc['meta'].get('lanes')}")
    fid = [r for r in doc["fidelity"] if r["profiler"] == "fake-ours"]
    if not fid or fid[0]["count_diff_pct_median"] != 0.0:
        problems.append(f"fidelity row wrong: {fid}")
    if doc["meta"]["rounds_done"] != h.args.rounds:
        problems.append(f"{doc['meta']['rounds_done']} rounds done, {h.args.rounds} asked")
    return problems


def slow_iters(entry, profiler) -> tuple[int, int]:
    """(iterations, warm-up) for one run: a profiler known to slow the program by tens to hundreds of
    times (``expected_slowdown``: upstream's and our serialized pcsampling) measures fewer iterations,
    so that its run takes about as long as the others' instead of running out of time."""
    slowdown = profilers.expected_slowdown(profiler)
    if slowdown <= 1:
        return entry["iters"], entry["warmup"]
    return max(2, round(entry["iters"] / slowdown)), 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="output directory (bench.json, bench.md, logs)")
    ap.add_argument("--quick", action="store_true", help="2 short rounds, ~2 minutes: a smoke test")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: fake workload and profilers, proves plumbing")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown, write bench.md")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5; quick 2; dry run 3)")
    ap.add_argument("--budget", type=float, help="seconds for the whole run (default 450; quick 125; env PROTON_BENCH_BUDGET)")
    ap.add_argument("--target", type=float, help="seconds measured per run (default 1.0; quick 0.3)")
    ap.add_argument("--workloads", help="comma list (default all): " + ", ".join(MATRIX))
    ap.add_argument("--profilers", help="comma list (default all; 'none' always runs); A/B runs both in one process")
    ap.add_argument("--gpus", type=int, default=1,
                    help="run workloads side by side, one lane per GPU with its own cores (whole matrix in one call)")
    ap.add_argument("--pairs", type=int, default=3,
                    help="window pairs of an in-process A/B cell such as ours-shadow/floor (default 3), each "
                         "cut into windows of --pair-window-s")
    ap.add_argument("--pair-window-s", type=float, default=None,
                    help="seconds of one A/B window (default 0.1; 0: one window per pair of the run's length)")
    ap.add_argument("--keep-profiles", action="store_true", help="keep every round's profiles (default: round 0)")
    args = ap.parse_args(argv)

    mode_name = args.mode_name = "dry" if args.dry_run else "quick" if args.quick else "full"
    mode = dict(MODES[mode_name])
    if args.pair_window_s is None:
        args.pair_window_s = mode["pair_window_s"]
    args.rounds = max(1, args.rounds or mode["rounds"])
    budget = args.budget or float(os.environ.get("PROTON_BENCH_BUDGET") or 0)  # env: for scripts passing only --out
    if budget > 0:
        mode["budget"] = budget
    if args.target:
        mode["target"] = args.target
        mode["min_target"] = min(mode["min_target"], args.target)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None
    matrix = _select(DRY_MATRIX if args.dry_run else MATRIX, split(args.workloads), split(args.profilers))

    h = Harness(args)
    os.makedirs(h.out, exist_ok=True)
    h.meta.update(mode=mode_name, rounds_asked=args.rounds, budget_s=mode["budget"], python=sys.version.split()[0],
                  date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), host=os.uname().nodename,
                  gpu="none (dry run)" if args.dry_run else _gpu_name(), argv=sys.argv[1:], rounds_done=0)
    h.meta["title"] = f"{h.meta['gpu']}, {h.meta['date']}, mode {mode_name}"

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    if args.gpus > 1:
        lanes.run(h, matrix, mode, "benchmarks.run")
    else:
        run_serial(h, matrix, mode)

    text = report.render_text(h.summary, h.fid, h.plan, h.meta)
    if args.markdown:
        print("\n" + report.render_markdown(h.summary, h.fid, h.plan, h.meta))
    print("\n" + text, flush=True)
    print(f"raw figures: {os.path.join(h.out, 'bench.json')}" +
          (f", markdown: {os.path.join(h.out, 'bench.md')}" if args.markdown else ""))

    if args.dry_run:
        problems = self_check(h)
        for p in problems:
            print(f"DRY RUN CHECK FAILED: {p}")
        print("dry run: plumbing OK" if not problems else "dry run: FAILED")
        return 1 if problems else 0
    return 0 if any(r.get("ok") for r in h.runs) else 1


def run_serial(h: Harness, matrix: dict, mode: dict) -> None:
    """Every workload on this process's GPU, one worker at a time."""
    args = h.args
    interrupted = False
    try:
        h.log(f"mode {args.mode_name}: {args.rounds} rounds, budget {mode['budget']:.0f} s, output {h.out}")
        if any(part.startswith("floor") for cells in matrix.values() for p, _ in cells
               for part in p.split(profilers.PAIR_SEP)):
            h.build_floor()
        h.calibrate(list(matrix), mode)
        h.make_plan(matrix, mode, args.rounds)
        h.save()
        h.rounds(args.rounds, mode)  # keeps meta["rounds_done"] current, even when interrupted
    except KeyboardInterrupt as exc:
        interrupted = True
        if h.current is not None:
            h._kill(h.current)
        h.notes.append(f"interrupted ({exc or 'Ctrl-C'}): partial results")
    if h.meta["rounds_done"] < args.rounds and not any("rounds of" in n for n in h.notes) and not interrupted:
        h.notes.append(f"only {h.meta['rounds_done']} of {args.rounds} rounds completed")
    h.meta["title"] += f", {h.meta['rounds_done']} rounds, {h.elapsed():.0f} s"
    h.save(final=True)


if __name__ == "__main__":
    sys.exit(main())
