"""mode="pcsampling" on a real GPU, through the public API and the .hatchet file.

Run on the GPU machine (``bash scripts/gpu_check.sh``, or ``python3 -m pytest -m gpu
plugins/cupti/tests/test_gpu_pcsampling.py -s``); skipped elsewhere.  Each test prints what it saw.
"""

import inspect
import os

import pytest

import proton_core as proton
from cupti_helpers import child, cuda_torch as torch, kernel_node, kernels, load, sampled_lines, samples_below, stall_totals, walk  # noqa: F401,E501

pytestmark = pytest.mark.gpu

#: Fewer samples than CUPTI's default period (2**10 cycles) keeps the tests' buffers small.
INTERVAL = 13

try:
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001 - not installed or broken: the tests that need it skip
    triton = None

if triton is not None:

    @triton.jit
    def pcs_hot_loop(X, n_iter, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        acc = tl.load(X + offs)
        for _ in range(n_iter):
            acc = tl.sin(acc) * 0.999 + tl.cos(acc) * 0.001 + 0.25  # PCS-HOT-LINE: far more work than the loop's own
        tl.store(X + offs, acc)


def hot_line():
    """(file name, line) of the marked line of pcs_hot_loop, found in its source."""
    lines, first = inspect.getsourcelines(pcs_hot_loop.fn)
    (offset,) = [i for i, text in enumerate(lines) if "PCS-HOT-LINE" in text]
    return os.path.basename(inspect.getsourcefile(pcs_hot_loop.fn)), first + offset


def need_triton():
    if triton is None:
        pytest.skip("triton is not installed")


def run_hot_loop(torch, block, warps, launches=6, n_iter=20_000):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.ones(sms * 4 * block, device="cuda")
    grid = (x.numel() // block,)
    for _ in range(launches):
        pcs_hot_loop[grid](x, n_iter, BLOCK=block, num_warps=warps)
    torch.cuda.synchronize()


@pytest.mark.parametrize("collection", ["continuous", "serialized"])
@pytest.mark.parametrize("compiled", ["before_start", "after_start"])
def test_hot_loop_line_gets_most_samples(tmp_path, torch, collection, compiled):
    """(a), (f): a Triton kernel's samples land on its source lines, most on the loop body's line.

    compiled before start: its cubin comes from Triton's own cache (registered at start);
    after start: from CUPTI's module-load callback."""
    need_triton()
    # A specialization of its own per case, so that "after start" is the first compile and load.
    block, warps = (2048, 4) if compiled == "before_start" else (1024, 4 if collection == "continuous" else 8)
    if compiled == "before_start":
        run_hot_loop(torch, block, warps, launches=1, n_iter=10)  # compiled and loaded now
    proton.start(str(tmp_path / "hot"), backend="cupti", mode=f"pcsampling:interval={INTERVAL}:collection={collection}")
    with proton.scope("hot"):
        run_hot_loop(torch, block, warps)
    proton.finalize()
    root, _ = load(tmp_path / "hot.hatchet")
    kernel = kernel_node(child(root, "hot"), "pcs_hot_loop")
    lines = sampled_lines(kernel)
    file_name, line = hot_line()
    total = sum(int(m["samples"]) for m in lines.values())
    here = f"{os.sep}{file_name}:{line}@pcs_hot_loop"  # upstream's spelling: <path>:<line>@<function>
    hot = sum(int(m["samples"]) for name, m in lines.items() if name.endswith(here))
    top = sorted(((int(m["samples"]), name) for name, m in lines.items()), reverse=True)[:5]
    print(f"\n{collection}, compiled {compiled}: {total} samples, {hot} on line {line} ({hot / max(total, 1):.0%}); "
          f"top lines {top}; kernel {kernel['metrics']}")
    sass = sum(int(m["samples"]) for name, m in lines.items() if name.startswith("sass+"))
    assert kernel["metrics"]["count"] == 6
    assert total > 100, lines
    assert sass < total / 20, lines  # PCs map to lines (a few compiler-made instructions may have none)
    assert hot > total / 2, top


def test_memory_bound_gather_stalls_on_memory(tmp_path, torch):
    """(b) random gathers over 1 GiB: the memory dependency stall (long scoreboard) dominates."""
    x = torch.rand(1 << 28, device="cuda")
    idx = torch.randint(0, x.numel(), (1 << 24,), device="cuda")
    y = torch.take(x, idx)  # warm-up: module load, allocator
    torch.cuda.synchronize()
    proton.start(str(tmp_path / "mem"), backend="cupti", mode=f"pcsampling:interval={INTERVAL}")
    with proton.scope("gather"):
        for _ in range(10):
            y = torch.take(x, idx)
    torch.cuda.synchronize()
    proton.finalize()
    del y
    root, _ = load(tmp_path / "mem.hatchet")
    scope = child(root, "gather")
    name, kernel = max(((c["frame"]["name"], c) for c in scope["children"] if "device_id" in c["metrics"]),
                       key=lambda item: samples_below(item[1]))
    stalls = {k: v for k, v in stall_totals(kernel).items() if not k.endswith("_not_issued")}
    ranked = sorted(stalls.items(), key=lambda kv: -kv[1])
    print(f"\ngather kernel {name[:60]}: stalls {ranked[:6]}")
    assert sum(stalls.values()) > 100, stalls
    assert ranked[0][0] == "stall_long_scoreboard", ranked[:6]


def workload(torch, x, w):
    with proton.scope("add"):
        for _ in range(200):
            x.add_(1.0)
    with proton.scope("mm"):
        for _ in range(40):
            torch.mm(w, w)
    torch.cuda.synchronize()


def kernel_totals(path):
    root, _ = load(path)
    out = {}
    for p, node in walk(root):
        if "device_id" in node["metrics"]:
            key = (p[0], p[-1])
            count, time = out.get(key, (0, 0))
            out[key] = (count + int(node["metrics"].get("count", 0)), time + int(node["metrics"].get("time (ns)", 0)))
    return out


@pytest.mark.parametrize("mode", [f"pcsampling:interval={INTERVAL}",
                                  f"pcsampling:interval={INTERVAL}:collection=serialized"])
def test_kernel_counts_and_times_match_normal_mode(tmp_path, torch, mode):
    """(c) the same program profiled twice: the kernel nodes' counts are equal, GPU times close."""
    x = torch.ones(1 << 24, device="cuda")
    w = torch.rand(2048, 2048, device="cuda")
    workload(torch, x, w)  # warm-up
    proton.start(str(tmp_path / "normal"), backend="cupti")
    workload(torch, x, w)
    proton.finalize()
    proton.start(str(tmp_path / "sampled"), backend="cupti", mode=mode)
    workload(torch, x, w)
    proton.finalize()
    normal, sampled = kernel_totals(tmp_path / "normal.hatchet"), kernel_totals(tmp_path / "sampled.hatchet")
    print(f"\n{mode}: normal {normal}\nsampled {sampled}")
    assert {k: c for k, (c, _) in sampled.items()} == {k: c for k, (c, _) in normal.items()}
    assert sum(c for c, _ in normal.values()) == 240
    for key, (_, time) in normal.items():
        ratio = sampled[key][1] / time
        assert 0.7 < ratio < 1.3, (key, ratio)
    root, _ = load(tmp_path / "sampled.hatchet")
    assert samples_below(child(root, "mm")) > 0


def test_graph_replays_sampled_under_captured_at(tmp_path, torch):
    """(d) kernels of a CUDA graph replay: samples under <launch path>/<captured_at>/<capture path>."""
    x = torch.ones(1 << 26, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            x.mul_(1.0001)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    replays = 20
    proton.start(str(tmp_path / "g"), backend="cupti", mode=f"pcsampling:interval={INTERVAL}")
    graph = torch.cuda.CUDAGraph()
    with proton.scope("capture"):
        with torch.cuda.graph(graph):
            for _ in range(4):
                x.mul_(1.0001)
    with proton.scope("replay"):
        for _ in range(replays):
            graph.replay()
    torch.cuda.synchronize()
    proton.finalize()
    root, _ = load(tmp_path / "g.hatchet")
    captured = child(root, "replay", "<captured_at>", "capture")
    ks = kernels(captured)
    sampled = samples_below(captured)
    print(f"\ngraph: kernels {ks}, samples under replay/<captured_at>/capture: {sampled}")
    assert ks and all(m["count"] == 4 * replays for m in ks.values()), ks
    assert sampled > 0
    replay = child(root, "replay")
    direct = [c for c in replay["children"] if "device_id" in c["metrics"]]
    assert not direct and samples_below(replay) == sampled  # nothing filed at the launch path itself


@pytest.mark.parametrize("mode, words", [
    ("pcsampling:interval=99", "interval must be a whole number from 5 to 31"),
    ("pcsampling:every=3", "is not an option of pcsampling"),
])
def test_bad_options_fail_in_one_line_and_leave_nothing(tmp_path, torch, mode, words):
    """(e) a bad option: one line, no session, and the next normal session works."""
    from proton_core.plugin_api import ProtonError
    from proton_core.testing import open_session_ids

    with pytest.raises(ProtonError) as err:
        proton.start(str(tmp_path / "bad"), backend="cupti", mode=mode)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert open_session_ids() == []
    x = torch.ones(1024, device="cuda")
    proton.start(str(tmp_path / "after"), backend="cupti")
    with proton.scope("s"):
        for _ in range(30):
            x.add_(1)
    proton.finalize()
    root, _ = load(tmp_path / "after.hatchet")
    assert sum(m["count"] for m in kernels(child(root, "s")).values()) == 30
    assert not (tmp_path / "bad.hatchet").exists()


def test_sampling_then_normal_session_in_one_process(tmp_path, torch):
    """Stopping a sampling session disables sampling: a later normal session has no line nodes."""
    x = torch.ones(1 << 20, device="cuda")
    proton.start(str(tmp_path / "a"), backend="cupti", mode=f"pcsampling:interval={INTERVAL}")
    for _ in range(50):
        x.add_(1)
    proton.finalize()
    proton.start(str(tmp_path / "b"), backend="cupti")
    with proton.scope("s"):
        for _ in range(50):
            x.add_(1)
    proton.finalize()
    root, _ = load(tmp_path / "b.hatchet")
    assert samples_below(root) == 0
    assert sum(m["count"] for m in kernels(child(root, "s")).values()) == 50


def test_three_sampling_sessions_in_a_row_each_sample_every_long_kernel(tmp_path, torch):
    """Issue 40 item 8: a second and third mode="pcsampling" session in one process get their samples
    (the second used to get 0, its hardware buffers reported full), on an MLP training step at the
    default interval; every kernel that ran over 200 us in a session has samples below it."""
    torch.manual_seed(0)
    # Dense enough that at the default interval the GPU's sample buffer filled within one drain tick
    # (27 M samples in ~0.1 s on an H200): every session of this step used to get 0 samples.
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                                torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 2048, device="cuda")
    y = torch.randint(0, 10, (2048,), device="cuda")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    torch.cuda.synchronize()
    seen = []
    for s in range(3):
        proton.start(str(tmp_path / f"s{s}"), backend="cupti", mode="pcsampling")
        with proton.scope("train"):
            for _ in range(20):
                step()
        torch.cuda.synchronize()
        proton.finalize()
        root, _ = load(tmp_path / f"s{s}.hatchet")
        long_kernels, unsampled, total = 0, [], 0
        for path, node in walk(root):
            metrics = node["metrics"]
            if "device_id" not in metrics:
                continue
            samples = samples_below(node)
            total += samples
            if metrics.get("time (ns)", 0) > 200_000:
                long_kernels += 1
                if samples == 0:
                    unsampled.append(path[-1][:60])
        seen.append((s, total, long_kernels, unsampled))
        print(f"session {s}: {total} samples, {long_kernels} kernels over 200 us, unsampled {unsampled}")
    for s, total, long_kernels, unsampled in seen:
        assert total > 0 and long_kernels > 0 and not unsampled, seen
