"""What each loaded kernel's records mean, keyed by its CUfunction handle (``kernel_load_end_hook``).

Triton calls the load hook once per ``CompiledKernel``, with the metadata group (``.json``,
``.ttgir``, ...). From it we keep a :class:`KernelInfo`: the kernel's own instrumentation mode (its
``instrumentation_mode`` option, which is our cache key), the per-CTA block size, the warp count and
the scope-id tables, so a launch is decoded with the options it was *compiled* with, whatever the
session asks for now. The table is process-wide and outlives sessions: a kernel the JIT cached under
the same mode key in an earlier session is launched again without being loaded again.

A kernel whose scopes are misused (see :mod:`.scopes`) is kept as invalid and its first load raises
one ProtonError line; its later launches run but are not decoded (counted in ``dropped``).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

from proton_core.plugin_api import ProtonError, warn

from .mode import CACHE_KEY_PREFIX, InstrumentationMode, parse_mode
from .scopes import check_scopes, records_in

_TOTAL_WARPS = re.compile(r'"?ttg\.total-num-warps"?\s*=\s*(\d+)')


@dataclass
class KernelInfo:
    name: str
    #: per-CTA block bytes (metadata ``profile_scratch_size``); 0: the kernel records nothing
    cta_bytes: int = 0
    num_warps: int = 4
    mode: InstrumentationMode | None = None
    names: list = field(default_factory=list)  # [(scope id, name)]
    parents: list = field(default_factory=list)  # [(child id, parent id)]
    #: None: fine; else why its records are not decoded (one line)
    problem: str | None = None

    @property
    def instrumented(self) -> bool:
        return self.cta_bytes > 0 and self.mode is not None and self.problem is None


def mode_from_key(key: str) -> InstrumentationMode | None:
    """Our mode back from a kernel's ``instrumentation_mode`` option (None: not ours)."""
    if not isinstance(key, str) or not key.startswith(CACHE_KEY_PREFIX):
        return None
    parts = [p for p in key[len(CACHE_KEY_PREFIX):].split(":") if not p.endswith("=")]  # empty options
    return parse_mode(":".join(parts))


def text_tables(ttgir: str):
    """Scope tables from the TTGIR text, numbered as libtriton numbers them (first appearance, static
    nesting); used where libtriton is not at hand (CPU tests) and checked against it by the golden test."""
    ids: dict[str, int] = {}
    parents: dict[int, int] = {}
    stack: list[int] = []
    for is_start, name in records_in(ttgir):
        if name not in ids:
            ids[name] = len(ids)
        sid = ids[name]
        if is_start:
            if stack and sid not in parents and stack[-1] != sid:
                parents[sid] = stack[-1]
            stack.append(sid)
        elif sid in stack:
            del stack[stack.index(sid):]
    return [(i, n) for n, i in ids.items()], sorted(parents.items())


class Registry:
    """``function handle -> KernelInfo``, filled by :meth:`on_load`."""

    def __init__(self) -> None:
        self.kernels: dict[int, KernelInfo] = {}
        self.lock = threading.Lock()

    def get(self, function) -> KernelInfo | None:
        return self.kernels.get(function)

    def on_load(self, env, module, function, name, metadata_group, hash=None) -> KernelInfo | None:
        """The load hook's work; raises one ProtonError line for a kernel with misused scopes."""
        if not function:
            return None
        info = self._describe(env, name, metadata_group or {})
        with self.lock:
            self.kernels[function] = info
        if info.problem is not None:
            if info.mode is not None:  # misused scopes: the user must fix the kernel
                raise ProtonError(info.problem)
            warn(info.problem)
        return info

    def _describe(self, env, name, group) -> KernelInfo:
        paths = {key.rsplit(".", 1)[-1]: path for key, path in group.items()}
        meta = {}
        if "json" in paths:
            with open(paths["json"]) as f:
                meta = json.load(f)
        name = meta.get("name", name)
        info = KernelInfo(name=name, cta_bytes=int(meta.get("profile_scratch_size", 0) or 0),
                          num_warps=int(meta.get("num_warps", 4) or 4))
        if not info.cta_bytes:
            return info
        info.mode = mode_from_key(meta.get("instrumentation_mode", ""))
        if info.mode is None:
            info.problem = (f"kernel {name} was instrumented by another tool (instrumentation_mode="
                            f"{meta.get('instrumentation_mode')!r}); its records are not read")
            return info
        ttgir = ""
        if "ttgir" in paths:
            with open(paths["ttgir"]) as f:
                ttgir = f.read()
        found = _TOTAL_WARPS.search(ttgir)
        if found:
            info.num_warps = int(found.group(1))
        checked = check_scopes(ttgir, name)
        for line in checked.warnings:
            warn(line)
        if checked.errors:
            more = f" (+{len(checked.errors) - 1} more)" if len(checked.errors) > 1 else ""
            info.problem = checked.errors[0] + more + "; its records are not read"
            return info
        if env is not None and getattr(env, "proton", None) is not None and "ttgir" in paths:
            info.names, info.parents = env.scope_tables(paths["ttgir"])
        else:
            info.names, info.parents = text_tables(ttgir)
        return info


REGISTRY = Registry()
