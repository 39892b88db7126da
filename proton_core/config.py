"""Where settings come from: ``start()`` > environment > ``[tool.proton]``.

``[tool.proton]`` is read from the nearest ``pyproject.toml`` at or above the
current directory, so a project can pin its backend or defaults once.
"""

from __future__ import annotations

import functools
import os
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from .errors import ProtonError

KEYS = ("backend", "name", "output_format")


@functools.lru_cache(maxsize=8)
def _read(directory: str) -> tuple[str | None, dict]:
    here = directory
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as f:
                    table = tomllib.load(f).get("tool", {}).get("proton", {})
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ProtonError(f"cannot read [tool.proton] from {candidate}: {exc}") from None
            if not isinstance(table, dict):
                raise ProtonError(f"[tool.proton] in {candidate} must be a table")
            unknown = sorted(set(table) - set(KEYS))
            if unknown:
                raise ProtonError(f"[tool.proton] in {candidate} has unknown keys {unknown}: allowed are {list(KEYS)}")
            return candidate, table
        parent = os.path.dirname(here)
        if parent == here:
            return None, {}
        here = parent


def project_defaults() -> dict:
    return _read(os.getcwd())[1]


def choose_backend(requested: str | None) -> tuple[str | None, str]:
    """The backend name and where it came from; (None, 'auto') when unset."""
    if requested:
        return requested, "start(backend=...)"
    env = os.environ.get("PROTON_BACKEND", "").strip()
    if env:
        return env, "PROTON_BACKEND"
    path, table = _read(os.getcwd())
    if table.get("backend"):
        return table["backend"], f"[tool.proton] in {path}"
    return None, "auto"


#: Environment variables that switch profiling off: ours, and Triton's (``triton.knobs.proton.disable``).
DISABLE_VARIABLES = ("PROTON_DISABLE", "TRITON_PROTON_DISABLE")


def _truthy(text: str | None) -> bool:
    return (text or "").strip().lower() in ("1", "true", "yes", "on")


def triton_knob(name: str):
    """``triton.knobs.proton.<name>`` where the program imported Triton (never imported here), else None; a
    Triton whose knobs cannot be read (a partial install) gives None too: our own settings decide."""
    knobs = getattr(getattr(sys.modules.get("triton"), "knobs", None), "proton", None)
    try:
        return getattr(knobs, name, None) if knobs is not None else None
    except Exception:
        return None


def triton_nvtx_off() -> bool:
    """Whether the program set Triton's ``triton.knobs.proton.enable_nvtx`` false: a session started without
    ``nvtx=`` then keeps NVTX ranges out, as upstream's does."""
    value = triton_knob("enable_nvtx")
    return value is not None and not bool(value)


def disabled() -> bool:
    """Whether profiling is switched off: ``PROTON_DISABLE`` or ``TRITON_PROTON_DISABLE`` set to 1/true/yes/on,
    or, where the program imported Triton, ``triton.knobs.proton.disable`` set true.

    Read at each ``start()``: a program (or a test) may switch it between sessions, as with Triton.
    """
    if any(_truthy(os.environ.get(var)) for var in DISABLE_VARIABLES):
        return True
    try:
        return bool(triton_knob("disable"))
    except Exception:  # a knob whose truth cannot be read: our variables decide
        return False
