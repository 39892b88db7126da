"""The Python half of the injection library (``csrc/injection.c``, ``libproton_inject.so``).

``proton-profile`` puts :func:`environment` into the environment of the command it runs; every process
under it that initialises CUDA loads the library (``CUDA_INJECTION64_PATH``), and one without Python
starts the interpreter ``proton-profile`` runs on and calls :func:`boot`.  From there the process is
profiled as a followed Python process is (:mod:`proton_core.follow.child`): the same session, backend,
options and file names.  Decision 0300 says why one profiler and not a native second one.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig

#: The library's file name, next to the ``_cupti`` extension module.
LIBRARY = "libproton_inject.so"
#: What the library reads (set by :func:`environment`).
PYTHON_LIB_VAR = "PROTON_INJECT_PYTHON_LIB"
PYTHONHOME_VAR = "PROTON_INJECT_PYTHONHOME"
SYSPATH_VAR = "PROTON_INJECT_SYSPATH"
NVTX_LIB_VAR = "PROTON_NVTX_LIB"
#: Set while the library starts the interpreter: the start-up hook (sitecustomize) stands aside.
BOOTING_VAR = "PROTON_INJECT_BOOTING"
#: ``--no-follow``: the injected program is profiled, nothing it starts is.
NO_FOLLOW_VAR = "PROTON_INJECT_NO_FOLLOW"
#: The variables only the injected processes need; the library's own names are the driver's and NVTX's.
INJECTION_VARS = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", PYTHON_LIB_VAR, PYTHONHOME_VAR, SYSPATH_VAR,
                  NVTX_LIB_VAR, NO_FOLLOW_VAR)


def library_path() -> str | None:
    """The built injection library, or None where this installation has none."""
    spec = importlib.util.find_spec("proton_cupti._cupti")
    places = [os.path.dirname(spec.origin)] if spec is not None and spec.origin else []
    places.append(os.path.dirname(os.path.abspath(__file__)))
    for place in places:
        path = os.path.join(place, LIBRARY)
        if os.path.isfile(path):
            return os.path.realpath(path)
    return None


def python_library() -> str | None:
    """The shared libpython of this interpreter (an injected process runs the same one), or None."""
    places = [sysconfig.get_config_var("LIBDIR") or "", os.path.join(sys.base_prefix, "lib")]
    for name in (sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")):
        if not name or ".so" not in name:  # a static libpython (.a) cannot be loaded
            continue
        for place in places:
            if os.path.isfile(os.path.join(place, name)):
                return os.path.realpath(os.path.join(place, name))
    return None


def unavailable_reason() -> str | None:
    """Why programs without Python cannot be profiled from this installation, or None."""
    if library_path() is None:
        return f"proton-profiler-cupti was built without {LIBRARY}: reinstall it"
    if python_library() is None:
        return (f"this Python ({sys.executable}) has no shared libpython, which a program without Python needs to "
                "load the profiler: use a Python built with --enable-shared (distribution, conda, uv and pyenv "
                "builds with PYTHON_CONFIGURE_OPTS=--enable-shared have one)")
    return None


def nvtx_library() -> str | None:
    spec = importlib.util.find_spec("proton_nvtx._inject")
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def environment(options: dict) -> dict[str, str]:
    """The variables that make a command's CUDA processes load the profiler ({} where they cannot)."""
    backend = options.get("backend")
    if backend not in (None, "cupti") or unavailable_reason() is not None:
        return {}
    env = {
        "CUDA_INJECTION64_PATH": library_path(),
        PYTHON_LIB_VAR: python_library(),
        PYTHONHOME_VAR: sys.base_prefix,
        SYSPATH_VAR: os.pathsep.join(p for p in sys.path if p),
    }
    nvtx = nvtx_library()
    if nvtx is not None and os.environ.get("PROTON_ENABLE_NVTX", "1").strip().lower() not in ("0", "false", "no", "off"):
        current = os.environ.get("NVTX_INJECTION64_PATH")
        if not current or os.path.realpath(current) in (nvtx, library_path()):
            env["NVTX_INJECTION64_PATH"] = library_path()  # it hands NVTX to the NVTX plugin, in every process
            env[NVTX_LIB_VAR] = nvtx
    if options.get("no_follow"):
        env[NO_FOLLOW_VAR] = "1"
    # Preloaded too, so a program's exec*() writes what it recorded before it becomes another program.
    env["LD_PRELOAD"] = " ".join([library_path(), *without_ours(os.environ.get("LD_PRELOAD", ""))])
    return env


def without_ours(preload: str) -> list[str]:
    """``LD_PRELOAD``'s entries (space or colon separated) other than the injection library."""
    return [p for p in preload.replace(":", " ").split() if os.path.basename(p) != LIBRARY]


_SAID: set[str] = set()


def say_if_foreign_injection() -> None:
    """One line, once per tool, where ``CUDA_INJECTION64_PATH`` names another tool's library than ours: the
    driver loads it into this process beside our cupti session, and two CUPTI clients do not share."""
    other = os.environ.get("CUDA_INJECTION64_PATH", "")
    if not other or os.path.basename(other) == LIBRARY or other in _SAID:
        return
    _SAID.add(other)
    from proton_core.plugin_api import warn

    warn(f"CUDA_INJECTION64_PATH names {other}, another tool: the CUDA driver loads it into this process beside "
              "Proton's cupti session; if it uses CUPTI too, one of the two records nothing (unset it, or profile "
              "with that tool alone)")


def _site_paths() -> None:
    """The launching interpreter's ``sys.path`` (its virtual environment, editable installs' .pth files)."""
    wanted = [p for p in os.environ.get(SYSPATH_VAR, "").split(os.pathsep) if p]
    sys.path[:] = wanted + [p for p in sys.path if p not in wanted]
    for path in wanted:
        if os.path.basename(path) in ("site-packages", "dist-packages"):
            site.addsitedir(path)  # runs the .pth files the import system needs (editable finders)


def boot() -> None:
    """Start this process's session (the library calls this once, in a process without Python)."""
    _site_paths()
    sys.argv = [_program()]
    from proton_core.plugin_api import start_in_program

    follow_children = not os.environ.get(NO_FOLLOW_VAR)
    if not follow_children:  # --no-follow: what this program starts loads nothing of ours
        for var in INJECTION_VARS:
            os.environ.pop(var, None)
        rest = without_ours(os.environ.pop("LD_PRELOAD", ""))
        if rest:
            os.environ["LD_PRELOAD"] = " ".join(rest)
    start_in_program(follow_children)


def _program() -> str:
    try:
        return os.readlink("/proc/self/exe")
    except OSError:
        return "program"


def before_exec() -> None:
    """Write the profile: the program execs another (the files stay claimed: the new program writes beside)."""
    from proton_core.plugin_api import write_open_sessions

    write_open_sessions("exec replaces the process")


def at_exit() -> None:
    """Write the profile: the process ends (exit, return from main, SIGTERM, SIGINT)."""
    import atexit

    atexit._run_exitfuncs()


def state() -> str:
    """What the library did in this process ("not loaded" where it is not in it)."""
    import ctypes

    try:
        lib = ctypes.CDLL(library_path() or LIBRARY, mode=os.RTLD_NOLOAD)
    except OSError:
        return "not loaded"
    fn = lib.proton_inject_state
    fn.restype = ctypes.c_char_p
    return fn().decode()


