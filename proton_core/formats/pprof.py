"""pprof (gzipped ``profile.proto``): a Proton call tree as samples, for go tool pprof, Parca, Pyroscope, Grafana.

One sample per call path (and per device, stream or stall reason there), the
kernel as the leaf frame.  Sample types follow Parca's GPU vocabulary
(decision 0281): ``gpu_kernel_time``/nanoseconds and ``gpu_kernel_launches``/count
for kernels, ``gpu_pcsample``/count for instruction samples (one sample per
stall reason, labelled ``stall_reason``; the ``_not_issued`` subsets as
``gpu_pcsample_not_issued``/count).  Labels: ``<type>_device`` (``cuda_device``
as Parca spells it) and ``<type>_stream`` where the profile has them.  Every
other numeric metric is a sample type of its own name and unit (``bytes (B)``:
``bytes``/bytes); properties ``(pty)`` and text are labels of the node's samples;
the root's metrics, which have no frame, and the device table are comments; a
list-valued metric, which pprof cannot hold, is left out and said.

Frames: a scope or op is a function of its name; a Python frame
``file:line@function`` is ``function`` in ``file`` at ``line``; a place inside a
kernel is the kernel's function at that source line (``file:line``) or SASS offset
(``sass+0x..``: the location's address).  Names are written as recorded
(mangled C++ names too: pprof and Parca demangle them for display).

Sources are any call tree: :func:`encode` takes its root and two functions
(children, and the :class:`Site` of a node), so sessions' trees
(:mod:`proton_core.sinks.pprof`) and files read by the viewer
(:mod:`proton_core.viewer.pprof_export`) share every rule here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from ..inclusive import kind as metric_kind
from .pprof_builder import Builder

KERNEL_LAUNCHES = ("gpu_kernel_launches", "count")
KERNEL_TIME = ("gpu_kernel_time", "nanoseconds")
PC_SAMPLES = ("gpu_pcsample", "count")
PC_NOT_ISSUED = ("gpu_pcsample_not_issued", "count")
STALL_LABEL = "stall_reason"
SAMPLES_KEY = "samples"
STALL_PREFIX = "stall_"
NOT_ISSUED_SUFFIX = "_not_issued"

#: Metric units as pprof (and Parca, Pyroscope) spell them; any other unit is written as given.
UNITS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds", "B": "bytes",
         "KB": "kilobytes", "MB": "megabytes", "GB": "gigabytes"}
_KEY = re.compile(r"^(?P<base>.*?)\s*(?:\((?P<unit>[^()]*)\))?\s*(?:\((?P<kind>inc|exc|pty)\))?\s*$")
#: Python frames as Proton and upstream spell them: ``file:line@function`` (since 2025), ``file:function@line``.
_FUNC = r"(?P<func>[^\W\d][\w.]*|<[^<>:@/]+>)"
_PY_FRAMES = (re.compile(rf"^(?P<file>.*[^:]):(?P<line>\d+)@{_FUNC}$"),
              re.compile(rf"^(?P<file>.*[^:]):{_FUNC}@(?P<line>\d+)$"))
_SOURCE_LINE = re.compile(r"^(?P<file>.*[^:]):(?P<line>\d+)$")
_SASS = re.compile(r"^sass\+0x(?P<offset>[0-9a-fA-F]+)$")


@dataclass
class Site:
    """One node of a call tree as the writer sees it."""

    name: str
    #: A place inside a kernel (a source line, a SASS offset, an intra-kernel scope), below its kernel.
    inner: bool = False
    #: The node's own values, its kernels' time and count left out (those are ``runs``).
    metrics: dict = field(default_factory=dict)
    #: The kernel's runs: ``[(labels, time_ns, count)]``, labels ``((key, value), ...)`` naming device, stream.
    runs: list = field(default_factory=list)
    #: Device labels of every device the kernel ran on, where ``runs`` does not list them all (a file's
    #: kernel is one node per device, its places inside below the first): places inside are labelled
    #: with the device only where there is one.
    devices: set | None = None


@functools.lru_cache(maxsize=1024)
def device_labels(device_type, device_id) -> tuple:
    """``(("cuda_device", "0"),)``: Parca's key for CUDA, ``<type>_device`` for others, ``device`` untyped."""
    kind = str(device_type or "").strip().lower()
    return ((f"{kind}_device" if kind else "device", str(device_id)),)


@functools.lru_cache(maxsize=4096)
def stream_label(device_type, stream) -> tuple:
    kind = str(device_type or "").strip().lower()
    return (f"{kind}_stream" if kind else "stream", str(stream))


def split_key(key: str) -> tuple[str, str | None]:
    """``("bytes", "B")`` of ``"bytes (B)(exc)"``; ``(key, None)`` where no unit is given."""
    m = _KEY.match(key)
    if not m or not m["base"]:
        return key, None
    unit = m["unit"]
    if unit in ("inc", "exc", "pty") and m["kind"] is None:
        unit = None
    return m["base"], (unit.strip() or None) if unit else None


def pprof_unit(unit: str | None) -> str:
    return UNITS.get(unit, unit) if unit else "count"


class Converter:
    """Walks a call tree into a :class:`Builder`; ``notes`` says what could not be kept as it was."""

    def __init__(self, kinds: dict | None = None) -> None:
        self.builder = Builder()
        self.kinds = kinds or {}
        self.launches = self.builder.sample_type(*KERNEL_LAUNCHES)  # first: pprof's place for a count
        self.time = self.builder.sample_type(*KERNEL_TIME)
        self._types: dict[str, int] = {}
        self.left_out: dict[str, str] = {}
        self.comments: list[str] = []

    # ------------------------------------------------------------- frames ----
    def _location(self, site: Site, kernel: str | None) -> int:
        b, name = self.builder, site.name
        if site.inner:
            m = _SOURCE_LINE.match(name)
            if m:
                return b.location(b.function(kernel or name, m["file"]), line=int(m["line"]))
            m = _SASS.match(name)
            if m:
                return b.location(b.function(kernel or name), address=int(m["offset"], 16))
            return b.location(b.function(name))
        for pattern in _PY_FRAMES:
            m = pattern.match(name)
            if m:
                return b.location(b.function(m["func"], m["file"]), line=int(m["line"]))
        return b.location(b.function(name))

    # -------------------------------------------------------------- values ----
    def _type(self, key: str) -> int:
        index = self._types.get(key)
        if index is None:
            base, unit = split_key(key)
            name, n = base, 1
            while self.builder.has_type(name):  # two metrics of one base name, or a user's "gpu_kernel_time"
                n += 1
                name = key if n == 2 else f"{key} [{n - 1}]"
            index = self._types[key] = self.builder.sample_type(name, pprof_unit(unit))
        return index

    def _label(self, key: str, value):
        base, unit = split_key(key)
        if type(value) is str:
            return (base, value)
        return (base, self.builder.integer(value), pprof_unit(unit) if unit else "")

    def _split_metrics(self, metrics: dict):
        """(values {type index: int}, property labels, pc {key: number}) of a node's metrics."""
        values, labels, pc = {}, [], {}
        for key, value in metrics.items():
            if type(value) is list:
                self.left_out.setdefault(key, "a list of values, which pprof cannot hold")
                continue
            if type(value) not in (int, float, str):
                self.left_out.setdefault(key, f"a {type(value).__name__} value, not a number")
                continue
            if type(value) is str or metric_kind(key, self.kinds) == "pty":
                labels.append(self._label(key, value))
                continue
            if key == SAMPLES_KEY or key.startswith(STALL_PREFIX):
                pc[key] = value
                continue
            values[self._type(key)] = self.builder.integer(value)
        return values, tuple(labels), pc

    def _pc_samples(self, pc: dict, values: dict) -> list[tuple[tuple, dict]]:
        """Instruction samples as ``[(labels, values)]``: one per stall reason where the reasons add up to
        ``samples`` (as the CUPTI plugin writes them), else ``samples`` whole and each reason its own type."""
        b = self.builder
        total = pc.get(SAMPLES_KEY)
        base = {k: v for k, v in pc.items() if k.startswith(STALL_PREFIX) and not k.endswith(NOT_ISSUED_SUFFIX)}
        subsets = {k[: -len(NOT_ISSUED_SUFFIX)]: v for k, v in pc.items()
                   if k.startswith(STALL_PREFIX) and k.endswith(NOT_ISSUED_SUFFIX)}
        if total is None or sum(base.values()) != total or any(k not in base for k in subsets):
            for key, value in pc.items():  # no split that keeps every number: each metric as it is
                index = b.sample_type(*PC_SAMPLES) if key == SAMPLES_KEY else self._type(key)
                values[index] = b.integer(value)
            return []
        samples_index = b.sample_type(*PC_SAMPLES)
        not_issued = b.sample_type(*PC_NOT_ISSUED) if subsets else None
        out = []
        for key, value in base.items():
            row = {samples_index: b.integer(value)}
            if key in subsets:
                row[not_issued] = b.integer(subsets[key])
            out.append((((STALL_LABEL, key[len(STALL_PREFIX):]),), row))
        return out

    # --------------------------------------------------------------- nodes ----
    def root(self, metrics: dict) -> None:
        """The root has no frame: its non-zero metrics (dropped, untimed, ...) become comments."""
        for key, value in metrics.items():
            if type(value) in (int, float) and value == 0:
                continue  # a mark (upstream's root zeros), not a measurement
            self.comments.append(f"ROOT {key}: {value}")

    def node(self, stack: tuple, site: Site, kernel: tuple | None) -> tuple[tuple, tuple | None]:
        """Add ``site``'s samples below ``stack``; returns its stack and the kernel context for its children
        (``(kernel name, device labels or ())`` of the nearest kernel above places inside it)."""
        b = self.builder
        here = stack + (self._location(site, kernel[0] if kernel and site.inner else None),)
        values, props, pc = self._split_metrics(site.metrics)
        runs = site.runs
        if site.inner:
            inherited = kernel[1] if kernel else ()
            context = kernel
        else:
            devices = site.devices if site.devices is not None else {labels[:1] for labels, _, _ in runs}
            inherited = next(iter(devices)) if len(devices) == 1 else ()
            context = (site.name, inherited)  # places inside hang below their kernel, with or without its record
        pc_rows = self._pc_samples(pc, values) if pc else []
        for labels, time_ns, count in runs:
            row = {self.launches: b.integer(count), self.time: b.integer(time_ns)}
            if len(runs) == 1:
                row.update(values)
            b.add(here, row, tuple(labels) + props)
        if (values and len(runs) != 1) or (props and not runs and not pc_rows):  # a zero sample carries props
            b.add(here, values, inherited + props)
        for labels, row in pc_rows:
            b.add(here, row, inherited + labels + props)
        return here, context

    # -------------------------------------------------------------- output ----
    def notes(self) -> list[str]:
        """One line per thing pprof could not hold as it was (said by the caller, and in the file's comments)."""
        out = []
        if self.left_out:
            out.append("left out of the pprof file (no pprof form): "
                       + ", ".join(f"{k} ({why})" for k, why in self.left_out.items()))
        if self.builder.rounded:
            out.append(f"pprof holds integers: {self.builder.rounded} metric values with a fraction were rounded")
        if self.builder.clamped:
            out.append(f"{self.builder.clamped} metric values past pprof's int64 were written as its limit")
        return out


def walk(converter: Converter, root, children, site) -> None:
    """Add every node below ``root`` (pre-order, iterative: trees can be deep)."""
    converter.root(site(root).metrics)
    stack = [(child, (), None) for child in reversed(list(children(root)))]
    while stack:
        node, parent_stack, kernel = stack.pop()
        here, context = converter.node(parent_stack, site(node), kernel)
        stack.extend((child, here, context) for child in reversed(list(children(node))))


def device_comments(devices: dict) -> list[str]:
    """The device table (``{type: {id: {arch, num_sms, ...}}}``) as comment lines."""
    out = []
    for device_type, ids in sorted(devices.items()) if isinstance(devices, dict) else ():
        for device_id, props in sorted(ids.items()) if isinstance(ids, dict) else ():
            text = ", ".join(f"{k}={v}" for k, v in props.items()) if isinstance(props, dict) else str(props)
            out.append(f"device {device_type} {device_id}: {text}")
    return out


def encode(root, children, site, *, kinds: dict | None = None, comments=(), devices: dict | None = None,
           time_nanos: int = 0, duration_nanos: int = 0) -> tuple[bytes, list[str], int]:
    """The tree at ``root`` as gzipped pprof bytes, the notes to say, and the number of samples."""
    converter = Converter(kinds)
    walk(converter, root, children, site)
    notes = converter.notes()
    lines = list(comments) + device_comments(devices or {}) + converter.comments + notes
    data = converter.builder.encode(time_nanos=time_nanos, duration_nanos=duration_nanos, comments=lines,
                                    default_type=KERNEL_TIME[0], period_type=KERNEL_TIME, period=1)
    return data, notes, len(converter.builder.samples)
