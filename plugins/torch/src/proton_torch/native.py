"""The extension, loaded only against the torch it was compiled for.

``setup.py`` records that torch's version in ``_build_info.py`` when it builds the extension; a
different torch (upgraded since) may have another C++ ABI, so :func:`load` refuses in one line
before the library is opened, and ``hook="torch"`` falls back to its Python dispatch mode.
"""

from __future__ import annotations

REINSTALL = ("pip install --no-build-isolation --no-deps --force-reinstall proton-profiler-torch "
             "(in a checkout: the same with -e plugins/torch)")


class NativeUnavailable(Exception):
    """Why the extension cannot be used here, in one line."""


def built_for() -> str | None:
    """The torch version the extension was compiled for; None when it was built without one."""
    try:
        from . import _build_info
    except ImportError:
        raise NativeUnavailable(f"proton-profiler-torch has no build record (_build_info.py); reinstall it: "
                                f"{REINSTALL}") from None
    return _build_info.TORCH_VERSION


def load():
    """The ``_C`` extension module, or :class:`NativeUnavailable` saying why not (one line)."""
    wanted = built_for()
    if wanted is None:
        raise NativeUnavailable("proton-profiler-torch was built without torch, so without its native extension; "
                                f"install torch first, then {REINSTALL}")
    import torch

    found = str(torch.__version__)
    if found != wanted:
        raise NativeUnavailable(f"proton-profiler-torch was built for torch {wanted}, not the installed {found}; "
                                f"rebuild it: {REINSTALL}")
    try:
        from . import _C
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NativeUnavailable(f"proton-profiler-torch's extension does not load ({first}); {REINSTALL}") from None
    return _C
