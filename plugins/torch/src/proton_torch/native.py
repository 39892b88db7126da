"""The extension, loaded only against the torch it was compiled for.

``setup.py`` records that torch's version in ``_build_info.py`` when it builds the extension; a
different torch (upgraded since) may have another C++ ABI, so :func:`load` refuses in one line
before the library is opened, and ``hook="torch"`` falls back to its Python dispatch mode.

A release wheel carries no extension built here but prebuilt observers, one per torch minor version
(``_observers/torch2_13/_C...so``, listed in ``_build_info.PREBUILT``; decision 0232): :func:`load` opens
the one of the installed torch's minor version as ``proton_torch._C``. An extension built here wins.
"""

from __future__ import annotations

import importlib.util
import os
import sys

# The command that compiles the extension against the installed torch (tests/test_packaging.py runs it as
# printed): the sdist (--no-binary: the wheel on the index is the one without it), built beside torch
# (--no-build-isolation: an isolated build has no torch), never a wheel pip cached for an older torch
# (--no-cache-dir). Without isolation the build uses the environment's setuptools, so that comes first:
# a Python 3.10/3.11 venv starts with setuptools 65, older than PEP 639 metadata needs.
REINSTALL = ('pip install --no-build-isolation --upgrade "setuptools>=77" && pip install --no-build-isolation '
             "--no-binary proton-profiler-torch --no-cache-dir --no-deps --force-reinstall proton-profiler-torch "
             "(a C++ compiler is needed; in a checkout: pip install --no-build-isolation -e plugins/torch)")


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


def prebuilt() -> dict:
    """{torch minor version: the torch version its observer was compiled against} of this wheel."""
    from . import _build_info

    return dict(getattr(_build_info, "PREBUILT", {}))


def _load_prebuilt(minor: str):
    """The prebuilt observer of `minor`, imported as ``proton_torch._C`` (its init function is ``PyInit__C``)."""
    if f"{__package__}._C" in sys.modules:  # loaded before
        return sys.modules[f"{__package__}._C"]
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_observers", "torch" + minor.replace(".", "_"))
    names = [n for n in (os.listdir(folder) if os.path.isdir(folder) else ()) if n.startswith("_C.") and n.endswith(".so")]
    if not names:
        raise ImportError(f"no prebuilt observer for torch {minor} in {folder}")
    spec = importlib.util.spec_from_file_location(f"{__package__}._C", os.path.join(folder, names[0]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[spec.name] = module
    setattr(sys.modules[__package__], "_C", module)
    return module


def load():
    """The ``_C`` extension module, or :class:`NativeUnavailable` saying why not (one line)."""
    wanted = built_for()
    if wanted is None and not prebuilt():
        raise NativeUnavailable("proton-profiler-torch was built without torch, so without its native extension; "
                                f"install torch first, then {REINSTALL}")
    import torch

    found = str(torch.__version__)
    minor = ".".join(found.split("+")[0].split(".")[:2])
    if wanted != found and minor in prebuilt():
        try:
            return _load_prebuilt(minor)
        except ImportError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NativeUnavailable(f"proton-profiler-torch's observer for torch {minor} does not load ({first}); "
                                    f"build one for torch {found}: {REINSTALL}") from None
    if wanted is None:
        raise NativeUnavailable(f"proton-profiler-torch has no observer for torch {found} (its wheel has them for "
                                f"torch {', '.join(sorted(prebuilt()))}); build one: {REINSTALL}")
    if found != wanted:
        raise NativeUnavailable(f"proton-profiler-torch was built for torch {wanted}, not the installed {found}; "
                                f"rebuild it: {REINSTALL}")
    try:
        from . import _C
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NativeUnavailable(f"proton-profiler-torch's extension does not load ({first}); {REINSTALL}") from None
    return _C
