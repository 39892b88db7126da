"""Hatchet JSON, the file format of Proton and of Triton's upstream Proton: writer and reader.

A file is ``[root, device_info]``.  ``root`` is a hatchet literal node
(``{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}``,
loadable with ``hatchet.GraphFrame.from_literal``) holding each node's own,
exclusive values; a kernel run on several devices is one sibling node per
device, labelled by ``device_id``/``device_type``.  Nodes inside a kernel (source
lines, SASS offsets, intra-kernel scopes, below the kernel's node) have the
frame type ``in_kernel`` instead of ``function``.  ``device_info`` maps
device type to device id to its properties.  The writer's bytes match
upstream's schema; the reader also takes upstream's files, skipping what it
does not understand (extra keys, node types, non-numeric or non-finite
values) and taking a bare root node as ``[root, {}]``.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys

from ..metrics import CLAMPED_KEY, COUNT_KEY, DEVICE_ID_KEY, DEVICE_TYPE_KEY, MAX_VALUE, TIME_KEY
from ..model.read import LABEL_KEYS, ReadNode, ReadProfile
from . import keys
from .errors import HatchetError  # noqa: F401  (raised here, and imported from here by readers)

DROPPED_KEY = "dropped"
UNOBSERVED_KEY = "unobserved (ns)"
UNTIMED_KEY = "untimed"
#: Key of the root literal that says what the file is (session name, context, ...).  Hatchet and
#: upstream's viewer read only ``frame``/``metrics``/``children`` of a node, so it is invisible to them;
#: not in the root's frame (a frame is the node's identity: runs of other names would not diff).
METADATA_KEY = "metadata"

#: Deepest tree (node levels) the reader takes.  Past what ``json``'s C parser
#: allows, the pure-Python parser is used, whose recursion costs no C stack.
#: Writing has no limit: past the C encoder, an iterative encoder writes the same bytes.
MAX_DEPTH = 100000
SEPARATORS = (",", ":")
#: Frame types: host-side frames (scopes, Python frames) and kernels; places inside a kernel.
FUNCTION_TYPE = "function"
INNER_TYPE = "in_kernel"


# ------------------------------------------------------------------ writer ----
def _clamped(metrics: dict) -> dict:
    """``metrics`` with every number a JSON reader can hold (decision 0180).

    Each value was checked at the call, but sums can pass the largest double (two ``1e308``
    are ``inf``; big ints past it crash float readers): such a value is written as
    MAX_VALUE and counted in the node's ``clamped``, so a reader sees it is a lower bound.
    A NaN (no sum of checked values makes one) is left out and counted the same way.
    """
    try:
        if sum(metrics.values()) <= MAX_VALUE:  # the common case in one C-level pass: NaN, inf, huge all fail
            return dict(metrics)
    except (TypeError, OverflowError):  # a value that is no number, or a huge int beside a float: one by one
        pass
    clamped = 0
    out = {}
    for key, value in metrics.items():
        if type(value) is list:  # a list metric: each element as a number
            kept = []
            for item in value:
                if (type(item) is int or type(item) is float) and not -MAX_VALUE <= item <= MAX_VALUE:
                    clamped += 1
                    item = 0 if item != item else (MAX_VALUE if item > 0 else -MAX_VALUE)
                kept.append(item)
            out[key] = kept
            continue
        if (type(value) is int or type(value) is float) and not -MAX_VALUE <= value <= MAX_VALUE:
            clamped += 1
            if value != value:
                continue
            value = MAX_VALUE if value > 0 else -MAX_VALUE
        out[key] = value
    if clamped:
        out[CLAMPED_KEY] = out.get(CLAMPED_KEY, 0) + clamped
    return out


def _literals(node, names: dict | None = None) -> list[dict]:
    """A data-model node as literal nodes: one per device it ran on; the first carries its metrics.

    ``names`` renames metric keys as they go to the file (:func:`keys.file_names`)."""
    runs = sorted(node.kernels.items()) or [None]
    out = []
    for i, run in enumerate(runs):
        metrics = _clamped(node.metrics) if i == 0 else {}
        if names and metrics:
            metrics = {names.get(k, k): v for k, v in metrics.items()}
        if run is not None:
            (device_type, device_id), (time_ns, count) = run
            metrics[TIME_KEY] = time_ns
            metrics[COUNT_KEY] = count
            metrics[DEVICE_ID_KEY] = str(device_id)
            metrics[DEVICE_TYPE_KEY] = device_type
        kind = INNER_TYPE if node.inner else FUNCTION_TYPE
        out.append({"frame": {"name": node.name, "type": kind}, "metrics": metrics, "children": []})
    return out


def literal(tree, names: dict | None = None) -> dict:
    """A :class:`~proton_core.model.Tree`'s root as a hatchet literal node, built iteratively.

    Metric keys are the program's names; ``names`` (:func:`keys.file_names`) renames them."""
    (root,) = _literals(tree.root, names)
    stack = [(tree.root, root["children"])]
    while stack:
        node, out = stack.pop()
        for child in node.children.values():
            lits = _literals(child, names)
            out.extend(lits)
            if child.children:  # a node's children hang under its first device's literal
                stack.append((child, lits[0]["children"]))
    if tree.device_ids:  # upstream marks the root so every reader sees the columns
        root["metrics"].setdefault(COUNT_KEY, 0)
        root["metrics"].setdefault(TIME_KEY, 0)
    return root


def metadata(profile) -> dict:
    """What a profile is, for the root's ``metadata``: session name, context, data kind, backend if known, writer."""
    from .._version import __version__

    out = {"name": profile.name, "context": profile.context, "data": profile.data}
    backend = getattr(profile, "backend", None)  # set by sessions that record it
    if backend:
        out["backend"] = str(backend)
    out["writer"] = f"proton-profiler {__version__}"
    return out


def document(profile, metadata: dict | None = None) -> list:
    """``[root literal, device_info]`` of a :class:`~proton_core.model.Profile`.

    Kernels the backend lost (``profile.dropped``) are the root's ``dropped``
    metric, so a reader of the file sees that the counts are short, and by how much;
    time the backend could not see launches is its ``unobserved (ns)``, kernels
    counted without a duration its ``untimed``.  ``metadata`` (strings) goes
    under the root's ``metadata`` key.

    Metric keys are written as upstream writes them (decision 0210): ``"a (exc)"``
    as ``"a"``, and every inclusive metric on the root; the root's ``metadata``
    records both (:mod:`proton_core.formats.keys`), so our readers read the file
    as the program named its metrics.
    """
    used, odd = metric_keys(profile.tree)
    names = keys.file_names(used)
    root = literal(profile.tree, names)
    marks = keys.root_marks(used - odd, names, root["metrics"])
    for key in marks:
        root["metrics"][key] = 0
    meta = dict(metadata or {})
    if names:
        meta[keys.NAMES_KEY] = {written: key for key, written in sorted(names.items())}
    if marks:
        meta[keys.MARKS_KEY] = marks
    if meta:
        root[METADATA_KEY] = meta
        root["children"] = root.pop("children")  # children last, as the iterative encoder writes them
    if profile.dropped:
        root["metrics"][DROPPED_KEY] = profile.dropped
    if profile.unobserved_ns:
        root["metrics"][UNOBSERVED_KEY] = profile.unobserved_ns
    if profile.untimed:
        root["metrics"][UNTIMED_KEY] = profile.untimed
    return [root, profile.device_info()]


def metric_keys(tree) -> tuple[set, set]:
    """Every metric key a :class:`~proton_core.model.Tree`'s nodes hold (iteratively: trees can be deep), and
    those with a list or text value somewhere (never marked on the root: no viewer sums them)."""
    found: set = set()
    odd: set = set()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        metrics = node.metrics
        if metrics:
            found.update(metrics)
            for key, value in metrics.items():
                if type(value) is list or type(value) is str:
                    odd.add(key)
        stack.extend(node.children.values())
    return found, odd


def write(profile, path: str, metadata: dict | None = None) -> None:
    """Write ``profile`` to ``path`` as compact hatchet JSON (encoded whole, then one write)."""
    doc = document(profile, metadata)
    try:  # allow_nan=False: never NaN or Infinity, which strict JSON readers (JSON.parse) refuse
        text = json.dumps(doc, separators=SEPARATORS, allow_nan=False)
    except RecursionError:  # deeper than the C encoder goes: the same bytes, built without recursion
        text = _dumps_flat(doc, allow_nan=False)
    with open(path, "w") as f:
        f.write(text)


def _dumps_flat(doc: list, allow_nan: bool = True) -> str:
    """``json.dumps(doc, separators=SEPARATORS, allow_nan=...)`` for ``[root literal, devices]`` of any depth."""
    out = ["["]
    stack: list = [doc[0]]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        head = {k: v for k, v in item.items() if k != "children"}
        if "children" not in item:
            out.append(json.dumps(head, separators=SEPARATORS, allow_nan=allow_nan))
            continue
        text = json.dumps(head, separators=SEPARATORS, allow_nan=allow_nan)[:-1]
        out.append(text + ("," if head else "") + '"children":[')
        stack.append("]}")
        children = item["children"]
        for i in range(len(children) - 1, -1, -1):
            stack.append(children[i])
            if i:
                stack.append(",")
    out.append("," + json.dumps(doc[1], separators=SEPARATORS, allow_nan=allow_nan) + "]")
    return "".join(out)


def _loads(text: str, object_hook=None, parse_constant=None):
    """``json.loads``; for documents deeper than the C parser goes, the pure-Python parser with room for MAX_DEPTH.

    The cyclic garbage collector is paused while parsing: a large profile is
    millions of new containers, and the collections they trigger cost more than
    the parse itself while freeing nothing.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        try:
            return json.loads(text, object_hook=object_hook, parse_constant=parse_constant)
        except RecursionError:
            pass
        decoder = json.JSONDecoder(object_hook=object_hook, parse_constant=parse_constant)
        decoder.scan_once = json.scanner.py_make_scanner(decoder)  # Python-level recursion only: no C stack used
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(old + 4 * MAX_DEPTH)  # an object level costs a few Python frames
        try:
            return decoder.decode(text)
        finally:
            sys.setrecursionlimit(old)
    finally:
        if paused:
            gc.enable()


# ------------------------------------------------------------------ reader ----
def read(path) -> ReadProfile:
    """Read a hatchet file (ours or upstream's, JSON or MessagePack) as written, nodes and all;
    HatchetError says why not.  Metric keys are as the program named them (see :func:`read_document`);
    ``kinds`` holds what an upstream file's keys do not say (:func:`proton_core.formats.keys.upstream_kinds`)."""
    root, devices = read_document(path)
    meta = root.get(METADATA_KEY)
    profile = ReadProfile(str(path), _tree(root, str(path)), devices, meta if isinstance(meta, dict) else {})
    if not keys.is_ours(meta):
        profile.kinds = keys.upstream_kinds(profile.metric_keys(), profile.root.metrics)
    return profile


def read_document(path) -> list:
    """The file as ``[root literal, device_info]`` (``{}`` where it has none), nodes unchecked.

    JSON or, where the file is one, MessagePack (``hatchet_msgpack``).  In our
    files, metric keys come back as the program named them (``"a (exc)"``, which
    the file holds as upstream does: ``"a"``) and the root's zeros that mark
    inclusive metrics for upstream's viewer are dropped (decision 0210).
    """
    path = str(path)
    if is_msgpack(path):
        from . import msgpack_io  # here: msgpack loads only for its files

        doc = msgpack_io.load(path)
    else:
        doc = parse(read_text(path), path)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        devices = doc[1] if len(doc) > 1 and isinstance(doc[1], dict) else {}
        return [keys.normalize(doc[0]), devices]
    if isinstance(doc, dict):  # a bare root node
        return [keys.normalize(doc), {}]
    raise not_profile(path, "expected a JSON list [root, device_info]")


#: First bytes of a MessagePack document that is a list or a map (a JSON text starts with '[', '{' or a blank).
MSGPACK_STARTS = frozenset(range(0x80, 0xA0)) | {0xDC, 0xDD, 0xDE, 0xDF}


def is_msgpack(path: str) -> bool:
    """Whether the file at ``path`` is MessagePack (by its first byte; False where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            first = f.read(1)
    except OSError:
        return False
    return bool(first) and first[0] in MSGPACK_STARTS


def read_text(path) -> str:
    """A profile file's text; HatchetError (one line) for a missing, unreadable or binary file."""
    path = str(path)
    if not os.path.exists(path):
        raise HatchetError(f"no such file: {path}")
    if os.path.isdir(path):
        raise HatchetError(f"{path} is a directory: pass a .hatchet profile file")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except OSError as exc:
        raise HatchetError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise HatchetError(f"{path} is not JSON (it is binary): pass a .hatchet profile") from None


def parse(text: str, path: str, object_hook=None, parse_constant=None):
    """JSON of a profile's ``text`` (``object_hook``, ``parse_constant`` as ``json.loads`` takes them);
    HatchetError for bad JSON."""
    try:
        return _loads(text, object_hook, parse_constant)
    except json.JSONDecodeError as exc:
        raise HatchetError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): pass a .hatchet profile"
        ) from None
    except RecursionError:
        raise HatchetError(f"{path} is nested too deeply to read (more than {MAX_DEPTH} levels)") from None


def not_profile(path: str, why: str) -> HatchetError:
    return HatchetError(
        f"{path} is not a Proton profile ({why}): pass a .hatchet file written by proton or Triton's proton"
    )


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _tree(literal: dict, path: str) -> ReadNode:
    """Literal nodes to :class:`~proton_core.model.read.ReadNode`, iteratively; what is not understood is skipped."""

    def make(lit):
        if not isinstance(lit, dict) or not isinstance(lit.get("frame"), dict):
            raise not_profile(path, "a node has no 'frame' object")
        name = lit["frame"].get("name")
        if not isinstance(name, str):
            raise not_profile(path, "a node's frame has no 'name'")
        raw = lit.get("metrics") or {}
        if not isinstance(raw, dict):
            raise not_profile(path, f"node {name!r} has 'metrics' that is not an object")
        metrics = {}
        for key, value in raw.items():
            if key in LABEL_KEYS:
                metrics[key] = str(value)
            elif (number := _number(value)) is not None:
                metrics[key] = number
        children = lit.get("children") or []
        if not isinstance(children, list):
            raise not_profile(path, f"node {name!r} has 'children' that is not a list")
        return ReadNode(name, metrics, inner=lit["frame"].get("type") == INNER_TYPE), children

    root, kids = make(literal)
    stack = [(root, kids)]
    while stack:
        parent, kids = stack.pop()
        for lit in kids:
            node, grand = make(lit)
            parent.children.append(node)
            stack.append((node, grand))
    return root
