"""Builds proton_torch._C against the torch installed in this environment, or, for a release, prebuilt
observers against the headers of several torch versions.

Metadata is in pyproject.toml; this file only adds the extension. Install after torch, with
``pip install --no-build-isolation`` (an isolated build environment has no torch). Without an
importable torch the package is built without its extension: ``hook="torch"`` then says, once,
that it uses the Python dispatch mode and how to build the extension.

``PROTON_TORCH_PREBUILT="2.13=DIR 2.14=DIR"`` (scripts/build_wheels.sh) builds instead one observer per torch
minor version, ``proton_torch/_observers/torch2_13/_C...so``, each from DIR: the ``include`` and ``lib``
folders and ``version.json`` that scripts/wheel_torch_headers.py takes out of a torch wheel, torch not
imported; ``proton_torch.native`` loads the one of the installed torch's minor version (decision 0232).
"""

import json
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
INFO = os.path.join(HERE, "src", "proton_torch", "_build_info.py")
# One file per concern (csrc/python_module.cc lists them); core_scopes.cc alone talks to the core (its C API).
SOURCES = [
    "csrc/python_module.cc",
    "csrc/thread_state.cc",
    "csrc/record_callbacks.cc",
    "csrc/operator_names.cc",
    "csrc/autograd_records.cc",
    "csrc/launch_provider.cc",
    "csrc/module_frames.cc",
    "csrc/core_scopes.cc",
    "csrc/tracing.cc",
    "csrc/timing.cc",
    "csrc/unobserved.cc",
]


def core_include():
    """The folder holding <proton_core/scope_api.h>: $PROTON_CORE_INCLUDE, the core in this checkout, else the
    installed core's (this package is built without isolation, beside it)."""
    for folder in (os.environ.get("PROTON_CORE_INCLUDE"), os.path.join(HERE, "..", "..", "proton_core", "include")):
        if folder and os.path.exists(os.path.join(folder, "proton_core", "scope_api.h")):
            return folder
    from proton_core.native_api import get_include  # ImportError: install proton-profiler first

    return get_include()


def write_info(torch_version, prebuilt=None):
    text = ('"""Written by setup.py at build time: the torch this build\'s extension was compiled for."""\n\n'
            f"TORCH_VERSION = {torch_version!r}  # None: built without torch, so without the extension\n")
    if prebuilt:
        text += f"PREBUILT = {prebuilt!r}  # torch minor version -> the torch version its observer was compiled against\n"
    old = open(INFO, encoding="utf-8").read() if os.path.exists(INFO) else None
    if old != text:
        with open(INFO, "w", encoding="utf-8") as f:
            f.write(text)


class PerExtensionTemp(build_ext):
    """Each extension compiles into its own temporary folder: the prebuilt observers share their sources, and
    setuptools would otherwise take one torch version's objects as up to date for the next."""

    def build_extension(self, ext):
        base = self.build_temp
        self.build_temp = os.path.join(base, ext.name)
        self.parallel = self.parallel or os.cpu_count()
        try:
            super().build_extension(ext)
        finally:
            self.build_temp = base


def prebuilt_observers(spec):
    """One Extension per "minor=DIR" of ``spec``, and {minor: torch version}."""
    extensions, versions = [], {}
    for item in spec.split():
        minor, root = item.split("=", 1)
        with open(os.path.join(root, "version.json"), encoding="utf-8") as f:
            info = json.load(f)
        versions[minor] = info["version"]
        extensions.append(Extension(
            f"proton_torch._observers.torch{minor.replace('.', '_')}._C",
            SOURCES,
            language="c++",
            include_dirs=[os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api", "include"),
                          core_include()],
            library_dirs=[os.path.join(root, "lib")],
            libraries=["c10", "torch_cpu"],  # found at run time among the installed torch's, already loaded
            define_macros=[("PROTON_TORCH_BUILT_FOR", f'"{info["version"]}"'), ("TORCH_EXTENSION_NAME", "_C"),
                           ("TORCH_API_INCLUDE_EXTENSION_H", None),
                           ("_GLIBCXX_USE_CXX11_ABI", str(info["cxx11_abi"]))],
            extra_compile_args=[f"-std={info['std']}", "-g0", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-fvisibility=hidden"],
        ))
    return extensions, versions


def extension():
    if os.environ.get("PROTON_TORCH_NO_EXTENSION") == "1":
        return None, {}
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError as exc:
        print(f"proton-profiler-torch: torch is not importable here ({exc}): building without the native "
              "extension; install torch first, then `pip install --no-build-isolation` this package",
              file=sys.stderr)
        return None, {}
    ext = CppExtension(
        "proton_torch._C",
        SOURCES,
        include_dirs=[core_include()],
        define_macros=[("PROTON_TORCH_BUILT_FOR", f'"{torch.__version__}"')]
        + ([("PROTON_TORCH_TIMING", "1")] if os.environ.get("PROTON_TORCH_TIMING") == "1" else []),
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                            "-fvisibility=hidden"],
    )
    return (ext, torch.__version__), {"build_ext": BuildExtension.with_options(no_python_abi_suffix=False)}


if os.environ.get("PROTON_TORCH_PREBUILT"):
    observers, versions = prebuilt_observers(os.environ["PROTON_TORCH_PREBUILT"])
    write_info(None, versions)
    setup(ext_modules=observers, cmdclass={"build_ext": PerExtensionTemp})
else:
    found, cmdclass = extension()
    write_info(found[1] if found else None)
    setup(ext_modules=[found[0]] if found else [], cmdclass=cmdclass)
