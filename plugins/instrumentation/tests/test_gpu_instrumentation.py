"""The instrumentation backend on a real GPU (Triton 3.6+, torch with CUDA): issue 20's checks.

Run on the GPU machine:
    python3 -m pytest -q -s -m gpu plugins/instrumentation/tests/test_gpu_instrumentation.py
(-s shows the overhead line; with $OUT set it is also written to $OUT/instrumentation_overhead.json).
Skipped elsewhere, with the reason.
"""

import json
import logging
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.profiler.language as pl  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

import proton_core as proton  # noqa: E402
from proton_core.plugin_api import ProtonError  # noqa: E402
from proton_core.testing import child, load_profile  # noqa: E402
from proton_instrumentation import plugin  # noqa: E402
from proton_instrumentation.testing import two_loops  # noqa: E402

pl.enable_semantic("triton")

CY, CALLS, WARPS, TIME = "cycles (exc)", "scope_calls (exc)", "warps (exc)", "scope_time (ns)(exc)"
GRID, NUM_WARPS, N = 8, 4, 512


@pytest.fixture(autouse=True)
def _needs_backend():
    reason = plugin.available()
    if reason is not None or not torch.cuda.is_available():
        pytest.skip(reason or "torch sees no CUDA device")


@gluon.jit
def gluon_nested(x, out, n):
    acc = gl.load(x)
    with pl.scope("outer"):
        for _ in range(n):
            with pl.scope("inner"):
                acc = acc * 1.0001 + 0.5
        with pl.scope("tail"):
            acc = acc * 0.5
    gl.store(out + gl.program_id(0), acc)


@gluon.jit
def gluon_exit_only(x, out, n):
    pl.exit_scope("lonely")
    gl.store(out + gl.program_id(0), gl.load(x))


def buffers():
    x = torch.ones(128, device="cuda")
    out = torch.empty(GRID * 128, device="cuda")
    return x, out


def run_two_loops(x, out, n=N):
    return two_loops[(GRID,)](x, out, n, BLOCK=128, num_warps=NUM_WARPS)


def profile_one_launch(path, **start):
    """An instrumentation session around one launch of two_loops, finalized (writes ``path`` + suffix)."""
    x, out = buffers()
    proton.start(str(path), backend="instrumentation", **start)
    run_two_loops(x, out)
    torch.cuda.synchronize()
    proton.finalize()


def metrics(node):
    return {k: v for k, v in node["metrics"].items() if k not in ("device_id", "device_type")}


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_two_scopes_cycle_ratio_is_four(tmp_path, caplog):
    x, out = buffers()
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    with caplog.at_level(logging.WARNING, logger="proton"):
        with proton.scope("step"):
            run_two_loops(x, out)
        torch.cuda.synchronize()
        proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    kernel = child(root, "step", "two_loops")
    one, four = metrics(child(kernel, "one")), metrics(child(kernel, "four"))
    assert kernel["metrics"]["count"] == 1 and kernel["metrics"]["time (ns)"] > 0
    # complete records per warp: every warp of every CTA closed each scope exactly once
    assert one[CALLS] == four[CALLS] == GRID * NUM_WARPS and one[WARPS] == four[WARPS] == GRID * NUM_WARPS
    assert root["metrics"].get("dropped", 0) == 0 and warnings_of(caplog) == []
    ratio = four[CY] / one[CY]
    print(f"\ncycle ratio four/one = {ratio:.3f} (one: {one[CY] / one[WARPS]:.0f} cycles per warp)")
    assert abs(ratio - 4) <= 0.25 * 4, ratio
    assert four[TIME] > 0 and abs(four[TIME] / four[CY] - one[TIME] / one[CY]) < 1e-9  # one SM clock


def test_gluon_nested_scopes_show_the_nesting(tmp_path):
    x, out = buffers()
    proton.start(str(tmp_path / "g"), backend="instrumentation")
    gluon_nested[(GRID,)](x, out, 16, num_warps=NUM_WARPS)
    torch.cuda.synchronize()
    proton.finalize()
    kernel = child(load_profile(tmp_path / "g.hatchet")[0], "gluon_nested")
    assert [c["frame"]["name"] for c in kernel["children"]] == ["outer"]
    outer = child(kernel, "outer")
    assert sorted(c["frame"]["name"] for c in outer["children"]) == ["inner", "tail"]
    inner, tail = metrics(child(outer, "inner")), metrics(child(outer, "tail"))
    assert metrics(outer)[CALLS] == GRID * NUM_WARPS and inner[CALLS] == GRID * NUM_WARPS * 16
    assert tail[CALLS] == GRID * NUM_WARPS
    assert metrics(outer)[CY] >= inner[CY] + tail[CY]  # nested scopes fit inside their parent, per warp


def test_viewer_shows_cycles_and_normalized_cycles(tmp_path):
    profile_one_launch(tmp_path / "v")
    proc = subprocess.run([sys.executable, "-m", "proton_core.viewer", "-m", "cycles,normalized_cycles",
                           str(tmp_path / "v.hatchet")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[-1]: line.split()[:2] for line in proc.stdout.splitlines() if line.split()[-1:] in
            (["one"], ["four"])}
    one, four = (float(rows[name][1]) for name in ("one", "four"))  # normalized_cycles: cycles per warp
    assert 3.0 <= four / one <= 5.0


def test_global_buffer(tmp_path):
    profile_one_launch(tmp_path / "p", mode="default:buffer_type=global:buffer_size=4096")
    root = load_profile(tmp_path / "p.hatchet")[0]
    one = metrics(child(root, "two_loops", "one"))
    assert one[CALLS] == GRID * NUM_WARPS and one[CY] > 0 and root["metrics"].get("dropped", 0) == 0


def test_small_buffer_warns_and_keeps_what_fits(tmp_path, caplog):
    x, out = buffers()
    proton.start(str(tmp_path / "p"), backend="instrumentation", mode="default:buffer_size=256")  # 8 records/warp
    with caplog.at_level(logging.WARNING, logger="proton"):
        gluon_nested[(GRID,)](x, out, 16, num_warps=NUM_WARPS)  # 2 + 32 + 2 records per warp
        torch.cuda.synchronize()
        proton.finalize()
    root = load_profile(tmp_path / "p.hatchet")[0]
    outer = child(root, "gluon_nested", "outer")
    assert any("instrumentation buffer too small" in m and "gluon_nested" in m for m in warnings_of(caplog))
    assert root["metrics"]["dropped"] > 0
    # the latest 8 records of each warp: inner's last iterations and the tail, all paired
    assert 0 < metrics(child(outer, "inner"))[CALLS] < GRID * NUM_WARPS * 16
    assert metrics(child(outer, "tail"))[CALLS] == GRID * NUM_WARPS


@pytest.mark.parametrize("granularity, units", [("warp_group", GRID * NUM_WARPS // 4), ("cta", GRID)])
def test_granularity(tmp_path, granularity, units):
    profile_one_launch(tmp_path / "p", mode=f"default:granularity={granularity}")
    four = metrics(child(load_profile(tmp_path / "p.hatchet")[0], "two_loops", "four"))
    assert four[WARPS] == units and four[CALLS] == units and four[CY] > 0


def test_cupti_and_instrumentation_sessions_together(tmp_path, monkeypatch):
    """Kernel times from CUPTI, cycles from instrumentation; the instrumentation's own device work
    (zeroing arenas when they are made and after each batch: 7 launches fill a 512 KiB arena here) is
    not a kernel in the CUPTI profile."""
    pytest.importorskip("proton_cupti")
    from proton_instrumentation.buffers import ProfileAllocator

    monkeypatch.setattr(ProfileAllocator, "arena_bytes", 4 * GRID * 8320)
    x, out = buffers()
    run_two_loops(x, out)  # compiled outside both sessions (uninstrumented cache entry)
    torch.cuda.synchronize()
    proton.start(str(tmp_path / "times"), backend="cupti")
    proton.start(str(tmp_path / "cycles"), backend="instrumentation")
    backend = _our_backend()
    with proton.scope("step"):
        for _ in range(8):
            run_two_loops(x, out)
    torch.cuda.synchronize()
    issued = backend.allocator.issued
    proton.finalize()
    step = child(load_profile(tmp_path / "times.hatchet")[0], "step")
    times = child(step, "two_loops")
    cycles = child(load_profile(tmp_path / "cycles.hatchet")[0], "step", "two_loops")
    assert issued >= 1  # a batch was copied back and zeroed inside the CUPTI session
    assert [c["frame"]["name"] for c in step["children"]] == ["two_loops"]
    assert times["metrics"]["count"] == 8 and times["metrics"]["time (ns)"] > 0
    assert metrics(child(cycles, "four"))[CALLS] == 8 * GRID * NUM_WARPS


def test_kernel_compiled_before_start_warns_naming_it(tmp_path, caplog):
    x, out = buffers()
    held = run_two_loops(x, out)  # the CompiledKernel, loaded without instrumentation
    torch.cuda.synchronize()
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    with caplog.at_level(logging.WARNING, logger="proton"):
        held[(GRID, 1, 1)](x, out, N, 128)
        held[(GRID, 1, 1)](x, out, N, 128)
        torch.cuda.synchronize()
        proton.finalize()
    lines = [m for m in warnings_of(caplog) if "loaded before the instrumentation session started" in m]
    assert len(lines) == 1 and lines[0].startswith("kernel two_loops ")


def test_exit_without_enter_is_one_error_naming_the_kernel(tmp_path):
    x, out = buffers()
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    try:
        with pytest.raises(ProtonError) as err:
            gluon_exit_only[(1,)](x, out, 1, num_warps=NUM_WARPS)
        assert str(err.value).startswith("kernel gluon_exit_only: pl.exit_scope('lonely') has no matching")
    finally:
        proton.finalize()


def test_trace_is_chrome_json_with_per_warp_tracks(tmp_path):
    profile_one_launch(tmp_path / "t", data="trace")
    doc = json.loads((tmp_path / "t.chrome_trace").read_text())
    events = doc["traceEvents"]
    assert all({"ph", "pid", "tid", "name"} <= set(e) for e in events)
    launch = [e["pid"] for e in events if e["name"] == "process_name" and "two_loops launch" in e["args"]["name"]]
    assert len(launch) == 1
    tracks = [e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == launch[0]]
    assert len(tracks) == GRID * NUM_WARPS and all(" warp " in t and "(SM " in t for t in tracks)
    slices = [e for e in events if e.get("cat") == "in_kernel"]
    assert len(slices) == 2 * GRID * NUM_WARPS and all(e["ph"] == "X" and e["dur"] > 0 for e in slices)
    per_track = {}
    for e in slices:
        per_track.setdefault(e["tid"], []).append(e)
    for evs in per_track.values():  # 'one' then 'four', not overlapping, 'four' about 4x longer
        one, four = sorted(evs, key=lambda e: e["ts"])
        assert (one["name"], four["name"]) == ("one", "four") and one["ts"] + one["dur"] <= four["ts"] + 1e-3
        assert 2.0 < four["dur"] / one["dur"] < 6.0


def _per_launch_seconds(fn, reps=200):
    """(host seconds per launch: wall clock of the loop with a final synchronize, device seconds per
    launch: CUDA events around the same loop)."""
    fn()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start = time.perf_counter()
    begin.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - start) / reps
    return host, begin.elapsed_time(end) / 1e3 / reps


def test_overhead_of_an_instrumented_launch_is_measured(tmp_path):
    x, out = buffers()
    base, base_dev = _per_launch_seconds(lambda: run_two_loops(x, out))
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    instrumented, instrumented_dev = _per_launch_seconds(lambda: run_two_loops(x, out))
    proton.finalize()
    calls = metrics(child(load_profile(tmp_path / "p.hatchet")[0], "two_loops", "one"))[CALLS]
    assert calls == 201 * GRID * NUM_WARPS  # every launch was decoded
    result = {"uninstrumented_us": base * 1e6, "instrumented_us": instrumented * 1e6,
              "ratio": instrumented / base, "uninstrumented_device_us": base_dev * 1e6,
              "instrumented_device_us": instrumented_dev * 1e6, "device_ratio": instrumented_dev / base_dev,
              "grid": GRID, "num_warps": NUM_WARPS, "n": N, "device": torch.cuda.get_device_name()}
    print(f"\ninstrumentation overhead: host {result['instrumented_us']:.1f} us vs "
          f"{result['uninstrumented_us']:.1f} us per launch ({result['ratio']:.2f}x), "
          f"device {result['instrumented_device_us']:.1f} us vs "
          f"{result['uninstrumented_device_us']:.1f} us ({result['device_ratio']:.2f}x) on {result['device']}")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "instrumentation_overhead.json"), "w") as f:
            json.dump(result, f, indent=1)
    assert instrumented > 0 and base > 0 and instrumented_dev > 0 and base_dev > 0


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _our_backend():
    from proton_instrumentation.runtime import LaunchHooks

    return next(c.__self__.backend for c in triton.knobs.runtime.launch_exit_hook.calls
                if isinstance(getattr(c, "__self__", None), LaunchHooks))


def test_a_long_run_keeps_memory_bounded_and_decodes_every_launch(tmp_path):
    """20 000 launches: launches share batched copies, outstanding launches and batches, staging
    buffers and RSS stay bounded while the run goes on (batches are decoded as they complete), and
    the profile has every launch."""
    x, out = buffers()
    launches, warm = 20_000, 2_000
    proton.start(str(tmp_path / "long"), backend="instrumentation")
    backend = _our_backend()
    for _ in range(warm):
        run_two_loops(x, out, n=8)
    torch.cuda.synchronize()
    rss_warm = _rss_bytes()
    most = 0
    for i in range(launches - warm):
        run_two_loops(x, out, n=8)
        if i % 500 == 0:
            most = max(most, backend.outstanding())
    torch.cuda.synchronize()
    rss_end = _rss_bytes()
    outstanding_end, peak, retired = backend.outstanding(), backend.allocator.peak_batches, backend.retired
    created_end, issued = backend.device.pool.created, backend.allocator.issued
    proton.finalize()
    root = load_profile(tmp_path / "long.hatchet")[0]
    kernel = child(root, "two_loops")
    one, four = metrics(child(kernel, "one")), metrics(child(kernel, "four"))
    print(f"\nlong run: {launches} launches in {issued} copies back, RSS {rss_warm / 2**20:.0f} -> "
          f"{rss_end / 2**20:.0f} MiB, peak queued batches {peak}, most launches outstanding {most}, at the end "
          f"{outstanding_end}, staging buffers {created_end}, decoded before finalize {retired}")
    assert kernel["metrics"]["count"] == launches
    assert one[CALLS] == four[CALLS] == launches * GRID * NUM_WARPS
    assert root["metrics"].get("dropped", 0) == 0
    assert issued * 32 <= launches  # batched: 63 launches of 66 560 bytes per 4 MiB arena (per-launch: 20 000)
    assert peak <= backend.max_batches + 1
    assert most <= backend.max_outstanding and outstanding_end <= backend.max_outstanding
    assert retired >= launches - backend.max_outstanding  # decoded during the run, not all at the flush
    assert created_end <= backend.max_batches + 1  # staging recycled: at most one per queued batch
    assert rss_end - rss_warm < 64 << 20, (rss_warm, rss_end)  # 18 000 launches' 66 KB copies would be 1.2 GB


def test_batches_on_two_streams_a_grid_larger_than_the_arena_and_issues_from_another_thread(tmp_path,
                                                                                           monkeypatch):
    """Small arenas (256 KiB: 3 launches of grid 8), launches alternating between two streams, a grid of
    64 CTAs (520 KiB: the arena grows), and another thread forcing batches out while launches go on
    (what drain does): every record arrives, none twice, none lost, no CTA reads as missing."""
    import threading

    from proton_instrumentation.buffers import ProfileAllocator

    monkeypatch.setattr(ProfileAllocator, "arena_bytes", 256 << 10)
    x = torch.ones(128, device="cuda")
    outs = [torch.empty(64 * 128, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    proton.start(str(tmp_path / "s"), backend="instrumentation")
    backend = _our_backend()
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            backend.allocator.issue_all()
            time.sleep(0.0005)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for i in range(600):
            with torch.cuda.stream(streams[i % 2]):
                two_loops[(64 if i % 97 == 0 else GRID,)](x, outs[i % 2], 8, BLOCK=128, num_warps=NUM_WARPS)
    finally:
        stop.set()
        poller.join()
    torch.cuda.synchronize()
    issued, grown = backend.allocator.issued, backend.allocator.arenas_made
    proton.finalize()
    root = load_profile(tmp_path / "s.hatchet")[0]
    big = sum(1 for i in range(600) if i % 97 == 0)
    expected = ((600 - big) * GRID + big * 64) * NUM_WARPS
    assert metrics(child(root, "two_loops", "one"))[CALLS] == expected
    assert metrics(child(root, "two_loops", "four"))[CALLS] == expected
    assert child(root, "two_loops")["metrics"]["count"] == 600
    assert root["metrics"].get("dropped", 0) == 0
    assert grown >= 3  # two arenas, at least one grown
    assert 600 // 15 <= issued < 600  # batches of several launches (a grown arena holds 15)


@pytest.mark.parametrize("sync", [True, False], ids=["sync-between", "back-to-back"])
def test_large_launches_on_the_default_stream_each_reuse_the_arena_without_losing_records(tmp_path, sync):
    """Grids of 8192 CTAs (68 MB of records each, ~0.6 ms kernels) on the default stream: every launch
    fills the arena, so the next one's allocation copies it back and zeroes it right before the next
    kernel. That copy and memset must be on the stream Triton launches on: on another stream the memset
    erased one launch's records per session (on the H200: 11 of 12 such sessions, every one at this size)."""
    grid, launches = 8192, 5
    x = torch.ones(128, device="cuda")
    out = torch.empty(grid * 128, device="cuda")
    proton.start(str(tmp_path / "big"), backend="instrumentation")
    backend = _our_backend()
    for _ in range(launches):
        two_loops[(grid,)](x, out, 2000, BLOCK=128, num_warps=NUM_WARPS)
        if sync:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    issued = backend.allocator.issued
    proton.finalize()
    root = load_profile(tmp_path / "big.hatchet")[0]
    assert issued >= launches - 1  # each launch after the first issued its predecessor's batch
    assert root["metrics"].get("dropped", 0) == 0 and root["metrics"].get("untimed", 0) == 0
    assert child(root, "two_loops")["metrics"]["count"] == launches
    assert metrics(child(root, "two_loops", "one"))[CALLS] == launches * grid * NUM_WARPS
    assert metrics(child(root, "two_loops", "four"))[CALLS] == launches * grid * NUM_WARPS


def test_launches_captured_into_a_cuda_graph_leave_the_eager_launches_exact(tmp_path, monkeypatch, caplog):
    """Launches captured into a CUDA graph get buffers of their own: every replay writes there, so an
    arena slot would be overwritten under the eager launches that reuse it (small arenas here: 7
    launches each, reused ~9 times while the graph replays in between). The eager launches on the
    capturing stream, before and after, are exact; the replays are named once as not recorded."""
    from proton_instrumentation.buffers import ProfileAllocator

    monkeypatch.setattr(ProfileAllocator, "arena_bytes", 4 * GRID * 8320)
    x, out = buffers()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    proton.start(str(tmp_path / "g"), backend="instrumentation")
    with torch.cuda.stream(side):
        for _ in range(5):
            run_two_loops(x, out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(3):
            run_two_loops(x, out)
    with torch.cuda.stream(side):
        for i in range(60):
            if i % 5 == 0:
                graph.replay()
            run_two_loops(x, out)
    torch.cuda.synchronize()
    proton.finalize()
    root = load_profile(tmp_path / "g.hatchet")[0]
    kernel = child(root, "two_loops")
    assert kernel["metrics"]["count"] == 65
    assert metrics(child(kernel, "one"))[CALLS] == metrics(child(kernel, "four"))[CALLS] == 65 * GRID * NUM_WARPS
    assert root["metrics"].get("dropped", 0) == 0 and root["metrics"].get("untimed", 0) == 0
    lines = [m for m in warnings_of(caplog) if "CUDA graph capture" in m]
    assert len(lines) == 1 and lines[0].startswith("kernel two_loops was launched during CUDA graph capture")
