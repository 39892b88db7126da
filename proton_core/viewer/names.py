"""Kernel names as people read them: C++ mangled names demangled, long names shortened.

Demangling goes through binutils' ``c++filt`` (maintained, on every Linux
toolchain), all names in one call; where it is absent names stay as they are.
"""

from __future__ import annotations

import re
import shutil
import subprocess

#: Upstream's viewer cuts names longer than this to their first SHORT characters and "...".
SHORT = 100
#: A C++ (Itanium ABI) mangled name, as CUDA and HIP kernels of C++ libraries are named.
MANGLED = re.compile(r"^_Z[\w.$]+$")


def demangle(names) -> dict[str, str]:
    """``{mangled: readable}`` for the mangled ones of ``names``, from one ``c++filt`` run; ``{}`` without it."""
    todo = sorted({n for n in names if MANGLED.match(n)})
    exe = shutil.which("c++filt") if todo else None
    if exe is None:
        return {}
    try:
        proc = subprocess.run([exe], input="\n".join(todo) + "\n", capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = proc.stdout.split("\n")
    if proc.returncode != 0 or len(lines) < len(todo):
        return {}
    return {m: d for m, d in zip(todo, lines) if d and d != m}


def demangle_table(table) -> None:
    """Rename ``table``'s mangled names in place."""
    readable = demangle(set(table.names))
    if readable:
        table.names = [readable.get(n, n) for n in table.names]


def printable(name: str) -> str:
    """``name`` with what a terminal would act on escaped as Python writes it (``\\n``, ``\\r``, ``\\x1b``):
    a newline or an escape sequence in a scope name must not break the tree or recolour the terminal."""
    if name.isprintable():  # the common case, one C-level pass
        return name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def shown(name: str) -> str:
    """How the tree prints a name by default: escaped, then shortened as upstream does."""
    return shorten(printable(name))


def shorten(name: str) -> str:
    """``name``, or its first SHORT characters and "..." as upstream prints long kernel names."""
    return name if len(name) <= SHORT else name[:SHORT] + "..."
