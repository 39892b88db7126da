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
    try:
        gpu = jax.devices("gpu")
    except RuntimeError:
        gpu = []
    if not gpu:
        pytest.skip("this jax has no GPU backend (pip install jax[cuda12])")
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
