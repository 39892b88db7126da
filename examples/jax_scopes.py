"""A jitted JAX function with several named scopes, compiled before the session starts (the usual warm-up).

    python examples/jax_scopes.py jax_scopes
    proton-view -m time/us jax_scopes.hatchet

Its kernels land under ``jit(layer)`` and the named scope of each fusion's root, with no call to register the
function: Proton finds the executables JAX already holds.
"""

import sys

import jax
import jax.numpy as jnp

import proton_core as proton


@jax.jit
def layer(x, w, b):
    with jax.named_scope("project"):
        h = x @ w + b
    with jax.named_scope("activate"):
        h = jax.nn.gelu(h) * jnp.tanh(h)
    with jax.named_scope("normalize"):
        return h / jnp.sqrt((h * h).mean(axis=-1, keepdims=True) + 1e-6)


def main(name: str) -> None:
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (512, 1024))
    w = jax.random.normal(key, (1024, 1024)) / 32.0
    b = jnp.zeros((1024,))
    layer(x, w, b).block_until_ready()  # compiled and run once before the session
    proton.start(name, hook="jax")
    for _ in range(10):
        out = layer(x, w, b)
    out.block_until_ready()
    proton.finalize()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "jax_scopes")
