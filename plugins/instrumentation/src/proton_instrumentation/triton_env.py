"""The Triton objects the backend touches, looked up in one place (tests hand in stand-ins).

Everything here is Triton's own Python or libtriton; nothing loads or calls libproton:
``triton.profiler`` is never imported by us (its ``__init__`` imports libproton's profile functions).
Its ``flags`` singleton is taken from ``sys.modules`` when the user imported it; otherwise
``flags.py`` is loaded alone under its own module name, ``triton.profiler.flags``, which is then the
very module ``triton.profiler.language`` binds when the user imports it later.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass

from proton_core.plugin_api import BackendUnavailable

from . import compiler_hook

MIN_VERSION = (3, 6)
FLAGS_MODULE = "triton.profiler.flags"


def version_tuple(version: str) -> tuple[int, int]:
    return compiler_hook._version_tuple(version)


def profiler_flags():
    """Triton's ``ProfilerFlags`` singleton, the one ``triton.profiler.language`` reads."""
    module = sys.modules.get(FLAGS_MODULE)
    if module is None:
        spec = importlib.util.find_spec("triton")
        path = os.path.join(list(spec.submodule_search_locations)[0], "profiler", "flags.py")
        if not os.path.exists(path):
            raise BackendUnavailable(f"this Triton has no {path}: the instrumentation backend needs Triton 3.6+")
        file_spec = importlib.util.spec_from_file_location(FLAGS_MODULE, path)
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[FLAGS_MODULE] = module
        try:
            file_spec.loader.exec_module(module)
        except Exception:
            del sys.modules[FLAGS_MODULE]
            raise
    return module.flags


@dataclass
class TritonEnv:
    version: str
    flags: object  # ProfilerFlags: .instrumentation_on
    cuda_backend: type  # CUDABackend: .instrumentation
    compilation: object  # knobs.compilation: .instrumentation_mode
    runtime: object  # knobs.runtime: kernel_load_end_hook, launch_enter_hook, launch_exit_hook
    allocation: object  # triton.runtime._allocation: set_profile_allocator, _profile_allocator, NullAllocator
    proton: object  # triton._C.libtriton.proton (None in tests without Triton)

    def upstream_active(self) -> bool:
        """Whether upstream proton's instrumentation hook is active (it can be only if the user imported it)."""
        hook = sys.modules.get("triton.profiler.hooks.instrumentation")
        cls = getattr(hook, "InstrumentationHook", None)
        return bool(getattr(cls, "active_count", 0))

    def profile_allocator(self):
        return self.allocation._profile_allocator.get()

    def allocator_is_free(self, allocator) -> bool:
        return allocator is None or isinstance(allocator, self.allocation.NullAllocator)

    def scope_tables(self, ttgir_path: str):
        """``(names [(id, name)], parents [(child, parent)])`` from libtriton's scope-id analysis of the
        kernel's TTGIR file (the ids its records carry)."""
        from triton._C.libtriton import ir, nvidia

        ctx = ir.context()
        ir.load_dialects(ctx)
        nvidia.load_dialects(ctx)
        self.proton.load_dialects(ctx)
        module = ir.parse_mlir_module(ttgir_path, ctx)
        module.context = ctx
        return list(self.proton.get_scope_id_names(module)), list(self.proton.get_scope_id_parents(module))


def load() -> TritonEnv:
    """The installed Triton's objects, or BackendUnavailable with a one-line reason."""
    try:
        triton = importlib.import_module("triton")
    except ImportError as exc:
        raise BackendUnavailable(f"Triton is not installed ({exc}); pip install 'triton>=3.6'") from None
    version = getattr(triton, "__version__", "0")
    if version_tuple(version) < MIN_VERSION:
        raise BackendUnavailable(f"triton {version} is too old: the instrumentation backend needs Triton 3.6 or newer")
    try:
        proton = compiler_hook.libtriton_proton()
    except ImportError as exc:
        raise BackendUnavailable(f"triton {version}'s libtriton has no proton passes ({exc})") from None
    missing = compiler_hook.missing_passes(proton)
    if missing:
        raise BackendUnavailable(f"triton {version}'s libtriton lacks {', '.join(missing)}: upgrade Triton")
    knobs = importlib.import_module("triton.knobs")
    return TritonEnv(version=version, flags=profiler_flags(),
                     cuda_backend=importlib.import_module("triton.backends.nvidia.compiler").CUDABackend,
                     compilation=knobs.compilation, runtime=knobs.runtime,
                     allocation=importlib.import_module("triton.runtime._allocation"), proton=proton)
