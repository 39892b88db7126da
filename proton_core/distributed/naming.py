"""Per-process file names: ``<name>.rank<k>.<ext>`` where a rank is known, ``<name>.pid<P>.<ext>`` for a
followed process without one; single-process runs keep ``<name>.<ext>``.

Periodic parts follow the session's name: ``<name>.rank<k>.part_<N>.<ext>``.
"""

from __future__ import annotations

import re

from . import identity

_RANKED = re.compile(r"\.rank\d+$")
_PID = re.compile(r"\.pid\d+$")


def split(name: str, extension: str) -> tuple[str, str]:
    """(stem, ``.ext`` or "") of a session name that may already end with its extension."""
    suffix = "." + extension
    if extension and name.endswith(suffix) and len(name) > len(suffix):
        return name[: -len(suffix)], suffix
    return name, ""


def with_tag(name: str, extension: str, tag: str) -> str:
    """``name`` with ``.<tag>`` before its extension (``train`` -> ``train.rank3``; ``t.hatchet`` -> ``t.rank3.hatchet``)."""
    stem, suffix = split(name, extension)
    return f"{stem}.{tag}{suffix}"


def is_ranked(name: str, extension: str) -> bool:
    return bool(_RANKED.search(split(name, extension)[0]))


def for_rank(name: str, extension: str, rank: int | None) -> str:
    """The file name of ``rank`` (``name`` itself without a rank, or where it names a rank already); a
    followed process's ``.pid<P>`` gives way to the rank its process group told it later."""
    if rank is None or is_ranked(name, extension):
        return name
    stem, suffix = split(name, extension)
    return with_tag(_PID.sub("", stem) + suffix, extension, f"rank{rank}")


def at_start(name: str, extension: str) -> str:
    """The name a session starting now writes under: ranked where the launcher's variables give a rank."""
    found = identity.from_environment()
    return for_rank(name, extension, None if found is None else found.rank)


def at_write(name: str, extension: str) -> str:
    """The name at write time: a rank known only now (a process group initialised without the variables)
    still gets its own file."""
    found = identity.current()
    return for_rank(name, extension, None if found is None else found.rank)


def for_pid(name: str, extension: str, pid: int) -> str:
    """A followed process without a rank: ``<name>.pid<P>``."""
    return with_tag(name, extension, f"pid{pid}")
