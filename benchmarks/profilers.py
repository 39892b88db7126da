"""The profilers compared, behind one small interface used by worker.py.

``start(path)`` before warm-up, ``scope(name)`` for the workload's own
annotations, ``finalize()`` after the measured iterations (timed) returning the
files written and, where the profiler reports kernels, their count and time.
Imports happen inside ``start`` so a missing package becomes that cell's error.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import time


def hatchet_kernel_totals(path: str) -> tuple[int, int]:
    """Sum ``count`` and ``time (ns)`` over a hatchet profile's kernel nodes.

    Kernel nodes carry ``device_id``; values are per node (not inclusive), so
    summing them gives the profile's total.  Without any device_id node, sum all.
    """
    from proton_core.formats.hatchet import read  # here: cells that never write hatchet need no proton_core

    nodes = list(read(path).root.walk())
    kernels = [n.metrics for n in nodes if n.device is not None] or [n.metrics for n in nodes]
    count = sum(int(m.get("count", 0)) for m in kernels)
    time_ns = sum(int(m.get("time (ns)", 0)) for m in kernels)
    return count, time_ns


def _files(path: str, reported=None) -> list[str]:
    files = [p for p in (reported or []) if isinstance(p, str) and os.path.isfile(p)]
    return files or sorted(p for p in glob.glob(glob.escape(path) + ".*") if os.path.isfile(p))


def _hatchet_result(path: str, reported=None) -> dict:
    files = _files(path, reported)
    out = {"files": files}
    hatchets = [p for p in files if p.endswith(".hatchet")]
    if hatchets:
        try:
            count, time_ns = hatchet_kernel_totals(hatchets[0])
            out.update(kernel_count=count, gpu_time_ns=time_ns)
        except Exception as exc:  # noqa: BLE001 - the overhead figures stand without the totals
            out["parse_error"] = f"{type(exc).__name__}: {exc}"
    return out


class NoProfiler:
    reports_kernels = False

    def start(self, path):
        pass

    def scope(self, name):
        return contextlib.nullcontext()

    def finalize(self):
        return {"files": []}


class Ours:
    """proton_core with the CUPTI backend."""

    reports_kernels = True

    def __init__(self, context="shadow", hook=None):
        self.context, self.hook = context, hook

    def start(self, path):
        import proton_core as proton

        self.proton, self.path = proton, path
        proton.start(path, backend="cupti", context=self.context, hook=self.hook)

    def scope(self, name):
        return self.proton.scope(name)

    def finalize(self):
        return _hatchet_result(self.path, self.proton.finalize())


class Upstream:
    """Proton as shipped inside the installed Triton (triton.profiler)."""

    reports_kernels = True

    def __init__(self, context="shadow", hook=None):
        self.context, self.hook = context, hook
        import proton_core.formats.hatchet  # noqa: F401  (finalize reads with it: import it before the timing)

    def start(self, path):
        import triton.profiler as proton_up

        self.proton, self.path = proton_up, path
        proton_up.start(path, context=self.context, hook=self.hook)

    def scope(self, name):
        return self.proton.scope(name)

    def finalize(self):
        self.proton.finalize()
        return _hatchet_result(self.path)


class TorchProfiler:
    """torch.profiler with CPU+CUDA activities; finalize includes key_averages()."""

    reports_kernels = False

    def start(self, path):
        import torch

        self.torch = torch
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        self.prof = torch.profiler.profile(activities=acts)
        self.prof.__enter__()

    def scope(self, name):
        return self.torch.profiler.record_function(name)

    def finalize(self):
        self.prof.__exit__(None, None, None)
        table = self.prof.key_averages()
        return {"files": [], "rows": len(table)}


class Floor:
    """The bare-CUPTI floor (floor/floor.cpp), built by run.py into PROTON_BENCH_FLOOR_DIR."""

    reports_kernels = True

    def start(self, path):
        floor_dir = os.environ.get("PROTON_BENCH_FLOOR_DIR", "")
        if not floor_dir:
            raise RuntimeError(os.environ.get("PROTON_BENCH_FLOOR_ERROR") or "floor module not built")
        from benchmarks.floor.build import find_cupti, load

        self.floor = load(floor_dir)
        self.lib = find_cupti()
        self.floor.start(self.lib)

    def scope(self, name):
        return contextlib.nullcontext()

    def finalize(self):
        count, time_ns, dropped = self.floor.stop()
        launches, distinct = self.floor.launches()
        return {"files": [], "kernel_count": count, "gpu_time_ns": time_ns, "dropped": dropped,
                "launch_callbacks": launches, "libcupti": self.lib}


class FloorTritonHook(Floor):
    """The floor plus the least a Triton launch hook can do: Triton builds the launch metadata
    and calls the hooks, and the enter hook evaluates ``launch_metadata`` (``meta.get()``).
    What any ``hook="triton"`` costs at least, ours and upstream's alike."""

    def start(self, path):
        from triton import knobs

        super().start(path)
        self.hooks = knobs.runtime
        self.enter, self.leave = (lambda meta: meta.get()), (lambda meta: None)
        self.hooks.launch_enter_hook.add(self.enter)
        self.hooks.launch_exit_hook.add(self.leave)

    def finalize(self):
        self.hooks.launch_enter_hook.remove(self.enter)
        self.hooks.launch_exit_hook.remove(self.leave)
        return super().finalize()


class WithNullObserver:
    """Mixin: the profiler plus RecordFunction callbacks that do nothing, registered as ``hook="torch"``
    registers its own (global, operator scope, no inputs), so torch builds a record per operator call."""

    def start(self, path):
        from proton_torch import native

        super().start(path)
        self.ext = native.load()
        self.ext.null_observer(True)

    def finalize(self):
        self.ext.null_observer(False)
        return super().finalize()


class FloorRecordFunction(WithNullObserver, Floor):
    """The floor plus the null RecordFunction observer: what any native operator context costs at
    least, ours and Kineto's alike."""


class FakeOurs:
    """Dry-run stand-in for ours: one 'kernel' per scope entered, written as hatchet."""

    reports_kernels = True

    def start(self, path):
        self.path, self.n = path, 0

    @contextlib.contextmanager
    def scope(self, name):
        self.n += 1
        yield

    def finalize(self):
        kernel = {"frame": {"name": "fake_kernel", "type": "function"}, "children": [],
                  "metrics": {"count": self.n, "time (ns)": 1000 * self.n, "device_id": "0", "device_type": "CUDA"}}
        root = {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0},
                "children": [kernel]}
        with open(self.path + ".hatchet", "w") as f:
            json.dump([root, {"CUDA": {}}], f)
        return _hatchet_result(self.path)


class FakeFloor(FakeOurs):
    """Dry-run stand-in for the floor: the same count, reported directly."""

    def finalize(self):
        return {"files": [], "kernel_count": self.n, "gpu_time_ns": 1000 * self.n, "dropped": 0}


class Broken(NoProfiler):
    """Dry-run profiler that fails, to prove a failure becomes one error cell."""

    def start(self, path):
        raise RuntimeError("deliberate failure (dry run)\nsecond line is not shown in the table")


class Stuck(NoProfiler):
    """Dry-run profiler whose finalize never ends (as torch.profiler's on a million
    kernels): the overhead must still reach the table, the finalize cell say it was cut."""

    def finalize(self):
        time.sleep(3600)


class OursPCSampling(Ours):
    """proton_core with the CUPTI backend in mode="pcsampling" (instruction samples per source line)."""

    def __init__(self, mode="pcsampling"):
        super().__init__("shadow")
        self.mode = mode

    def start(self, path):
        import proton_core as proton

        self.proton, self.path = proton, path
        proton.start(path, backend="cupti", context=self.context, hook=self.hook, mode=self.mode)


class OursPCSamplingSerialized(OursPCSampling):
    """mode="pcsampling:collection=serialized": exact per-launch samples, kernels serialized."""

    expected_slowdown = 100.0  # CUPTI serializes kernels and samples are taken per launch (H200: ~80x)

    def __init__(self):
        super().__init__("pcsampling:collection=serialized")


class UpstreamPCSampling(Upstream):
    """Proton inside the installed Triton, in its mode="pcsampling"."""

    expected_slowdown = 200.0  # it serializes every launch (H200: ~100-300x); run.slow_iters

    def start(self, path):
        import triton.profiler as proton_up

        self.proton, self.path = proton_up, path
        proton_up.start(path, context=self.context, hook=self.hook, backend="cupti", mode="pcsampling")


PROFILERS = {
    "none": NoProfiler,
    "ours-shadow": lambda: Ours("shadow"),
    "ours-python": lambda: Ours("python"),
    "ours-triton": lambda: Ours("shadow", hook="triton"),
    "ours-torch": lambda: Ours("shadow", hook="torch"),
    "upstream-shadow": lambda: Upstream("shadow"),
    "upstream-python": lambda: Upstream("python"),
    "upstream-triton": lambda: Upstream("shadow", hook="triton"),
    "torch": TorchProfiler,
    "floor": Floor,
    "floor-triton-hook": FloorTritonHook,
    "floor-record-function": FloorRecordFunction,
    "fake-ours": FakeOurs,
    "fake-floor": FakeFloor,
    "broken": Broken,
    "stuck": Stuck,
    "ours-pcsampling": OursPCSampling,
    "ours-pcsampling-serialized": OursPCSamplingSerialized,
    "upstream-pcsampling": UpstreamPCSampling,
}


def expected_slowdown(name: str) -> float:
    """How many times slower a profiler is known to make a program (1: about as fast), for sizing runs."""
    if paired(name) or name not in PROFILERS:
        return 1.0
    factory = PROFILERS[name]
    return float(getattr(factory, "expected_slowdown", 1.0))


PAIR_SEP = "/"  # "ours-shadow/floor": both in one process, windows alternating (worker.measure_paired)


def paired(name: str) -> tuple[str, str] | None:
    """The two profilers of an in-process pair, or None for a single profiler."""
    if PAIR_SEP not in name:
        return None
    a, _, b = name.partition(PAIR_SEP)
    for part in (a, b):
        if part not in PROFILERS:
            raise ValueError(f"unknown profiler {part!r} in pair {name!r}; known: {', '.join(PROFILERS)}")
    return a, b


def make(name: str):
    try:
        return PROFILERS[name]()
    except KeyError:
        raise ValueError(f"unknown profiler {name!r}; known: {', '.join(PROFILERS)}") from None
