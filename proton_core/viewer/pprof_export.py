"""``proton-view --pprof out.pb.gz run.hatchet``: a hatchet file (ours or upstream's) converted to pprof.

The file is converted whole, as written: every metric of every node, text and
properties included (the viewer's own reader keeps numbers only), by the rules
of :mod:`proton_core.formats.pprof`, the ones the ``pprof`` sink writes by.
Several files (a quoted glob of periodic parts, ``--phase N``) go into one
pprof file with the samples of equal paths and labels added up.  A file
carries no start time or duration: its modification time (when the run wrote
it) is the profile's time, with no duration.
"""

from __future__ import annotations

import os
import sys

from ..errors import ProtonError
from ..formats import hatchet, keys, pprof
from ..metrics import COUNT_KEY, DEVICE_ID_KEY, DEVICE_TYPE_KEY, TIME_KEY
from . import files
from .errors import ViewerError

PROG = "proton-view"
#: Options that shape what is printed; a conversion writes the whole file, so they cannot go with it.
CLASHES = (("-l", "list"), ("-m", "metrics"), ("-i", "include"), ("-e", "exclude"), ("-t", "threshold"),
           ("-d", "depth"), ("-diff", "diff_profile"), ("--lines", "lines"), ("--html", "html"),
           ("--speedscope", "speedscope"), ("--print-sorted", "print_sorted"))
KERNEL_KEYS = (TIME_KEY, COUNT_KEY, DEVICE_ID_KEY, DEVICE_TYPE_KEY)


def _kids(literal) -> list:
    kids = literal.get("children") if isinstance(literal, dict) else None
    return [k for k in kids if isinstance(k, dict) and isinstance(k.get("frame"), dict)] if isinstance(kids, list) else []


def _children(item):
    """A node's children, each with the devices its name ran on among its siblings (one node per device)."""
    literal, _ = item
    kids = _kids(literal)
    ran: dict[str, set] = {}
    for kid in kids:
        metrics = kid.get("metrics") if isinstance(kid.get("metrics"), dict) else {}
        if DEVICE_ID_KEY in metrics:
            ran.setdefault(kid["frame"].get("name"), set()).add(_device(metrics))
    return [(kid, ran.get(kid["frame"].get("name"))) for kid in kids]


def _site(item) -> pprof.Site:
    literal, devices = item
    frame = literal.get("frame") if isinstance(literal.get("frame"), dict) else {}
    name = frame.get("name")
    if not isinstance(name, str):
        raise hatchet.HatchetError("a node's frame has no 'name': not a hatchet profile")
    metrics = literal.get("metrics") if isinstance(literal.get("metrics"), dict) else {}
    runs = []
    if DEVICE_ID_KEY in metrics or TIME_KEY in metrics or COUNT_KEY in metrics:
        labels = _device(metrics) if DEVICE_ID_KEY in metrics else ()
        runs.append((labels, _number(metrics.get(TIME_KEY, 0)), _number(metrics.get(COUNT_KEY, 0))))
        metrics = {k: v for k, v in metrics.items() if k not in KERNEL_KEYS}
    return pprof.Site(name, frame.get("type") == hatchet.INNER_TYPE, metrics, runs,
                      devices if runs else None)


def _device(metrics: dict) -> tuple:
    """The device label of a kernel node's metrics (labels as text, whatever type the file gave them)."""
    kind = metrics.get(DEVICE_TYPE_KEY)
    return pprof.device_labels("" if kind is None else str(kind), str(metrics[DEVICE_ID_KEY]))


def _number(value):
    return value if type(value) in (int, float) else 0


def _metric_keys(root: dict) -> list[str]:
    seen: dict[str, None] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        metrics = node.get("metrics")
        if isinstance(metrics, dict):
            for key in metrics:
                seen.setdefault(key, None)
        stack.extend(_kids(node))
    return list(seen)


def _comments(path: str, root: dict) -> list[str]:
    meta = root.get(hatchet.METADATA_KEY)
    words = [f"{k} {v}" for k, v in meta.items() if isinstance(v, str)] if isinstance(meta, dict) else []
    return [f"converted by proton-view from {os.path.basename(path)}" + (f": {', '.join(words)}" if words else "")]


def convert(paths: list[str]) -> tuple[bytes, list[str], int]:
    """The files at ``paths`` as one pprof profile: (gzipped bytes, notes to say, number of samples)."""
    converter = pprof.Converter()
    comments, devices, newest = [], {}, 0
    for path in paths:
        root, found = hatchet.read_document(path)
        if not keys.is_ours(root.get(hatchet.METADATA_KEY)):
            root_metrics = root.get("metrics") if isinstance(root.get("metrics"), dict) else {}
            converter.kinds = keys.upstream_kinds(_metric_keys(root), root_metrics)
        else:
            converter.kinds = {}
        pprof.walk(converter, (root, None), _children, _site)
        comments += _comments(path, root)
        for device_type, ids in found.items() if isinstance(found, dict) else ():
            if isinstance(ids, dict):
                devices.setdefault(device_type, {}).update(ids)
        newest = max(newest, os.stat(path).st_mtime_ns)
    notes = converter.notes()
    lines = comments + pprof.device_comments(devices) + converter.comments + notes
    data = converter.builder.encode(time_nanos=newest, comments=lines, default_type=pprof.KERNEL_TIME[0],
                                    period_type=pprof.KERNEL_TIME, period=1)
    return data, notes, len(converter.builder.samples)


def main(args) -> int:
    """``--pprof``: write the file, print one line saying so; errors are one line and exit status 2."""
    try:
        clash = [flag for flag, attr in CLASHES if getattr(args, attr, None) not in (None, False)]
        if clash:
            raise ViewerError(f"--pprof converts the whole profile; leave out {', '.join(clash)}")
        paths = files.expand(args.profile, args.phase)
        data, notes, count = convert(paths)
        with open(args.pprof, "wb") as f:
            f.write(data)
    except (ViewerError, ProtonError) as exc:  # HatchetError is one; so is a missing protobuf
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: cannot write {exc.filename or args.pprof}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"{PROG}: warning: {note}", file=sys.stderr)
    print(f"{PROG}: wrote {args.pprof} ({count} samples)")
    return 0
