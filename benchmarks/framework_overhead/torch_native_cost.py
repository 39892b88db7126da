"""CPU cost of hook="torch", native and Python modes, against no profiler and torch.profiler.

    python3 -m benchmarks.framework_overhead.torch_native_cost [--rounds 25]

Two workloads: 5000 ``a.add(1.0)`` (5 aten records each: dispatch-bound) and 100 steps of a small
MLP training step (117 records, 4 module calls). Configurations run interleaved, round after round,
and the medians are printed. The native mode needs a backend with a native context setter: the
synthetic backend is given the test setter (tests/native/channel.c, built with cc), and the core's
own scopes call a C builtin as their setter, as they call the CUPTI backend's C function. What is
measured is host time only; GPU ratios come from the benchmark matrix (benchmarks/).
"""

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.profiler as tp

import proton_core as proton
from proton_core.testing import NoCompiler, SyntheticBackend, build_library, native_context_capsule, use_synthetic_backend

HERE = os.path.dirname(os.path.abspath(__file__))
CHANNEL = os.path.join(HERE, "..", "..", "plugins", "torch", "tests", "native", "channel.c")


def native_setter(workdir):
    """A capsule (proton.native_context.v1) over plugins/torch/tests/native/channel.c's thread-local context."""
    try:
        lib = build_library(CHANNEL, os.path.join(workdir, "libchannel.so"))
    except NoCompiler as exc:
        raise SystemExit(f"needs a C compiler: {exc}") from None
    return lib, native_context_capsule(lib, "channel_native_context")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--adds", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    workdir = tempfile.mkdtemp()
    lib, capsule = native_setter(workdir)
    use_synthetic_backend()
    SyntheticBackend.native_context = capsule
    SyntheticBackend.context_setter = abs  # a C builtin, as the CUPTI backend's setter is

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)

    def adds(n):
        a = torch.ones(4)
        for _ in range(n):
            a = a.add(1.0)

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    out = os.path.join(workdir, "p")
    configs = [("no profiler", None, {}),
               ("hook='torch', Python mode (host backend)", "host", {"PROTON_TORCH_NATIVE": "0"}),
               ("hook='torch', native", "fake", {"PROTON_TORCH_NATIVE": "1"}),
               ("hook='torch', native, shapes", "fake", {"PROTON_TORCH_NATIVE": "1", "PROTON_TORCH_SHAPES": "1"}),
               ("torch.profiler (CPU activity)", "torch.profiler", {})]
    times = {label: ([], []) for label, _, _ in configs}
    for _ in range(args.rounds):
        for label, backend, env in configs:
            for key in ("PROTON_TORCH_NATIVE", "PROTON_TORCH_SHAPES"):
                os.environ.pop(key, None)
            os.environ.update(env)
            prof = None
            if backend == "torch.profiler":
                prof = tp.profile(activities=[tp.ProfilerActivity.CPU])
                prof.__enter__()
            elif backend is not None:
                proton.start(out, backend=backend, hook="torch")
            adds(200)
            step()
            t0 = time.perf_counter()
            adds(args.adds)
            t1 = time.perf_counter()
            for _ in range(args.steps):
                step()
            t2 = time.perf_counter()
            if prof is not None:
                prof.__exit__(None, None, None)
            elif backend is not None:
                proton.finalize()
            times[label][0].append((t1 - t0) / args.adds)
            times[label][1].append((t2 - t1) / args.steps)
    base_add = statistics.median(times["no profiler"][0])
    base_step = statistics.median(times["no profiler"][1])
    print(f"torch {torch.__version__}, {args.rounds} interleaved rounds, medians")
    print(f"{'configuration':42s} {'us/add':>7s} {'over':>7s} {'x':>5s} {'us/step':>8s} {'over':>7s} {'x':>5s}")
    for label, _, _ in configs:
        a = statistics.median(times[label][0])
        s = statistics.median(times[label][1])
        print(f"{label:42s} {a * 1e6:7.2f} {(a - base_add) * 1e6:+7.2f} {a / base_add:5.2f} "
              f"{s * 1e6:8.1f} {(s - base_step) * 1e6:+7.1f} {s / base_step:5.2f}")


if __name__ == "__main__":
    main()
