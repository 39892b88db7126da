"""GPU: a Triton matmul with launch_metadata is renamed and carries 2*M*N*K flops (backend="cupti")."""

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("proton_cupti", reason="proton-profiler-cupti is not installed")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import proton_core as proton  # noqa: E402
from fwtest import find_all, load, names, node  # noqa: E402


def matmul_metadata(grid, metadata, args):
    m, n, k = args["M"], args["N"], args["K"]
    return {"name": f"matmul_{m}x{n}x{k}", "flops16": 2 * m * n * k,
            "bytes": args["a"].element_size() * (m * k + k * n + m * n)}


@triton.jit(launch_metadata=matmul_metadata)
def matmul_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
        y = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def run_matmul(m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    grid = (m // 64, n // 64)
    matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return a, b, c


def test_triton_matmul_renamed_with_flops_and_count(tmp_path):
    M, N, K, launches = 256, 128, 512, 5
    a, b, c = run_matmul(M, N, K)  # compile outside the profile
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=1e-1, rtol=1e-2)
    proton.start(str(tmp_path / "p"), backend="cupti", hook="triton")
    with proton.scope("triton_step"):
        for _ in range(launches):
            matmul_kernel[(M // 64, N // 64)](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        torch.mm(a, b)  # not a Triton launch: keeps its own kernel name
    torch.cuda.synchronize()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    step = node(root, "triton_step")
    renamed = node(step, f"matmul_{M}x{N}x{K}")["metrics"]
    assert renamed["count"] == launches
    assert renamed["flops16"] == launches * 2 * M * N * K
    assert renamed["bytes"] == launches * 2 * (M * K + K * N + M * N)
    assert renamed["time (ns)"] > 0
    assert not find_all(root, lambda n: n == "matmul_kernel"), names(step)  # the raw name is gone
    others = [n for n in names(step) if n != f"matmul_{M}x{N}x{K}"]
    assert others, "torch.mm's kernel should sit beside the renamed Triton kernel"
    for other in others:
        assert "flops16" not in node(step, other)["metrics"]


def test_hook_removed_after_finalize(tmp_path):
    from triton import knobs

    from proton_frameworks.triton_hook import hooks

    enter = hooks()[0]  # what the session installs: the C hook where it is built, else the Python one
    proton.start(str(tmp_path / "p"), backend="cupti", hook="triton")
    hook = knobs.runtime.launch_enter_hook
    assert hook is enter or enter in getattr(hook, "calls", [])
    proton.finalize()
    hook = knobs.runtime.launch_enter_hook
    assert hook is not enter and enter not in getattr(hook, "calls", [])
