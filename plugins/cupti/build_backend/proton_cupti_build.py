"""PEP 517 backend of proton-cupti: scikit-build-core, plus the nvidia header wheels
as build requirements when no CUDA toolkit has the headers (see cupti_headers)."""

from __future__ import annotations

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403 - every hook scikit-build-core offers

from cupti_headers import extra_build_requires


def get_requires_for_build_wheel(config_settings=None):
    return list(_skbuild.get_requires_for_build_wheel(config_settings)) + extra_build_requires()


def get_requires_for_build_editable(config_settings=None):
    return list(_skbuild.get_requires_for_build_editable(config_settings)) + extra_build_requires()
