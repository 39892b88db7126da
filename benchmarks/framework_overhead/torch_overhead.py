"""Cost of hook="torch" on CPU: aten ops/sec and an MLP step with and without the hook.

    python3 -m benchmarks.framework_overhead.torch_overhead [--iters N]

Uses the host backend (no GPU needed): what is measured is the Python work
per operator (dispatch mode + core scope enter/exit) and per module call.
"""

import argparse
import os
import tempfile
import time

import torch

import proton_core as proton


def small_ops(n):
    a = torch.ones(4)
    for _ in range(n):
        a = a.add(1.0)  # one aten op per iteration, tiny kernel: dispatch-bound
    return a


def mlp_step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()


def timed(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    steps = max(1, args.iters // 50)
    out = os.path.join(tempfile.mkdtemp(), "bench")
    rows = []
    for label, hook in (("no profiler", None), ("session, no hook", ""), ("hook='torch'", "torch")):
        if hook is not None:
            proton.start(out, backend="host", hook=hook or None)
        ops = timed(lambda: small_ops(args.iters), args.reps)
        mlp = timed(lambda: [mlp_step(model, opt, x, y) for _ in range(steps)], args.reps)
        if hook is not None:
            proton.finalize()
        rows.append((label, args.iters / ops, steps / mlp))
    base_ops, base_mlp = rows[0][1], rows[0][2]
    print(f"torch {torch.__version__}, CPU, {args.iters} aten::add ops, {steps} MLP steps (best of {args.reps})")
    print(f"{'config':<20}{'aten ops/s':>14}{'us/op':>9}{'slowdown':>10}{'MLP steps/s':>14}{'slowdown':>10}")
    for label, ops, mlp in rows:
        print(f"{label:<20}{ops:>14,.0f}{1e6 / ops:>9.2f}{base_ops / ops:>9.2f}x{mlp:>14,.1f}{base_mlp / mlp:>9.2f}x")


if __name__ == "__main__":
    main()
