"""Where settings come from: ``start()`` > environment > ``[tool.proton]``.

``[tool.proton]`` is read from the nearest ``pyproject.toml`` at or above the
current directory, so a project can pin its backend or defaults once.
"""

from __future__ import annotations

import functools
import os

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
