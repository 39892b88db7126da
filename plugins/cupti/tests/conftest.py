"""Fixtures of the cupti plugin's tests."""

from __future__ import annotations

import os
import sys

import pytest

SIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim")
sys.path.insert(0, SIM_DIR)

import simcuda  # noqa: E402  (tests/sim/simcuda.py)


@pytest.fixture(scope="session")
def cuda_sim(tmp_path_factory):
    """The folder holding the simulated libcuda.so.1 and libcupti.so (tests/sim/), built once per run;
    ``simcuda.environment(folder)`` makes a child process's cupti backend run against them."""
    try:
        return simcuda.build(str(tmp_path_factory.mktemp("cuda_sim")))
    except (simcuda.NoCompiler, simcuda.NoHeaders) as exc:
        pytest.skip(str(exc))
