"""GPU: a jitted JAX function's kernels sit under its two named scopes (backend="cupti")."""

import os

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("proton_cupti", reason="proton-profiler-cupti is not installed")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch tests
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import proton_core as proton  # noqa: E402
from fwtest import find_all, load  # noqa: E402


def needs_jax_gpu():
    try:
        gpu = jax.devices("gpu")
    except RuntimeError:
        gpu = []
    if not gpu:
        pytest.skip("this jax has no GPU backend (pip install jax[cuda12])")


def kernels_below(literal):
    if not literal["children"]:
        return [(literal["frame"]["name"], literal["metrics"])]
    return [k for c in literal["children"] for k in kernels_below(c)]


def f(x, y):
    with jax.named_scope("scope1"):
        a = jnp.sin(x).sum(axis=1)
    with jax.named_scope("scope2"):
        b = jnp.exp(a[:, None] * y).sum(axis=0)
    return a, b


def test_named_scopes_over_their_kernels(tmp_path):
    needs_jax_gpu()
    x = jnp.ones((1024, 512), dtype=jnp.float32)
    y = jnp.ones((1024, 512), dtype=jnp.float32)
    proton.start(str(tmp_path / "p"), backend="cupti", hook="jax")
    jitted = jax.jit(f)
    jax.block_until_ready(jitted(x, y))  # compiled inside the session: observed
    for _ in range(3):
        jax.block_until_ready(jitted(x, y))
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    fn = find_all(root, lambda n: n == "jit(f)")
    assert fn, f"no jit(f) node; kernels seen: {[k for k, _ in kernels_below(root)]}"
    scopes = {}
    for _, literal in fn:
        for child in literal["children"]:
            scopes.setdefault(child["frame"]["name"], []).extend(kernels_below(child))
    for scope in ("scope1", "scope2"):
        kernels = scopes.get(scope)
        assert kernels, f"{scope} has no kernels; jit(f) children: {sorted(scopes)}"
        assert sum(m["count"] for _, m in kernels) >= 4 and all(m["time (ns)"] > 0 for _, m in kernels)


def fusion_shapes():
    """Jitted functions of several fusion shapes: (name, function, arguments)."""
    from jax import lax

    def chain(x):  # elementwise ops of two scopes: XLA fuses them into one loop kernel
        with jax.named_scope("scale"):
            y = x * 3.0 + 1.0
        with jax.named_scope("act"):
            return jnp.tanh(y) * jnp.sin(y)

    def reduction(x):
        with jax.named_scope("norm"):
            return x / jnp.sqrt((x * x).sum(axis=-1, keepdims=True) + 1e-6)

    def matmul_epilogue(x, w, b):
        with jax.named_scope("proj"):
            h = x @ w
        with jax.named_scope("epilogue"):
            return jax.nn.gelu(h + b)

    def scan(x):
        def body(carry, row):
            with jax.named_scope("step"):
                carry = jnp.tanh(carry * 0.5 + row)
            return carry, carry.sum()

        with jax.named_scope("loop"):
            return lax.scan(body, jnp.zeros(x.shape[1:]), x)

    def batched(x):
        with jax.named_scope("per_row"):
            return jax.vmap(lambda r: jnp.cumsum(jnp.exp(r)))(x)

    x = jnp.ones((256, 512), dtype=jnp.float32)
    w = jnp.ones((512, 512), dtype=jnp.float32) * 0.01
    b = jnp.ones((512,), dtype=jnp.float32)
    return [
        ("chain", jax.jit(chain), (x,)),
        ("reduction", jax.jit(reduction), (x,)),
        ("matmul_epilogue", jax.jit(matmul_epilogue), (x, w, b)),
        ("scan", jax.jit(scan), (x[:16],)),
        ("batched", jax.jit(batched), (x,)),
        ("reduction", jax.jit(reduction), (jnp.ones((64, 1024), dtype=jnp.float32),)),  # jitted again, other shape
    ]


@pytest.mark.parametrize("warm_before_start", [True, False], ids=["compiled-before-start", "compiled-in-session"])
def test_every_kernel_of_several_fusion_shapes_is_under_its_jit(tmp_path, warm_before_start, capfd):
    needs_jax_gpu()
    cases = fusion_shapes()
    if warm_before_start:  # the usual warm-up: every function compiled and run before profiling
        for _, fn, args in cases:
            jax.block_until_ready(fn(*args))
    proton.start(str(tmp_path / "p"), backend="cupti", hook="jax")
    for case, fn, args in cases:
        with proton.scope(f"call_{case}"):
            for _ in range(3):
                jax.block_until_ready(fn(*args))
    proton.finalize()
    err = capfd.readouterr().err
    root, _ = load(tmp_path / "p.hatchet")
    report = []
    for call in root["children"]:
        if not call["frame"]["name"].startswith("call_"):
            continue
        # Every kernel below the call has a jit(...) on its path (XLA runs while loops as CUDA
        # graphs: those kernels sit under <captured_at>, then the path they were captured at).
        leaves = [(p, n) for p, n in find_all(call, lambda name: True) if not n["children"]]
        stray = [n for p, n in leaves if not any(e.startswith("jit(") for e in p)]
        jits = sorted({e for p, _ in leaves for e in p if e.startswith("jit(")})
        report.append((call["frame"]["name"], jits,
                       [(k["frame"]["name"], k["metrics"].get("count")) for k in stray]))
    print("\n" + "\n".join(f"{c}: jit {j}, not under a jit: {s}" for c, j, s in report))

    def show(literal, depth=0):
        for c in literal["children"]:
            print("  " * depth + f"{c['frame']['name']}  {c['metrics'].get('count', '')}")
            if depth < 5:
                show(c, depth + 1)

    show(root)
    print("stderr:", err[-2000:])
    assert len(report) == 5, report  # call_reduction holds both shapes
    for call, jits, stray in report:
        assert jits, (call, stray)
        assert not stray, f"{call}: kernels not under jit(...): {stray}"
    # A kernel XLA fused from two scopes names the other one (chain: scale and act in one loop kernel).
    fused = find_all(root, lambda n: "[+" in n)
    print("fused kernels:", [p for p, _ in fused])
    assert fused, "no kernel spans two named scopes"
