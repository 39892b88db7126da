"""Drive libtriton's own proton passes while a session runs (DESIGN.md §1, §4): no fork of Triton.

Triton 3.6 compiles ``pl.enter_scope``/``pl.exit_scope`` into records only when three process-wide
switches are set, and nothing else in Triton sets them for us without starting libproton:

1. ``triton.profiler.flags.flags.instrumentation_on``: without it the builtins emit nothing;
2. ``CUDABackend.instrumentation``: an object whose ``patch(stage, pm, ctx)`` adds the proton passes
   at the two places ``make_llir`` calls it (:class:`ProtonPasses`);
3. ``knobs.compilation.instrumentation_mode``: the JIT's only cache key for all of this, set to our
   own prefixed canonical mode so a cubin built with other pass arguments (or by upstream proton) is
   never reused.

:func:`install` sets all three (and fails in one line when another instrumentation owns the slots);
:func:`uninstall` restores exactly what was there. The Triton objects come from a
:class:`~.triton_env.TritonEnv`, so CPU tests can hand in stand-ins.

Granularity: 3.6 compiles ``warp`` only (``granularity must be warp for now``), so we always compile
per warp and fold in the decoder (:mod:`.aggregate`). :func:`native_granularity` says whether a newer
Triton may take it natively; we still compile per warp there until a GPU run shows its layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from proton_core.plugin_api import ProtonError

from .mode import InstrumentationMode

#: The pass helpers our patch calls; a libtriton without any of them cannot instrument.
REQUIRED_PASSES = ("add_convert_proton_to_protongpu", "add_allocate_proton_shared_memory",
                   "add_allocate_proton_global_scratch_buffer", "add_convert_proton_nvidia_gpu_to_llvm",
                   "get_scope_id_names", "get_scope_id_parents", "load_dialects", "create_proton_record")
#: Per-CTA profile scratch alignment we ask the pass for (upstream uses the same; the allocator checks it).
SCRATCH_ALIGN = 128
#: Stages of CUDABackend.make_llir that call ``instrumentation.patch``.
STAGE_TTGIR, STAGE_LLVM = "ttgpuir_to_llvmir", "llvmir_to_llvm"
OWNER = "proton-plugin"


def libtriton_proton():
    """``triton._C.libtriton.proton`` (pure libtriton, not libproton)."""
    from triton._C.libtriton import proton

    return proton


def missing_passes(proton=None) -> list[str]:
    """Names of :data:`REQUIRED_PASSES` this libtriton lacks (empty: usable)."""
    try:
        proton = proton or libtriton_proton()
    except ImportError:
        return list(REQUIRED_PASSES)
    return [name for name in REQUIRED_PASSES if not hasattr(proton, name)]


def native_granularity(proton=None, version: str | None = None) -> bool:
    """Whether this Triton could compile non-warp granularity itself: never on <= 3.6 (observed
    compile error); newer ones only if the enum still has the members. We compile per warp anyway
    (see the module docstring); this is reported, not acted on."""
    version = version or _triton_version()
    try:
        proton = proton or libtriton_proton()
    except ImportError:
        return False
    return _version_tuple(version) > (3, 6) and hasattr(proton, "GRANULARITY") and \
        "WARP_GROUP" in proton.GRANULARITY.__members__


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "0"
    return getattr(triton, "__version__", "0")


def _version_tuple(version: str) -> tuple[int, int]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (2 - len(parts)))  # type: ignore[return-value]


class ProtonPasses:
    """What ``CUDABackend.instrumentation`` holds while a session runs: adds the proton passes.

    ``make_llir`` calls ``load_dialects(ctx)`` when it builds its context and ``patch(stage, pm, ctx)``
    just before the TTGPU->LLVM conversion (:data:`STAGE_TTGIR`) and after the LLVM debug-info pass
    (:data:`STAGE_LLVM`).
    """

    def __init__(self, mode: InstrumentationMode, max_shared_mem: int, proton=None, passes=None):
        self.mode = mode
        self.max_shared_mem = int(max_shared_mem)
        self._proton = proton
        self._passes = passes
        self.owner = OWNER  # how install() recognises its own object

    @property
    def proton(self):
        if self._proton is None:
            self._proton = libtriton_proton()
        return self._proton

    @property
    def passes(self):
        if self._passes is None:
            from triton._C.libtriton import passes

            self._passes = passes
        return self._passes

    def load_dialects(self, ctx) -> None:
        self.proton.load_dialects(ctx)

    def _enum(self, kind: str, value: str):
        return getattr(getattr(self.proton, kind), value.upper())

    def patch(self, stage, pm, ctx) -> None:
        self.load_dialects(ctx)
        m, p = self.mode, self.proton
        if stage == STAGE_TTGIR:
            p.add_convert_proton_to_protongpu(
                pm, self._enum("METRIC_TYPE", m.metric_type), self._enum("SAMPLING_STRATEGY", m.sampling_strategy),
                ",".join(str(w) for w in m.sampling_options), self._enum("GRANULARITY", m.compile_granularity),
                self._enum("BUFFER_STRATEGY", m.buffer_strategy), self._enum("BUFFER_TYPE", m.buffer_type),
                m.buffer_size, self.max_shared_mem, 1, SCRATCH_ALIGN, m.clock_extension)
            self.passes.common.add_cse(pm)
            if "sched_stores" in m.optimizations:
                p.add_schedule_buffer_store(pm)
            p.add_allocate_proton_shared_memory(pm)
        elif stage == STAGE_LLVM:
            p.add_allocate_proton_global_scratch_buffer(pm)
            p.add_convert_proton_nvidia_gpu_to_llvm(pm)


# ----------------------------------------------------------------- the three switches ----
@dataclass
class Saved:
    flag: bool
    instrumentation: object
    mode_key: str


def install(env, passes: ProtonPasses) -> Saved:
    """Set the three switches in ``env`` (a :class:`~.triton_env.TritonEnv`); a one-line ProtonError
    when another instrumentation owns them, with nothing changed."""
    if env.upstream_active():
        raise ProtonError("instrumentation backend cannot start: upstream proton's instrumentation "
                          "(triton.profiler.start(backend='instrumentation')) is active; finalize it first")
    current = getattr(env.cuda_backend, "instrumentation", None)
    if current and getattr(current, "owner", None) != OWNER:
        raise ProtonError(f"instrumentation backend cannot start: CUDABackend.instrumentation is already set "
                          f"({type(current).__name__}, by another tool); remove it first")
    saved = Saved(env.flags.instrumentation_on, current, env.compilation.instrumentation_mode)
    env.flags.instrumentation_on = True
    env.cuda_backend.instrumentation = passes
    env.compilation.instrumentation_mode = passes.mode.cache_key()
    return saved


def uninstall(env, saved: Saved) -> None:
    """Put back what :func:`install` found."""
    env.flags.instrumentation_on = saved.flag
    env.cuda_backend.instrumentation = saved.instrumentation
    env.compilation.instrumentation_mode = saved.mode_key
