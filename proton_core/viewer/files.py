"""Which files a command line names: paths, quoted globs of part files, ``--phase N``."""

from __future__ import annotations

import glob
import os
import re

from .errors import ViewerError

PART = re.compile(r"\.part_(\d+)(?:\.[^./]*)?$")


def expand(patterns: list[str], phase: int | None = None) -> list[str]:
    """Files named, a quoted glob expanded (part files in phase order); ``phase`` keeps that part alone."""
    files = []
    for pattern in patterns:
        if os.path.exists(pattern) or not glob.has_magic(pattern):
            files.append(pattern)
            continue
        found = glob.glob(pattern)
        if not found:
            raise ViewerError(f"no file matches {pattern!r}")
        files += sorted(found, key=lambda f: (int(PART.search(f)[1]) if PART.search(f) else -1, f))
    if phase is not None:
        files = [f for f in files if (m := PART.search(f)) and int(m[1]) == phase]
        if not files:
            raise ViewerError(f"--phase {phase}: none of the files is a part_{phase} file (name.part_{phase}.hatchet)")
    return files
