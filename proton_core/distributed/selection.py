"""Which ranks profile: ``PROTON_RANKS=0,3`` (``--ranks 0,3``; ranges as ``0-3``); the others run unprofiled.

A rank left out starts no session at all (no backend, no hook: nothing to pay).  A process without a
rank (no launcher variables) is always profiled: the list names ranks, and it is none.
"""

from __future__ import annotations

import os

from ..errors import ProtonError
from . import identity

ENV_VAR = "PROTON_RANKS"


def parse(text: str) -> frozenset[int]:
    """``"0,3"`` or ``"0-3,8"`` -> the ranks; a one-line ProtonError for anything else."""
    ranks: set[int] = set()
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        low, dash, high = item.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise ProtonError(f"ranks {text!r}: {item!r} is not a rank or range; give e.g. 0,3 or 0-3") from None
        if first < 0 or last < first:
            raise ProtonError(f"ranks {text!r}: {item!r} is not a rank or range; give e.g. 0,3 or 0-3")
        ranks.update(range(first, last + 1))
    if not ranks:
        raise ProtonError(f"ranks {text!r} names no rank; give e.g. 0,3 or 0-3")
    return frozenset(ranks)


def selected(env=None, ranks=None) -> bool:
    """Whether this process profiles: ``ranks`` (a list such as ``"0,3"`` or ``[0, 3]``) where given, else
    ``PROTON_RANKS``; True where neither is set or this process has no rank."""
    env = os.environ if env is None else env
    if ranks is None:
        text = env.get(ENV_VAR, "").strip()
        if not text:
            return True
        chosen = parse(text)
    elif isinstance(ranks, str):
        chosen = parse(ranks)
    else:
        try:
            chosen = parse(",".join(str(int(r)) for r in ranks))
        except (TypeError, ValueError):
            raise ProtonError(f"ranks must be rank numbers such as [0, 3] or '0,3', not {ranks!r}") from None
    who = identity.from_environment(env)
    return who is None or who.rank in chosen
