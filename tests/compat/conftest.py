"""Helpers for the compatibility tests: what upstream Proton's own tests assert, checked on proton_core.

These tests are ours (upstream's are run as they are by scripts/upstream_tests.sh); they use the
synthetic backend of this repository's pytest settings, so they run without Triton or a GPU.
"""

import json
import re

import pytest

#: A metric key with its kind written after it, as ours writes exclusive and property metrics today
#: ("a (exc)", "a (pty)"); upstream writes the bare name. Which spelling the file uses is the file
#: format's concern (docs/compat.md), not these tests'.
_KIND = re.compile(r"\s*\((?:exc|pty)\)$")


def _bare(metrics: dict) -> dict:
    return {_KIND.sub("", key): value for key, value in metrics.items()}


@pytest.fixture
def read_tree():
    """Read a written hatchet file as upstream's tests do (``json.load``), metric keys without their kind."""

    def read(path):
        with open(path) as f:
            data = json.load(f)

        def walk(node):
            node["metrics"] = _bare(node["metrics"])
            for child in node["children"]:
                walk(child)
            return node

        walk(data[0])
        return data

    return read


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in ``tmp_path`` with the synthetic backend chosen for sessions started without one (upstream's
    tests never name a backend, and write ``test.hatchet``/``proton.hatchet`` in the working directory)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROTON_BACKEND", "fake")
    return tmp_path
