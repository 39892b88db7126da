"""Stand-ins for Triton 3.6 and a GPU, enough to drive the instrumentation backend end to end on CPU.

``FakeTriton`` holds the objects :class:`~proton_instrumentation.triton_env.TritonEnv` names (flags,
``CUDABackend``, knobs, hook chains, ``_allocation``) and plays Triton's part of a launch in Triton's
order: load hook on the first launch of a "compiled" kernel, profile allocator, enter hook, the
kernel writing its buffer (a synthetic one from ``instr_buffers``), exit hook. ``FakeDevice`` is
the GPU: byte arrays, copies that complete when told to.
"""

import json
import re
from types import SimpleNamespace

from instr_buffers import block_bytes, launch as synth_launch
from proton_instrumentation.buffers import StagingPool
from proton_instrumentation.triton_env import TritonEnv


class HookChain:
    """Triton 3.6's: ``reversed`` chains (launch exit, kernel load end) call their hooks last added first."""

    def __init__(self, reversed=False):
        self.calls, self.reversed = [], reversed

    def add(self, fn):
        if fn not in self.calls:
            self.calls.append(fn)

    def remove(self, fn):
        if fn in self.calls:
            self.calls.remove(fn)

    def __call__(self, *args):
        for fn in (list(reversed(self.calls)) if self.reversed else list(self.calls)):
            fn(*args)


class NullAllocator:
    def __call__(self, size, alignment, stream):
        raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was set.")


class AllocatorWrapper:
    def __init__(self, allocator):
        self._allocator = allocator

    def get(self):
        return self._allocator

    def set(self, allocator):
        self._allocator = allocator

    def __call__(self, *args):
        return self._allocator(*args)


class Buffer:
    def __init__(self, nbytes):
        self.bytes = bytearray(nbytes)


class Copy:
    def __init__(self, size, staging, nbytes):
        self.size, self.staging, self.nbytes, self.done = size, staging, nbytes, True


class FakeDevice:
    """The GPU: ``hold()`` makes later copies stay incomplete until ``complete()``.

    Arenas are byte arrays at made-up addresses; every device operation (a kernel writing its slot,
    a region's copy, its memset) happens at once, in call order: the order of one stream. A kernel
    may only write a slot that is all zero (else the arena handed out a region that was not zeroed
    since its last use); lost records show in the tests' exact totals. Reading or releasing a copy that has not completed fails the
    test: on a GPU its bytes would not be there yet, or the buffer would be reused under the copy.
    ``ops`` logs ``(op, stream, start, nbytes)`` for copies and memsets."""

    ARENA_STRIDE = 1 << 40

    def __init__(self, sm_clock_khz=2_000_000):
        self.sm_clock_khz = sm_clock_khz
        self.holding = False
        self.copies = []  # every copy made
        self.live = set()  # ids of copies not yet released
        self.regions = {}  # base address -> Buffer of every arena made
        self.arenas_made = 0
        self.zeroed = 0
        self.writes = 0  # kernels that wrote a slot
        self.waits = 0
        self.queries = 0
        self.closed = 0
        self.ops = []
        self.pool = StagingPool(bytearray)
        self.capture = False  # the launching thread's current stream is being captured into a CUDA graph
        self.capturing_streams = set()  # streams being captured (what capturing() answers)
        self.graph_slots = 0

    def capturing_now(self):
        return self.capture

    def capturing(self, stream):
        return stream in self.capturing_streams

    def graph_slot(self, nbytes, stream, device):
        self.graph_slots += 1
        base = self.ARENA_STRIDE * (10_000 + self.graph_slots)
        buffer = self.regions[base] = Buffer(nbytes)
        return buffer, base

    def current(self):
        return 0

    def arena(self, nbytes, stream, device):
        self.arenas_made += 1
        base = self.ARENA_STRIDE * self.arenas_made
        buffer = self.regions[base] = Buffer(nbytes)
        return buffer, base

    def write(self, address, data):
        """A kernel writes its slot at ``address``."""
        base = address - address % self.ARENA_STRIDE
        buffer, off = self.regions[base], address - base
        assert off + len(data) <= len(buffer.bytes), "a slot runs past its arena"
        assert not any(buffer.bytes[off:off + len(data)]), "a kernel got a slot that was not zeroed"
        buffer.bytes[off:off + len(data)] = data
        self.writes += 1

    def copy_region(self, handle, start, nbytes, stream, device):
        size, staging = self.pool.get(nbytes)
        staging[:nbytes] = handle.bytes[start:start + nbytes]
        copy = Copy(size, staging, nbytes)
        copy.done = not self.holding
        self.copies.append(copy)
        self.live.add(id(copy))
        self.ops.append(("copy", stream, start, nbytes))
        return copy

    def zero_region(self, handle, start, nbytes, stream, device):
        handle.bytes[start:start + nbytes] = bytes(nbytes)
        self.zeroed += 1
        self.ops.append(("zero", stream, start, nbytes))

    def ready(self, copy):
        self.queries += 1
        return copy.done

    def wait(self, copy):
        self.waits += 1
        copy.done = True

    def complete(self):
        for c in self.copies:
            c.done = True

    def data(self, copy):
        assert copy.done, "a copy was read before it completed"
        return memoryview(copy.staging)[:copy.nbytes]

    def release(self, copy):
        assert copy.done, "a staging buffer was released while its copy was in flight"
        if copy.staging is not None:
            self.pool.put(copy.size, copy.staging)
            copy.staging = None
            self.live.discard(id(copy))

    def close(self):
        self.closed += 1
        self.pool.clear()

    def properties(self, device):
        return {"sm_clock_khz": self.sm_clock_khz, "max_shared_mem": 232448,
                "info": {"arch": "90", "num_sms": 132, "clock_rate": self.sm_clock_khz, "memory_clock_rate": 0,
                         "bus_width": 0}}


class LazyDict:
    def __init__(self, data):
        self.data, self.extras = data, []

    def get(self):
        return self.data


class Kernel:
    """A kernel "source": its scope records in program order (as TTGIR text) and its warp count."""

    def __init__(self, name, scopes, num_warps=4):
        self.name, self.scopes, self.num_warps = name, scopes, num_warps

    def ttgir(self):
        lines = [f'module attributes {{"ttg.num-warps" = {self.num_warps} : i32}} {{']
        lines += [f'    proton.record {"start" if start else "end"} "{name}" loc(#loc{i})'
                  for i, (start, name) in enumerate(self.scopes)]
        return "\n".join(lines + ["}"])


class Compiled:
    """A loaded kernel: what Triton's CompiledKernel holds for the launcher."""

    def __init__(self, kernel, handle, cta_bytes, mode_key):
        self.kernel, self.function, self.cta_bytes, self.mode_key = kernel, handle, cta_bytes, mode_key
        self.loaded = False


class FakeTriton:
    next_handle = [0]  # shared: handles stay unique across tests, as CUfunction pointers are in a process

    def __init__(self, tmp_path, device=None):
        self.tmp = tmp_path
        self.device = device or FakeDevice()
        self.flags = SimpleNamespace(instrumentation_on=False)
        self.cuda_backend = type("CUDABackend", (), {"instrumentation": None})
        self.compilation = SimpleNamespace(instrumentation_mode="")
        self.runtime = SimpleNamespace(kernel_load_end_hook=HookChain(reversed=True), launch_enter_hook=HookChain(),
                                       launch_exit_hook=HookChain(reversed=True))
        self.null = NullAllocator()
        wrapper = AllocatorWrapper(self.null)
        self.allocation = SimpleNamespace(
            _profile_allocator=wrapper, NullAllocator=NullAllocator,
            set_profile_allocator=lambda a: wrapper.set(a if a is not None else self.null))
        self.env = TritonEnv("3.6.0", self.flags, self.cuda_backend, self.compilation, self.runtime, self.allocation,
                             proton=None)
        self.cache = {}  # (kernel name, mode key) -> Compiled, as the JIT's cache
        self.handles = FakeTriton.next_handle

    # ------------------------------------------------------------ compile ----
    def compile(self, kernel):
        """What the JIT returns for ``kernel`` under the current mode key (compiling it once per key)."""
        key = self.compilation.instrumentation_mode
        found = self.cache.get((kernel.name, key))
        if found is not None:
            return found
        instrumented = self.flags.instrumentation_on and bool(kernel.scopes) and \
            self.cuda_backend.instrumentation is not None
        cta_bytes = size = 0
        if instrumented:
            size = int(re.search(r"buffer_size=(\d+)", key).group(1)) or 256 * kernel.num_warps
            cta_bytes = block_bytes(size, kernel.num_warps)
        self.handles[0] += 1
        compiled = self.cache[(kernel.name, key)] = Compiled(kernel, 0x1000 + self.handles[0], cta_bytes, key)
        compiled.buffer_bytes = size
        return compiled

    def _load(self, compiled):
        if compiled.loaded:
            return
        compiled.loaded = True
        k = compiled.kernel
        folder = self.tmp / f"{k.name}-{compiled.function:x}"
        folder.mkdir()
        (folder / f"{k.name}.json").write_text(json.dumps({
            "name": k.name, "num_warps": k.num_warps, "num_ctas": 1, "profile_scratch_size": compiled.cta_bytes,
            "profile_scratch_align": 128 if compiled.cta_bytes else 1, "instrumentation_mode": compiled.mode_key}))
        (folder / f"{k.name}.ttgir").write_text(k.ttgir() if compiled.cta_bytes else "module {}")
        group = {f"{k.name}.json": str(folder / f"{k.name}.json"), f"{k.name}.ttgir": str(folder / f"{k.name}.ttgir")}
        self.runtime.kernel_load_end_hook(None, compiled.function, k.name, group, "hash")

    # ------------------------------------------------------------- launch ----
    def launch(self, target, ctas, *, stream=7, **kw):
        """Launch ``target`` (a Kernel, compiled now under the current key, or a held Compiled).

        ``ctas``: per CTA {warp: [(scope id, is_end, cycle)]} as ``instr_buffers.launch`` takes them."""
        compiled = self.compile(target) if isinstance(target, Kernel) else target
        self._load(compiled)
        k = compiled.kernel
        address = None
        if compiled.cta_bytes:
            address = self.allocation._profile_allocator(len(ctas) * compiled.cta_bytes, 128, stream)
            assert isinstance(address, int)  # Triton's launcher takes an int as the device address
        meta = LazyDict({"name": k.name, "function": compiled.function, "stream": stream})
        self.runtime.launch_enter_hook(meta)
        if address is not None:
            data = synth_launch(ctas, num_warps=k.num_warps, buffer_bytes=compiled.buffer_bytes, **kw)
            self.device.write(address, data)
        self.runtime.launch_exit_hook(meta)
        return compiled
