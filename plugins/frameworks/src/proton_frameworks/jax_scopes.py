"""``hook="jax"``: XLA kernels filed under their ``jax.named_scope`` path and source line.

JAX records each operation's name scope in the HLO metadata of the compiled
executable (``op_name="jit(f)/scope1/sin"``, plus ``source_file``/
``source_line`` or, in newer XLA, a ``stack_frame_id`` into the module's
stack-frame tables).  XLA on GPU names each kernel after the instruction
(usually a fusion) it runs, with ``.`` and ``-`` turned into ``_``.  So the
mapping is done entirely when the profile is built: :meth:`JaxSource.rewrite`
looks the kernel name up in tables parsed from the executables' HLO and
re-parents the kernel under ``jit(f)/scope1/<file>:<line>``.  Nothing runs
per launch.

Executables get into the tables three ways:

* those JAX already holds when a ``hook="jax"`` session starts (functions
  jitted and called before ``start()``, the usual warm-up): found once per
  session start among the live objects (``MeshExecutable``; a walk of the
  garbage collector's objects, tens of milliseconds in a large program);
* while a ``hook="jax"`` session is open, every executable JAX compiles is
  observed (a wrapper around ``jax._src.compiler.compile_or_get_cached``; if
  a JAX version lacks it, a one-line warning says so);
* explicitly: ``proton_frameworks.jax_scopes.register(jitted, *example_args)``
  (where neither of the above can see an executable).

Kernels with no HLO counterpart (cuBLAS/cuDNN library kernels called through
custom calls, copies) keep the path they were launched under.  A kernel named
like an XLA kernel (a fusion, a wrapped op, an XLA Triton GEMM) that no known
executable has is not left there silently: it goes under ``<jax: no HLO
match>`` below that path, and one line per session says how many names were.  A kernel name
found in several executables with different scopes goes under the scopes
they share.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import threading

from proton_core.plugin_api import ContextSource, ProtonError, SharedInstall, warn

_lock = threading.Lock()
_texts: list[str] = []  # HLO texts observed, parsed lazily at rewrite time
_table: dict[str, set] = {}  # sanitized kernel name -> {(scope elements, source or None)}
_resolved: dict[tuple, tuple] = {}  # (path, kernel) -> (path, kernel)
_modules: dict[str, tuple] = {}  # HLO module name -> its jit element, ("jit(f)",)

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s.*?,?\s*metadata=\{(.*)\}")
_INSTR_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([A-Za-z_][\w.\-]*)\s*(?:\(.*\))?\s*(?:->\s*.*)?\{\s*$")
_CALLS = re.compile(r"\bcalls=(\{[^}]*\}|%?[\w.\-]+)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_SOURCE_FILE = re.compile(r'source_file="((?:[^"\\]|\\.)*)"')
_SOURCE_LINE = re.compile(r"source_line=(\d+)")
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r'^(\d+)\s+(.*)$')
_FIELD = re.compile(r"(\w+)=(\d+)")
_SANITIZE = re.compile(r"[^A-Za-z0-9_]")
#: How XLA on GPU names the kernels it generates (library kernels look otherwise).
_XLA_KERNEL = re.compile(r"(^|_)fusion(_\d+)?$|^(loop|input|wrapped|triton_gemm|triton_softmax)_")
_MODULE = re.compile(r"^\s*HloModule\s+([\w.\-]+)", re.M)
UNPLACED = "<jax: no HLO match>"
_unplaced: set[str] = set()  # XLA-looking kernel names no executable explained, since the last report


def kernel_key(name: str) -> str:
    """XLA's kernel spelling of an instruction name (``loop_add_fusion.1`` -> ``loop_add_fusion_1``)."""
    return _SANITIZE.sub("_", name)


def _source(file: str | None, line) -> str | None:
    if not file or line is None:
        return None
    return f"{os.path.basename(file)}:{line}"


def parse_hlo(text: str) -> dict[str, tuple]:
    """Map kernel names to ``(scope elements, "file:line" or None, other scopes)`` for one HLO module.

    Scope elements are the ``op_name`` components without the last one (the
    primitive, e.g. ``sin``): ``jit(f)/scope1/sin`` -> ``("jit(f)", "scope1")``.
    A fusion is placed by its own metadata (XLA copies its root instruction's
    there), or, where it carries no ``op_name`` (XLA's Triton fusions, such as
    ``triton_softmax``, keep only a scheduling name), by the ROOT instruction of
    the computation it calls; *other scopes* are the named scopes of the
    instructions it fused that are not on that path (XLA fusing ops of
    ``scope1`` and ``scope2`` into one kernel).
    """
    files, locations, frames = {}, {}, {}
    section = None
    computation = None
    instrs = []  # (computation, name, metadata)
    calls: dict[str, list[str]] = {}  # instruction name -> computations it calls
    body: dict[str, list[str]] = {}  # computation -> the metadata of its instructions
    callees: dict[str, list[str]] = {}  # computation -> computations its instructions call
    roots: dict[str, str] = {}  # computation -> its ROOT instruction
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            continue
        if section is not None:
            row = _TABLE_ROW.match(stripped)
            if row:
                key, rest = int(row.group(1)), row.group(2)
                if section == "FileNames":
                    files[key] = rest.strip().strip('"')
                elif section == "FileLocations":
                    locations[key] = dict((k, int(v)) for k, v in _FIELD.findall(rest))
                elif section == "StackFrames":
                    frames[key] = dict((k, int(v)) for k, v in _FIELD.findall(rest))
                continue
            if stripped:
                section = None
        if stripped.endswith("{") and "=" not in stripped.split("(", 1)[0]:
            header = _COMPUTATION.match(line)
            if header:
                computation = header.group(1)
                continue
        if stripped == "}":
            computation = None
            continue
        if computation is not None and stripped.startswith("ROOT "):
            named = _INSTR_NAME.match(line)
            if named:
                roots[computation] = named.group(1)
        called = _CALLS.search(line)
        if called:
            targets = [t.strip().lstrip("%") for t in called.group(1).strip("{}").split(",") if t.strip()]
            named = _INSTR_NAME.match(line)
            if named:
                calls[named.group(1)] = targets
            if computation is not None:
                callees.setdefault(computation, []).extend(targets)
        if "metadata={" in line:
            m = _INSTR.match(line)
            if m:
                instrs.append((computation, m.group(1), m.group(2)))
                if computation is not None:
                    body.setdefault(computation, []).append(m.group(2))

    def elements_of(meta):
        op = _OP_NAME.search(meta)
        if not op or "/" not in op.group(1):
            return None
        return tuple(e for e in op.group(1).split("/")[:-1] if e)

    scope_memo: dict[str, frozenset] = {}

    def scopes_in(comp: str, seen=()) -> frozenset:
        if comp in scope_memo:
            return scope_memo[comp]
        found = {e for e in map(elements_of, body.get(comp, ())) if e}
        for callee in callees.get(comp, ()):
            if callee not in seen:
                found |= scopes_in(callee, seen + (comp,))
        scope_memo[comp] = frozenset(found)
        return scope_memo[comp]

    meta_of = {name: meta for _, name, meta in instrs}

    def root_meta(name: str, seen=()) -> str | None:
        """The metadata of the ROOT instruction (with an op_name) of what instruction ``name`` calls."""
        for callee in calls.get(name, ()):
            root = roots.get(callee)
            if root is None or root in seen:
                continue
            meta = meta_of.get(root)
            if meta is not None and elements_of(meta):
                return meta
            found = root_meta(root, seen + (root,))
            if found is not None:
                return found
        return None

    out = {}
    module = _MODULE.search(text)
    if module and instrs:
        first = next((elements_of(m) for _, _, m in instrs if elements_of(m)), None)
        if first:
            _modules[module.group(1)] = first[:1]  # "jit_f" -> ("jit(f)",)
    placed = [(name, meta) for _, name, meta in instrs]
    placed += [(name, "") for name in calls if name not in meta_of]  # calls, with no metadata at all
    for name, meta in placed:
        elements = elements_of(meta)
        if elements is None:
            meta = root_meta(name)
            if meta is None:
                continue
            elements = elements_of(meta)
        source = None
        frame = _FRAME_ID.search(meta)
        if frame:
            loc = locations.get(frames.get(int(frame.group(1)), {}).get("file_location_id"), {})
            source = _source(files.get(loc.get("file_name_id")), loc.get("line"))
        else:
            sf, sl = _SOURCE_FILE.search(meta), _SOURCE_LINE.search(meta)
            if sf and sl:
                source = _source(sf.group(1), sl.group(1))
        fused = frozenset()
        for callee in calls.get(name, ()):
            fused |= scopes_in(callee)
        others = frozenset(e for e in fused if e != elements and elements[:len(e)] != e)
        out[kernel_key(name)] = (elements, source, others)  # later (entry computation) instructions win
    return out


#: XLA's own NVTX ranges (TSL annotations, pushed when an NVTX tool such as Proton's is injected):
#: the module being run, and per thunk its op name and HLO instruction.
_XLA_ANNOTATIONS = ("TSL::XlaModule:#", "TSL::Thunk:#", "XlaModule:#", "Thunk:#")
_HLO_MODULE = re.compile(r"[#,]hlo_module=([^,#]+)")
_HLO_OP = re.compile(r"[#,]hlo_op=([^,#]+)")
_THUNK_NAME = re.compile(r"#name=(.*?)(?:,hlo_op=|,unique_hlo_op_id=|#$)")


def _strip_xla_ranges(path: tuple) -> tuple:
    """``path`` without XLA's own NVTX ranges, and what they said: (path, module, HLO op, scope
    elements of the thunk's op name or None)."""
    module = op = scope = None
    kept = []
    for element in path:
        if not element.startswith(_XLA_ANNOTATIONS):
            kept.append(element)
            continue
        found = _HLO_MODULE.search(element)
        module = found.group(1) if found else module
        found = _HLO_OP.search(element)
        op = found.group(1) if found else op
        found = _THUNK_NAME.search(element)
        if found and found.group(1):
            parts = tuple(p for p in found.group(1).split("/") if p)
            scope = parts[:-1] if len(parts) > 1 else parts  # without the primitive (dot_general)
    if len(kept) == len(path):
        return path, None, None, None
    return tuple(kept), module, op, scope


def register_hlo_text(text: str) -> None:
    """Add one HLO module's text to the tables (what :func:`register` and the observer do)."""
    with _lock:
        _texts.append(text)
        _resolved.clear()


def _hlo_texts(executable) -> list[str]:
    modules = getattr(executable, "hlo_modules", None)
    if modules is not None:
        return [m.to_string() for m in modules()]
    return [executable.as_text()]


_harvested: set[int] = set()  # hashes of HLO texts already taken from live executables


def harvest_live_executables() -> int:
    """Register the HLO of every executable JAX holds now (compiled before the session); how many were new."""
    new = 0
    for obj in gc.get_objects():
        if type(obj).__name__ != "MeshExecutable":
            continue
        try:
            texts = _hlo_texts(obj.xla_executable)
        except Exception:  # an executable of another shape: observing must never fail a start
            continue
        for text in texts:
            key = hash(text)
            if key not in _harvested:
                _harvested.add(key)
                register_hlo_text(text)
                new += 1
    return new


def register(fn, *args, **kwargs):
    """Compile ``fn`` (a ``jax.jit`` function) for these example arguments and add its HLO.

    Use it for functions JAX compiled before the session started.  Returns
    ``fn`` unchanged.
    """
    if not hasattr(fn, "lower"):
        raise ProtonError(f"register() needs a jax.jit function (with .lower), not {type(fn).__name__}")
    compiled = fn.lower(*args, **kwargs).compile()
    runtime = getattr(compiled, "runtime_executable", None)
    texts = _hlo_texts(runtime()) if runtime is not None else [compiled.as_text()]
    for text in texts:
        register_hlo_text(text)
    return fn


def _tables() -> dict[str, set]:
    with _lock:
        while _texts:
            text = _texts.pop(0)
            module = _MODULE.search(text)
            module = module.group(1) if module else None
            for key, entry in parse_hlo(text).items():
                _table.setdefault(key, set()).add(entry + (module,))  # names repeat across modules
        return _table


def _common(entries) -> tuple:
    """(path elements to file the kernel under, other scopes it fused) for its table entries."""
    if len(entries) == 1:
        elements, source, others = next(iter(entries))[:3]
        return elements + ((source,) if source else ()), others
    lists = [e[0] for e in entries]
    common = []
    for parts in zip(*lists):
        if any(p != parts[0] for p in parts):
            break
        common.append(parts[0])
    common = tuple(common)
    others = frozenset(o for e in entries for o in e[2] if o != common and common[:len(o)] != o)
    return common, others


def fused_label(kernel: str, placed: tuple, others) -> str:
    """``loop_fusion [+scope2, outer/inner]``: the kernel's name with the other scopes it fused,
    each written from where it leaves the path the kernel is filed under."""
    if not others:
        return kernel
    names = []
    for other in sorted(others):
        shared = 0
        while shared < min(len(other), len(placed)) - 1 and other[shared] == placed[shared]:
            shared += 1
        names.append("/".join(other[shared:]))
    return f"{kernel} [+{', '.join(names)}]"


def reset() -> None:
    """Forget every registered executable (tests)."""
    with _lock:
        _texts.clear()
        _table.clear()
        _resolved.clear()
        _harvested.clear()
        _modules.clear()
        _unplaced.clear()


# ------------------------------------------------------------- observer ----
_warned = False


def _observe():
    """Wrap JAX's compile entry point so every executable compiled from now on is registered.

    Returns (compiler module, original, wrapper), or None where this JAX lacks the entry point.
    """
    global _warned
    compiler = importlib.import_module("jax._src.compiler")
    original = getattr(compiler, "compile_or_get_cached", None)
    if original is None:
        if not _warned:
            _warned = True
            warn("this JAX has no compile_or_get_cached; hook='jax' maps only executables "
                 "given to proton_frameworks.jax_scopes.register()")
        return None

    def compile_or_get_cached(*args, **kwargs):
        executable = original(*args, **kwargs)
        try:
            for text in _hlo_texts(executable):
                register_hlo_text(text)
        except Exception:  # observing must never break compilation
            pass
        return executable

    compiler.compile_or_get_cached = compile_or_get_cached
    return compiler, original, compile_or_get_cached


def _unobserve(state) -> None:
    if state is None:
        return
    compiler, original, wrapper = state
    if getattr(compiler, "compile_or_get_cached", None) is wrapper:  # else someone wrapped it after us
        compiler.compile_or_get_cached = original


OBSERVER = SharedInstall(_observe, _unobserve)


class JaxSource(ContextSource):
    """Observes compilation while open; files kernels under their named scopes when the profile is built."""

    name = "jax"

    def install(self, session) -> None:
        try:
            importlib.import_module("jax")
        except ImportError:
            raise ProtonError("hook='jax' needs JAX: pip install jax (jax[cuda12] on NVIDIA GPUs)") from None
        OBSERVER.acquire()
        harvest_live_executables()  # after the observer: nothing compiled in between is missed

    def uninstall(self, session) -> None:
        OBSERVER.release()
        if _unplaced:
            warn(f"session {session.id}: {len(_unplaced)} XLA kernel name(s) matched no known executable "
                 f"(e.g. {sorted(_unplaced)[0]!r}); they are under '{UNPLACED}': register the function with "
                 "proton_frameworks.jax_scopes.register(fn, *args)")
            _unplaced.clear()

    def rewrite(self, path, kernel):
        key = (path, kernel)
        found = _resolved.get(key)
        if found is not None:
            return found
        path, module, op, scope = _strip_xla_ranges(path)
        entries = _tables().get(kernel_key(kernel)) or (_tables().get(kernel_key(op)) if op else None)
        if entries and module is not None:  # XLA said which module runs: its own instruction of that name
            entries = {e for e in entries if e[3] == module} or entries
        if not entries and (scope or (module is not None and _modules.get(module))):
            # A library kernel (cuBLAS, cuDNN) or one XLA named otherwise, launched inside XLA's
            # range for its thunk (op name: jit(f)/proj/dot_general) or at least its module.
            found = (path + (scope or _modules[module]), kernel)
            _resolved[key] = found
            return found
        if entries:
            placed, others = _common(entries)
            # The kernel node says which other named scopes XLA fused into it: in its name, and
            # how many named scopes it spans as a property.
            found = (path + placed, fused_label(kernel, placed, others),
                     [("fused_scopes (pty)", 1 + len(others))] if others else ())
        elif _XLA_KERNEL.search(kernel_key(kernel)):
            found = (path + (UNPLACED,), kernel)
            _unplaced.add(kernel)
        else:
            found = (path, kernel)
        _resolved[key] = found
        return found
