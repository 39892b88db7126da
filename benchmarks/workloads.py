"""The measured workloads: each one is deterministic, so every profiler sees the
same kernels, and each ``step`` ends synchronized so wall time covers GPU work.

A workload has ``setup()`` (before the profiler starts: imports, allocation,
compilation and one untimed step, so no compile kernels enter the profile),
``prepare(scope)`` (after start, before warm-up: CUDA-graph capture, which
Proton wants to see), ``step(scope)`` and ``sync()``.  ``scope(name)`` is the
profiler's own annotation (proton.scope, torch record_function, or nothing),
used the way a user would: a few scopes per step, never per launch.
"""

from __future__ import annotations

import time


class Sleep:
    """Dry-run stand-in: no GPU, no frameworks, just time passing."""

    kernels_per_step = 1

    def setup(self):
        pass

    def prepare(self, scope):
        pass

    def step(self, scope):
        with scope("sleep"):
            time.sleep(0.002)

    def sync(self):
        pass


class _Torch:
    def sync(self):
        self.torch.cuda.synchronize()

    def prepare(self, scope):
        pass

    def _init_torch(self):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        self.torch = torch
        torch.cuda.init()


class Launch(_Torch):
    """Launch-bound: 600 one-element torch adds + 500 one-program Triton kernels per step."""

    torch_adds, triton_launches = 600, 500
    kernels_per_step = torch_adds + triton_launches

    def setup(self):
        self._init_torch()
        from benchmarks.triton_kernels import tiny_kernel

        self.tiny = tiny_kernel
        self.a = self.torch.zeros(1, device="cuda")
        self.b = self.torch.zeros(1, device="cuda")
        self.step(_no_scope)

    def step(self, scope):
        a, b, tiny = self.a, self.b, self.tiny
        with scope("launch_loop"):
            for _ in range(self.torch_adds):
                a.add_(1.0)
            for _ in range(self.triton_launches):
                tiny[(1,)](b)
        self.torch.cuda.synchronize()


class MLP(_Torch):
    """A PyTorch training step: 4 Linear layers 1024 wide, batch 256, SGD."""

    kernels_per_step = None

    def setup(self):
        self._init_torch()
        torch = self.torch
        torch.manual_seed(0)
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        self.model = torch.nn.Sequential(*layers[:-1]).cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(256, 1024, device="cuda")
        self.y = torch.randn(256, 1024, device="cuda")
        for _ in range(2):
            self.step(_no_scope)

    def step(self, scope):
        torch = self.torch
        with scope("forward"):
            loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
        with scope("backward"):
            loss.backward()
        with scope("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()


class Decoder(_Torch):
    """A transformers decoder training step: a 4-layer Llama built from a config (hidden 512,
    8 heads, vocabulary 8 192), batch 8 × 256 tokens, bf16, AdamW."""

    kernels_per_step = None

    def setup(self):
        self._init_torch()
        torch = self.torch
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError as exc:
            raise RuntimeError(f"the decoder workload needs transformers ({exc})") from None
        torch.manual_seed(0)
        config = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                             num_key_value_heads=8, vocab_size=8192, max_position_embeddings=512)
        self.model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.ids = torch.randint(0, config.vocab_size, (8, 256), device="cuda")
        for _ in range(2):
            self.step(_no_scope)

    def step(self, scope):
        with scope("forward"):
            loss = self.model(input_ids=self.ids, labels=self.ids).loss
        with scope("backward"):
            loss.backward()
        with scope("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        self.torch.cuda.synchronize()


class Graph(_Torch):
    """CUDA-graph replay: 200 tiny kernels captured once, replayed 10 times per step."""

    captured, replays = 200, 10
    kernels_per_step = captured * replays

    def setup(self):
        self._init_torch()
        torch = self.torch
        self.x = torch.zeros(1024, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream, as torch asks before capture
            for _ in range(2):
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = None

    def _body(self):
        for _ in range(self.captured):
            self.x.add_(1.0)

    def prepare(self, scope):
        torch = self.torch
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            with scope("captured"):
                self._body()
        torch.cuda.synchronize()

    def step(self, scope):
        with scope("replay"):
            for _ in range(self.replays):
                self.graph.replay()
        self.torch.cuda.synchronize()


class TritonLaunch(_Torch):
    """Launch-bound Triton with launch_metadata: 1 000 one-program kernels per step (issue 17's loop).

    What hook="triton" costs per launch against the floor and upstream's hook."""

    launches = 1000
    kernels_per_step = launches

    def setup(self):
        self._init_torch()
        from benchmarks.triton_kernels import tiny_kernel_with_metadata

        self.tiny = tiny_kernel_with_metadata
        self.x = self.torch.zeros(1, device="cuda")
        self.step(_no_scope)

    def step(self, scope):
        x, tiny = self.x, self.tiny
        with scope("launch_loop"):
            for _ in range(self.launches):
                tiny[(1,)](x)
        self.torch.cuda.synchronize()


class TritonMatmul(_Torch):
    """A Triton fp16 matmul (2048^3, fixed tiles, no autotuning) with launch metadata; 20 per step."""

    size, per_step = 2048, 20
    kernels_per_step = per_step

    def setup(self):
        self._init_torch()
        torch = self.torch
        from benchmarks.triton_kernels import matmul

        self.matmul = matmul
        torch.manual_seed(0)
        n = self.size
        self.a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        self.c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        matmul(self.a, self.b, self.c)
        ref = (self.a.float() @ self.b.float())
        err = ((self.c.float() - ref).norm() / ref.norm()).item()
        if not err < 1e-2:
            raise RuntimeError(f"Triton matmul is wrong: relative error {err:.3g}")
        del ref
        self.step(_no_scope)

    def step(self, scope):
        with scope("matmuls"):
            for _ in range(self.per_step):
                self.matmul(self.a, self.b, self.c)
        self.torch.cuda.synchronize()


class Jax(object):
    """A jitted JAX function (matmuls + elementwise under named scopes), chained 10 times per step."""

    chain = 10
    kernels_per_step = None

    def setup(self):
        import jax
        import jax.numpy as jnp

        if not any(d.platform == "gpu" for d in jax.devices()):
            raise RuntimeError(f"JAX has no GPU backend (devices: {jax.devices()})")
        self.jax = jax

        @jax.jit
        def layer(x, w1, w2):
            with jax.named_scope("up"):
                h = jax.nn.gelu(x @ w1)
            with jax.named_scope("down"):
                h = jnp.tanh(h @ w2)
            with jax.named_scope("residual"):
                return x + 0.1 * h

        k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
        self.x = jax.random.normal(k1, (256, 1024), jnp.float32)
        self.w1 = jax.random.normal(k2, (1024, 1024), jnp.float32) * 0.03
        self.w2 = jax.random.normal(k3, (1024, 1024), jnp.float32) * 0.03
        self.layer = layer
        self.step(_no_scope)

    def prepare(self, scope):
        pass

    def step(self, scope):
        y = self.x
        with scope("jax_chain"):
            for _ in range(self.chain):
                y = self.layer(y, self.w1, self.w2)
        y.block_until_ready()

    def sync(self):
        self.jax.effects_barrier()


class _NoScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _no_scope(name):
    return _NoScope()


WORKLOADS = {
    "launch": Launch,
    "mlp": MLP,
    "decoder": Decoder,
    "graph": Graph,
    "triton_matmul": TritonMatmul,
    "triton_launch": TritonLaunch,
    "jax": Jax,
    "sleep": Sleep,
    "nap": Sleep,  # a second dry-run workload: lanes (run.py --gpus) need two to split
}
GPU_WORKLOADS = ["launch", "mlp", "decoder", "graph", "triton_matmul", "triton_launch", "jax"]


def make(name: str):
    try:
        return WORKLOADS[name]()
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None
