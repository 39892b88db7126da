"""A pytest plugin that makes ``import triton.profiler`` give ``proton_core``, for upstream's own tests.

Loaded with ``-p upstream_alias`` (``scripts/upstream_tests.sh`` puts this folder on ``PYTHONPATH``).
Where Triton is installed (the GPU machine) its ``triton`` package stays and only ``triton.profiler``
and its submodules are replaced; elsewhere a small stand-in ``triton`` package holds what upstream's
CPU tests import from it (``triton._internal_testing``, ``triton.knobs.proton.disable``).

Upstream internals that have no counterpart here (``HookManager``, ``LaunchHook``,
``InstrumentationHook``) are placeholders that fail when used, so the tests that exercise them fail
alone instead of taking their whole file down at import.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

import pytest

#: upstream module name -> ours (the part after ``triton.profiler``)
SUBMODULES = {
    "": "proton_core",
    ".viewer": "proton_core.viewer",
    ".mode": "proton_core.mode",
    ".context": "proton_core.context",
    ".state": "proton_core.state",
    ".scope": "proton_core.scope",
    ".data": "proton_core.data",
}

#: upstream's name of the scope that launch metadata is computed under (its viewer hides it)
METADATA_SCOPE = "__proton_launch_metadata"


class _UpstreamInternal:
    """Stands for an upstream class proton_core has no counterpart of: any use fails, saying so."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} is upstream's internal class; proton_core has none")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)


class _InternalMeta(type):
    def __getattr__(cls, item):
        raise NotImplementedError(f"{cls.__name__}.{item} is upstream's internal API; proton_core has none")


def _internal(name: str) -> type:
    return _InternalMeta(name, (_UpstreamInternal,), {})


class _Lenient(types.ModuleType):
    """Our module under upstream's name; a name upstream has and ours lacks is a function that fails when
    called, so each test that needs it fails alone (``from triton.profiler.viewer import get_raw_metrics``
    would otherwise fail the whole file at collection).

    ``upstream_api``, where given, is our module of upstream's API for this name: its ``__all__`` comes
    first, so that a name both have (``read``) means what it means upstream."""

    def __init__(self, name: str, ours: types.ModuleType, upstream_api: types.ModuleType | None = None) -> None:
        super().__init__(name, ours.__doc__)
        self.__dict__["_ours"] = ours
        self.__dict__["_upstream_api"] = upstream_api
        self.__path__ = getattr(ours, "__path__", [])
        self.__file__ = getattr(ours, "__file__", None)

    def __getattr__(self, item: str):
        ours = self.__dict__["_ours"]
        api = self.__dict__["_upstream_api"]
        if api is not None and item in getattr(api, "__all__", ()):
            return getattr(api, item)
        try:
            return getattr(ours, item)
        except AttributeError:
            if item.startswith("__"):
                raise

            def missing(*args, **kwargs):
                raise NotImplementedError(f"upstream's {self.__name__}.{item}: {ours.__name__} has no {item}")

            missing.__name__ = item
            return missing


#: upstream modules whose missing names become failing functions rather than import errors
LENIENT = (".viewer",)
#: upstream module -> our module of its upstream-shaped API, served before ours under upstream's name
UPSTREAM_API = {".viewer": "proton_core.viewer.upstream_api"}


def _module(name: str, **attrs) -> types.ModuleType:
    path = attrs.pop("__path__", [])  # a package by default, so that submodules resolve through sys.modules
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    if path is not None:
        mod.__path__ = path
    sys.modules[name] = mod
    return mod


class _ProtonKnobs:
    """``triton.knobs.proton``: ``disable`` is ``TRITON_PROTON_DISABLE``, as in Triton."""

    @property
    def disable(self) -> bool:
        return os.environ.get("TRITON_PROTON_DISABLE", "0").strip().lower() in ("1", "true", "on", "yes")

    @disable.setter
    def disable(self, value: bool) -> None:
        os.environ["TRITON_PROTON_DISABLE"] = "1" if value else "0"


def _fresh_knobs_impl():
    """(fresh, reset): knobs whose settings are undone after the test, as Triton's test helper."""
    saved = os.environ.get("TRITON_PROTON_DISABLE")

    def fresh():
        return types.SimpleNamespace(proton=_ProtonKnobs())

    def reset():
        if saved is None:
            os.environ.pop("TRITON_PROTON_DISABLE", None)
        else:
            os.environ["TRITON_PROTON_DISABLE"] = saved

    return fresh, reset


def _stand_in_triton() -> types.ModuleType:
    triton = _module("triton", knobs=types.SimpleNamespace(proton=_ProtonKnobs()))
    testing = _module("triton._internal_testing", is_hip=lambda: False, is_cuda=lambda: False,
                      is_blackwell=lambda: False, is_hopper=lambda: False, _fresh_knobs_impl=_fresh_knobs_impl)
    triton._internal_testing = testing
    return triton


def install() -> None:
    """Put proton_core where ``triton.profiler`` is imported from."""
    if sys.modules.get("triton.profiler") is sys.modules.get("proton_core", False):
        return  # installed already
    if importlib.util.find_spec("triton") is not None:
        triton = importlib.import_module("triton")  # the real one (GPU machine): only the profiler is ours
    else:
        triton = _stand_in_triton()
    for suffix, ours in SUBMODULES.items():
        try:
            module = importlib.import_module(ours)
        except ImportError:  # an older proton_core: the tests that import it fail, the others run
            continue
        if suffix in LENIENT:
            api = None
            if suffix in UPSTREAM_API:
                try:
                    api = importlib.import_module(UPSTREAM_API[suffix])
                except ImportError:  # an older proton_core: its names fail when called, as any missing one
                    api = None
            module = _Lenient("triton.profiler" + suffix, module, api)
        sys.modules["triton.profiler" + suffix] = module
    profiler = sys.modules["triton.profiler"]
    triton.profiler = profiler
    for suffix in LENIENT:  # `import triton.profiler.viewer as v` binds the package's attribute, not sys.modules'
        if "triton.profiler" + suffix in sys.modules:
            setattr(profiler, suffix[1:], sys.modules["triton.profiler" + suffix])
    hook_names = dict(HookManager=_internal("HookManager"), LaunchHook=_internal("LaunchHook"),
                      InstrumentationHook=_internal("InstrumentationHook"),
                      COMPUTE_METADATA_SCOPE_NAME=METADATA_SCOPE)
    try:  # ours: LaunchHook (include/exclude), id, COMPUTE_METADATA_SCOPE_NAME
        launch = importlib.import_module("proton_frameworks.launch_hook")
        hook_names["LaunchHook"] = launch.LaunchHook
    except ImportError:
        launch = None
    hooks = _module("triton.profiler.hooks", **hook_names)
    for sub in ("hook", "launch", "instrumentation"):
        if sub == "launch" and launch is not None:
            sys.modules["triton.profiler.hooks.launch"] = launch
            hooks.launch = launch
            continue
        setattr(hooks, sub, _module(f"triton.profiler.hooks.{sub}", __path__=None, **hook_names))
    _module("triton.profiler.hook", __path__=None, **hook_names)  # the name before hooks/ (Triton 3.3)
    profiler.hooks = hooks  # `import triton.profiler.hooks.launch as x` reads it off the package


install()


@pytest.fixture
def fresh_knobs():
    """Upstream's conftest fixture: Triton's knobs, reset after the test (the stand-in's without Triton)."""
    from triton._internal_testing import _fresh_knobs_impl

    fresh, reset = _fresh_knobs_impl()
    try:
        yield fresh()
    finally:
        reset()


@pytest.fixture
def device():
    """Triton's test suite's device (its --device option, default cuda; torch names HIP devices cuda too)."""
    return "cuda"


def pytest_report_header(config):
    import proton_core
    return f"upstream alias: triton.profiler -> proton_core {proton_core.__version__} ({proton_core.__file__})"
