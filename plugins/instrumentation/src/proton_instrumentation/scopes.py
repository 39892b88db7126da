"""Check a kernel's scope records in its TTGIR before any of its records are decoded (DESIGN.md §8.3).

Triton 3.6 only *prints* MLIR diagnostics for misused scopes and compiles the kernel anyway, whose
records then pair wrongly. We read the ``proton.record start|end "name"`` ops in program (text)
order, which is the order one warp meets them:

* an end whose scope is not open, a start of a scope that is already open, a scope never closed:
  errors (:class:`ScopeProblems.errors`), the kernel's records are not trusted;
* a name opened again after it was closed (``with pl.scope("a")`` twice): a warning, Triton gives
  both the same scope id, so their cycles add up in one node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RECORD = re.compile(r'proton\.record\s+(start|end)\s+"((?:[^"\\]|\\.)*)"')


@dataclass
class ScopeProblems:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: names in order of first appearance
    names: list[str] = field(default_factory=list)


def records_in(ttgir: str) -> list[tuple[bool, str]]:
    """``[(is_start, name)]`` of the TTGIR's record ops, in text order."""
    return [(kind == "start", name) for kind, name in RECORD.findall(ttgir)]


def check_scopes(ttgir: str, kernel: str) -> ScopeProblems:
    """One line per problem, each naming the kernel and the scope and what to change."""
    out = ScopeProblems()
    stack: list[str] = []
    closed: set[str] = set()
    reused: set[str] = set()
    for is_start, name in records_in(ttgir):
        if name not in out.names:
            out.names.append(name)
        if is_start:
            if name in stack:
                out.errors.append(f"kernel {kernel}: scope {name!r} is entered again while it is open (a scope name "
                                  "used twice, nested); give the inner scope another name")
            elif name in closed and name not in reused:
                reused.add(name)
                out.warnings.append(f"kernel {kernel}: scope name {name!r} is used for two scopes; their cycles are "
                                    "added into one node (give each scope its own name to see them apart)")
            stack.append(name)
            continue
        if name not in stack:
            out.errors.append(f"kernel {kernel}: pl.exit_scope({name!r}) has no matching pl.enter_scope({name!r}) "
                              "before it; add the enter or remove the exit")
            continue
        while stack and stack[-1] != name:
            inner = stack.pop()
            out.errors.append(f"kernel {kernel}: scope {inner!r} is still open when scope {name!r} exits; exit "
                              f"{inner!r} first (scopes must nest)")
        stack.pop()
        closed.add(name)
    for name in stack:
        out.errors.append(f"kernel {kernel}: scope {name!r} is entered but never exited; add "
                          f"pl.exit_scope({name!r}) (or use 'with pl.scope({name!r})')")
    return out
