"""Which files are one distributed run's ranks: ``<name>.rank<k>.<ext>`` and ``<name>.rank<k>.part_<N>.<ext>``.

A rank file says who wrote it in its root's ``metadata["distributed"]``
(rank, world size, run id, host, ...), and a part says ``part`` and
``final``.  Only the head of each file is read here (the metadata comes
before the tree), so a run's files are checked (one run, every rank there,
which ranks stopped early) before any tree is read.  Where the metadata lacks
the rank, the ``rank<k>`` of the file name is taken.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
from dataclasses import dataclass, field

from ..formats.hatchet import METADATA_KEY
from .errors import ViewerError

#: ``name.rank3.hatchet``, ``name.rank3.part_7.hatchet``, ``name.rank3.part_7.hatchet.gz``...
RANK_NAME = re.compile(r"\.rank(\d+)(?:\.part_(\d+))?(?:\.[^./]+)*$")
#: Profiles of a directory or prefix, in order of preference (the sinks' extensions the viewer reads).
VIEWABLE = ("hatchet", "hatchet_msgpack")
#: Bytes read to find a file's metadata: the root's frame, metrics and metadata come before its children.
HEAD_BYTES = 1 << 16
METADATA_AT = re.compile(r'"' + METADATA_KEY + r'"\s*:\s*')
DISTRIBUTED = "distributed"


@dataclass
class RankFile:
    path: str
    rank: int
    part: int | None  # None: a whole file, not a part of periodic flushing
    final: bool | None  # what the file says (None: it does not say)
    info: dict  # metadata["distributed"], {} where absent


@dataclass
class Rank:
    """One rank's files: its whole file(s) and its parts, in part order."""

    rank: int
    files: list[RankFile] = field(default_factory=list)
    phase_only: bool = False  # one phase's part of each rank (--phase): never said to have stopped early

    @property
    def parts(self) -> list[RankFile]:
        return sorted((f for f in self.files if f.part is not None), key=lambda f: f.part)

    @property
    def paths(self) -> list[str]:
        whole = [f.path for f in self.files if f.part is None]
        return whole + [f.path for f in self.parts]

    def stopped_early(self) -> bool:
        """Parts, none of them final, and no whole file: the process was killed before it finished."""
        return not self.phase_only and bool(self.parts) and not any(f.part is None or f.final for f in self.files)


def rank_of_name(path: str) -> tuple[int, int | None] | None:
    """(rank, part or None) from a file name, None where it is no rank file."""
    m = RANK_NAME.search(os.path.basename(path))
    if m is None:
        return None
    return int(m[1]), (int(m[2]) if m[2] is not None else None)


def _profiles(paths: list[str]) -> list[str]:
    """Of a directory's or a prefix's rank files, the profiles the viewer reads: ``.hatchet`` ones, else
    ``.hatchet_msgpack`` ones (a run written by both sinks is not counted twice); traces, pprof files and
    temporary files are left out."""
    for ext in VIEWABLE:
        found = sorted(p for p in paths if p.endswith("." + ext) and os.path.isfile(p) and rank_of_name(p)
                       and not os.path.basename(p).startswith("."))
        if found:
            return found
    return []


def expand(patterns: list[str]) -> list[str] | None:
    """Rank files a command line names: a directory (its rank files), a run prefix (``run`` for
    ``run.rank*``), or files; None where these are not rank files (the caller's usual path)."""
    found: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            inside = _profiles(glob.glob(os.path.join(glob.escape(pattern), "*.rank*")))
            if not inside:
                return None  # the usual path says what a directory is not
            found += inside
        elif not os.path.exists(pattern) and not glob.has_magic(pattern):
            prefixed = _profiles(glob.glob(glob.escape(pattern) + ".rank*"))
            if not prefixed:
                return None  # a missing file: the usual path says so
            found += prefixed
        elif glob.has_magic(pattern):
            matched = sorted(glob.glob(pattern))
            if not matched:
                return None
            found += matched
        else:
            found.append(pattern)
    ranked = [p for p in found if rank_of_name(p)]
    if not ranked:
        return None
    if len(ranked) != len(found):
        others = [p for p in found if not rank_of_name(p)]
        raise ViewerError(f"{others[0]} is no rank file (name.rank<k>.hatchet) but others are: "
                          "merge a run's rank files alone")
    return list(dict.fromkeys(found))


def head_metadata(path: str) -> dict:
    """The root's ``metadata`` object, read from the file's head; {} where it has none there."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as exc:
        raise ViewerError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head[:2] == b"\x1f\x8b":  # gzip: the reader decompresses; the name tells the rank
        return {}
    text = head.decode("utf-8", "replace")
    children = text.find('"children"')
    m = METADATA_AT.search(text, 0, children if children >= 0 else len(text))
    if m is None:
        return {}
    try:
        meta, _ = json.JSONDecoder().raw_decode(text, m.end())
    except ValueError:  # longer than the head, or not JSON: the reader will say
        return {}
    return meta if isinstance(meta, dict) else {}


def describe(path: str) -> RankFile:
    """A rank file's rank, part and final flag: from its metadata, else its name."""
    by_name = rank_of_name(path)
    meta = head_metadata(path)
    info = meta.get(DISTRIBUTED) if isinstance(meta.get(DISTRIBUTED), dict) else {}
    rank = info.get("rank") if type(info.get("rank")) is int else by_name[0]
    part = meta.get("part") if type(meta.get("part")) is int else by_name[1]
    final = meta.get("final") if type(meta.get("final")) is bool else None
    return RankFile(path, rank, part, final, info)


@dataclass
class Run:
    """A distributed run's files, by rank, and what the viewer says of them."""

    ranks: dict[int, Rank]
    world_size: int | None
    run_ids: list[str]
    notes: list[str]  # lines for stderr: missing ranks (ranks that stopped early: see stopped_early_line)


def gather(paths: list[str], force: bool = False) -> Run:
    """Group rank files by rank; refuse files of several runs (unless ``force``); name what is missing."""
    ranks: dict[int, Rank] = {}
    run_ids: dict[str, str] = {}
    sizes: set[int] = set()
    for path in paths:
        rf = describe(path)
        ranks.setdefault(rf.rank, Rank(rf.rank)).files.append(rf)
        run_id = rf.info.get("run_id")
        if isinstance(run_id, str):
            run_ids.setdefault(run_id, path)
        if type(rf.info.get("world_size")) is int:
            sizes.add(rf.info["world_size"])
    if len(run_ids) > 1 and not force:
        (a, pa), (b, pb) = list(run_ids.items())[:2]
        raise ViewerError(f"{pa} (run {a}) and {pb} (run {b}) are of different runs"
                          f"{f' ({len(run_ids)} runs)' if len(run_ids) > 2 else ''}: merge one run's files, "
                          "or pass --force to add them up anyway")
    notes = []
    world = max(sizes) if sizes else None
    if len(sizes) > 1:
        notes.append(f"the files disagree on the world size ({', '.join(map(str, sorted(sizes)))}); taking {world}")
    if world is not None:
        missing = [k for k in range(world) if k not in ranks]
        if missing:
            notes.append(f"rank{'s' if len(missing) > 1 else ''} {_ranges(missing)} of {world} "
                         f"{'are' if len(missing) > 1 else 'is'} missing: merged {len(ranks)} of {world} ranks")
    return Run(dict(sorted(ranks.items())), world, list(run_ids), notes)


def stopped_early_line(rank: Rank, where: str | None = None) -> str:
    last = rank.parts[-1]
    try:
        when = datetime.datetime.fromtimestamp(os.path.getmtime(last.path), datetime.timezone.utc)
        at = when.strftime("%Y-%m-%d %H:%M:%S UTC")
    except OSError:
        at = "an unknown time"
    line = f"rank {rank.rank} stopped early: last part {last.part} written at {at} ({os.path.basename(last.path)})"
    return line + (f", last in {where}" if where else "")


def _ranges(numbers: list[int]) -> str:
    """``1, 3-5, 9``."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)
