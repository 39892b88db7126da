"""``proton-view --lines REGEX``: where a kernel spends its samples, line by line.

The tree files instruction samples under each calling context of a kernel
launch (``scope / kernel / file:line``), which is right for "who launched it"
but scatters one kernel's hot line over every context.  This listing adds a
kernel's places up across contexts and sorts them, with the stall reasons that
dominate each and the source text, which is what one reads to fix the kernel.

Places inside a kernel are the table's ``inner`` nodes (frame type
``in_kernel``); a kernel is the nearest ordinary node above them.  Places are
listed by name: mostly ``<file>:<line>`` (with its source text) and
``sass+0x<offset>``; another inner node with a value of its own (a callee's
node, an intra-kernel scope) is listed under its name, the kernel node's own
value as ``(kernel)``.  One pass over the table; each source file is read at
most once.
"""

from __future__ import annotations

import os
import re
from array import array

from .derive import find_raw
from .errors import MissingMetric, ViewerError

#: Names of places inside a kernel that are lines: a source line, or a SASS offset without line info.
LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+)(?:@[^@]*)?$")  # "@<function>": the CUPTI backend's spelling
SASS = re.compile(r"^sass\+0x[0-9a-fA-F]+$")
#: The row of what was filed on the kernel's node itself (an empty sub_path).
KERNEL_ROW = "(kernel)"
STALL_PREFIX = "stall_"
#: CUPTI's "not issued" samples of a reason are a subset of that reason's samples: ranked only
#: when a profile has nothing else, never next to the reason they repeat.
NOT_ISSUED = "_not_issued"
TOP_REASONS = 3
DEFAULT_TOP = 30
SOURCE_WIDTH = 80
#: Source files larger than this are not read (a kernel's source is small; a stray path may not be).
MAX_SOURCE_BYTES = 32 << 20


def is_line(name: str) -> bool:
    return SASS.match(name) is not None or LINE.match(name) is not None


def _reason(key: str) -> str:
    """``stall_long_scoreboard`` (any unit or suffix cut) as ``long_scoreboard``."""
    return key.split("(")[0].strip()[len(STALL_PREFIX):]


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.3f}"


class Sources:
    """Source lines by (file, line), each file read once; a file that cannot be read gives None, never an error."""

    def __init__(self, base_dir: str | None = None) -> None:
        self.base_dir = base_dir
        self.files: dict[str, list[str] | None] = {}

    def _read(self, path: str) -> list[str] | None:
        candidates = [path]
        if self.base_dir and not os.path.isabs(path):
            candidates.append(os.path.join(self.base_dir, path))
        for candidate in candidates:
            try:
                if os.path.isfile(candidate) and os.path.getsize(candidate) <= MAX_SOURCE_BYTES:
                    with open(candidate, encoding="utf-8", errors="replace") as f:
                        return f.read().splitlines()
            except (OSError, ValueError):
                continue
        return None

    def text(self, name: str) -> str:
        """The source text of a ``file:line`` name, blanks collapsed and cut to SOURCE_WIDTH; '' if unknown."""
        m = LINE.match(name)
        if m is None:
            return ""
        path = m["file"]
        lines = self.files.get(path, False)
        if lines is False:
            lines = self.files[path] = self._read(path)
        number = int(m["line"])
        if not lines or not 1 <= number <= len(lines):
            return ""
        text = " ".join(lines[number - 1].split())
        return text if len(text) <= SOURCE_WIDTH else text[:SOURCE_WIDTH - 3] + "..."


class Kernel:
    """One kernel name's places, summed over every context it ran in."""

    __slots__ = ("name", "total", "contexts", "places")

    def __init__(self, name: str) -> None:
        self.name = name
        self.total = 0.0
        self.contexts = 0
        self.places: dict[str, list] = {}  # name -> [value, {stall key: value}]


def collect(table, matches, metric_key: str, stall_keys: list[str]) -> tuple[dict[str, Kernel], list[str]]:
    """Per matching kernel name its :class:`Kernel`; and every kernel name with inner nodes, in tree order.

    One pass in pre-order: an inner node's kernel is its parent's kernel, or its parent."""
    order, parent = table.walk()
    inner, names = table.inner, table.names
    values = table.cols[metric_key]
    stalls = [(key, table.cols[key]) for key in stall_keys]
    owner = array("q", [-1]) * table.size  # an inner node's kernel node; -1: a kernel that does not match
    counted = set()  # kernel nodes whose own value was added
    kernels: dict[str, Kernel] = {}
    seen_names: dict[str, bool] = {}  # every kernel name with inner nodes -> whether it matches
    for i in order:
        if not inner[i]:
            continue
        p = parent[i]
        if p < 0:
            continue
        if inner[p]:
            k = owner[p]
        else:  # i hangs right below its kernel
            name = names[p]
            hit = seen_names.get(name)
            if hit is None:
                hit = seen_names[name] = matches(name)
            k = p if hit else -1
            if hit and p not in counted:
                counted.add(p)
                kernel = kernels.get(name)
                if kernel is None:
                    kernel = kernels[name] = Kernel(name)
                kernel.contexts += 1
                v = values[p]
                if v == v and v:
                    kernel.total += v
                    _add(kernel, KERNEL_ROW, v, stalls, p)
        owner[i] = k
        if k < 0:
            continue
        v = values[i]
        if v != v or not v:
            continue
        kernel = kernels[names[k]]
        kernel.total += v
        _add(kernel, names[i], v, stalls, i)
    return kernels, list(seen_names)


def _add(kernel: Kernel, place: str, value: float, stalls, i: int) -> None:
    entry = kernel.places.get(place)
    if entry is None:
        entry = kernel.places[place] = [0.0, {}]
    entry[0] += value
    reasons = entry[1]
    for key, col in stalls:
        v = col[i]
        if v == v and v:
            reasons[key] = reasons.get(key, 0.0) + v


def top_reasons(reasons: dict, samples: float, limit: int = TOP_REASONS) -> str:
    """``long_scoreboard 62%, wait 20%, ...``: the largest stall reasons, as shares of the line's samples."""
    ranked = {k: v for k, v in reasons.items() if not _reason(k).endswith(NOT_ISSUED)} or reasons
    if not ranked:
        return "-"
    whole = samples if samples > 0 else sum(ranked.values())
    best = sorted(ranked.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return ", ".join(f"{_reason(k)} {100.0 * v / whole:.0f}%" for k, v in best)


def metric_key(table, wanted: str | None) -> str:
    """The raw metric lines are counted in: ``-m``'s first (a raw metric), else ``samples``."""
    keys = table.metric_keys()
    name = wanted or "samples"
    key = find_raw(name, keys)
    if key is None:
        raise MissingMetric(f"--lines counts '{name}' but the profile has only: {', '.join(keys) or 'none'}"
                            + ("" if wanted else "; name another raw metric with -m"), needs=name)
    return key


def listing(table, regex, *, metric: str | None = None, top: int = DEFAULT_TOP, name_of=str,
            base_dir: str | None = None, what: str = "the profile") -> list[str]:
    """The ``--lines`` output: a block per matching kernel name, largest first; ViewerError if none matches."""
    if not any(table.inner):
        raise ViewerError(f"no kernel in {what} has per-line data (record it with mode=\"pcsampling\")")
    key = metric_key(table, metric)
    stall_keys = [k for k in table.metric_keys() if k.startswith(STALL_PREFIX)]
    kernels, with_lines = collect(table, lambda name: regex.search(name) is not None, key, stall_keys)
    if not kernels:
        shown = ", ".join(name_of(n) for n in with_lines[:5]) + (f" (+{len(with_lines) - 5} more)"
                                                                 if len(with_lines) > 5 else "")
        raise ViewerError(f"--lines {regex.pattern!r} matches no kernel with per-line data; kernels that have "
                          f"lines: {shown}")
    sources = Sources(base_dir)
    counts_samples = key.split("(")[0].strip().lower() == "samples"  # else shares of the reasons' own sum
    out: list[str] = []
    label = key.split("(")[0].strip()
    for kernel in sorted(kernels.values(), key=lambda k: (-k.total, k.name)):
        if out:
            out.append("")
        places = sorted(kernel.places.items(), key=lambda kv: (-kv[1][0], kv[0]))
        lines = [name for name in kernel.places if is_line(name)]
        contexts = f"{kernel.contexts} calling context" + ("s" if kernel.contexts != 1 else "")
        count = f"{len(lines)} line" + ("s" if len(lines) != 1 else "")
        out.append(f"kernel {name_of(kernel.name)} — {_number(kernel.total)} {label}, {count}, {contexts}")
        rows = []
        for name, (value, reasons) in places[:top]:
            share = f"{100.0 * value / kernel.total:.1f}%" if kernel.total else "-"
            rows.append((_number(value), share, top_reasons(reasons, value if counts_samples else 0.0),
                         name, sources.text(name)))
        headers = (label, "kernel%", "top stall reasons", "line", "source")
        widths = [max([len(h)] + [len(r[c]) for r in rows]) for c, h in enumerate(headers[:4])]
        fmt = f"{{:>{widths[0]}}}  {{:>{widths[1]}}}  {{:<{widths[2]}}}  {{:<{widths[3]}}}  {{}}"
        out.append(fmt.format(*headers).rstrip())
        out += [fmt.format(*row).rstrip() for row in rows]
        if len(places) > top:
            rest = sum(v for _, (v, _) in places[top:])
            share = f"{100.0 * rest / kernel.total:.1f}%" if kernel.total else "-"
            out.append(f"... {len(places) - top} more ({_number(rest)} {label}, {share}); --lines-top N shows more")
    return out

