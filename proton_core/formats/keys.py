"""Metric keys in a file as upstream Proton writes them, and the kind of each key when reading one.

Upstream writes a metric given as ``"a (exc)"`` or ``"a (pty)"`` under ``"a"``:
the kind suffix is cut, and the file says nothing of the kind.  What marks a
metric as inclusive, for upstream's viewer (through hatchet's literal reader),
is the root: a key the root's metrics hold is summed up the tree, any other
key is shown per node.  So (decision 0210):

* the writer cuts the suffix (unless two metrics would then share a key),
  puts every inclusive metric on the root (``0`` where the root has none), and
  records both in the root's ``metadata`` (which hatchet and upstream's viewer
  never read): ``metric_keys`` maps a cut key to the name the program used,
  ``root_marks`` lists the zeros it added;
* a reader of our files restores the names and drops the zeros, so old and new
  files read the same;
* a reader of upstream's files (no such metadata) takes a key the root lacks
  as exclusive (:func:`upstream_kinds`), as upstream's viewer does.
"""

from __future__ import annotations

import re
from collections import Counter

from ..inclusive import is_inclusive
from ..metrics import CLAMPED_KEY, COUNT_KEY, DEVICE_ID_KEY, DEVICE_TYPE_KEY, EXCLUSIVE, TIME_KEY

#: Keys of the root's ``metadata`` this module writes and reads.
NAMES_KEY = "metric_keys"
MARKS_KEY = "root_marks"
#: A kind suffix as upstream cuts it (``"a (exc)"``, ``"bytes (B)(pty)"``).
_SUFFIX = re.compile(r"\s*\((?:exc|pty)\)\s*$")
#: Keys never marked at the root: labels, and counts the writer itself keeps per node.
_UNMARKED = frozenset({DEVICE_ID_KEY, DEVICE_TYPE_KEY, CLAMPED_KEY, TIME_KEY, COUNT_KEY})
#: Keys that label or time a kernel: never taken as exclusive.
_KERNEL_KEYS = frozenset({DEVICE_ID_KEY, DEVICE_TYPE_KEY, TIME_KEY, COUNT_KEY})


#: Our names for metrics upstream's files spell otherwise: written under upstream's key (instruction
#: sampling's sample count is ``num_samples`` there), read back through ``metric_keys`` (decision 0247).
UPSTREAM_SPELLING = {"samples": "num_samples"}


def file_names(keys) -> dict[str, str]:
    """``{key as the program named it: key in the file}`` for the keys whose kind suffix is cut, and those
    upstream spells otherwise (:data:`UPSTREAM_SPELLING`).

    A suffix stays where cutting it would make two metrics one key (``"a"`` and
    ``"a (exc)"`` in one profile, or ``"a (exc)"`` and ``"a (pty)"``); a name stays where upstream's
    spelling is a key of the profile already.
    """
    keys = set(keys)
    cut = {key: _SUFFIX.sub("", key).strip() for key in keys if _SUFFIX.search(key)}
    cut.update((key, UPSTREAM_SPELLING[key]) for key in keys if key in UPSTREAM_SPELLING)
    taken = Counter(cut.values())
    return {key: plain for key, plain in cut.items() if plain and plain not in keys and taken[plain] == 1}


def root_marks(keys, names: dict[str, str], root_metrics: dict) -> list[str]:
    """File keys of inclusive metrics the root lacks: written there as ``0`` so upstream's viewer sums them."""
    marks = []
    for key in sorted(keys):
        if key in _UNMARKED or not is_inclusive(key):
            continue
        written = names.get(key, key)
        if written not in root_metrics:
            marks.append(written)
    return marks


def is_ours(metadata) -> bool:
    """Whether a root's ``metadata`` is Proton's (its keys follow our naming), not absent as upstream's."""
    if not isinstance(metadata, dict):
        return False
    writer = metadata.get("writer")
    return NAMES_KEY in metadata or MARKS_KEY in metadata or (isinstance(writer, str)
                                                              and writer.startswith("proton-profiler"))


def restored_names(metadata) -> dict[str, str]:
    """``{key in the file: name the program used}`` from our metadata (``{}`` for any other file)."""
    names = metadata.get(NAMES_KEY) if isinstance(metadata, dict) else None
    if not isinstance(names, dict):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str)}


def marks(metadata) -> list[str]:
    """The root zeros our writer added (file keys), from our metadata."""
    found = metadata.get(MARKS_KEY) if isinstance(metadata, dict) else None
    return [k for k in found if isinstance(k, str)] if isinstance(found, list) else []


def upstream_kinds(keys, root_keys) -> dict[str, str]:
    """Kinds of an upstream file's keys that their spelling does not tell: a key the root lacks is exclusive.

    Upstream's viewer sums only the columns hatchet finds on the root, so
    these are shown per node, never summed (a property reads the same way).
    A kernel's time and count add up whatever the root says: upstream's
    writer marks them on the root of every file that has kernels, so only
    hand-made files lack the mark.
    """
    root_keys = set(root_keys)
    return {key: EXCLUSIVE for key in keys if key not in root_keys and key not in _KERNEL_KEYS and is_inclusive(key)}


def normalize(root: dict) -> dict:
    """A literal tree of our file, in place, with the program's names back and the root zeros dropped.

    A file of another writer is left as it is.  Iterative: trees can be deep.
    """
    meta = root.get("metadata")
    if not is_ours(meta):
        return root
    names = restored_names(meta)
    metrics = root.get("metrics")
    if isinstance(metrics, dict):
        for key in marks(meta):
            if metrics.get(key) == 0 and type(metrics.get(key)) is not bool:
                del metrics[key]
    if not names:
        return root
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        metrics = node.get("metrics")
        if isinstance(metrics, dict) and any(k in names for k in metrics):
            node["metrics"] = {names.get(k, k): v for k, v in metrics.items()}
        kids = node.get("children")
        if isinstance(kids, list):
            stack.extend(kids)
    return root
