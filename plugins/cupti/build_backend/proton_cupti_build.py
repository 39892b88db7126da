"""PEP 517 backend of proton-profiler-cupti: scikit-build-core, plus the nvidia header wheels
as build requirements when no CUDA toolkit has the headers.

Which headers and where they are is cuda_paths' to say; it is loaded by file
path because the package cannot be imported before it is built.
"""

from __future__ import annotations

import importlib.util
import os

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403 - every hook scikit-build-core offers

_CUDA_PATHS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "src", "proton_cupti", "cuda_paths.py")
_spec = importlib.util.spec_from_file_location("_proton_cupti_cuda_paths", _CUDA_PATHS)
cuda_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cuda_paths)


def get_requires_for_build_wheel(config_settings=None):
    return list(_skbuild.get_requires_for_build_wheel(config_settings)) + cuda_paths.extra_build_requires()


def get_requires_for_build_editable(config_settings=None):
    return list(_skbuild.get_requires_for_build_editable(config_settings)) + cuda_paths.extra_build_requires()
