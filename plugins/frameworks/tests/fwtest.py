"""Helpers shared by the frameworks tests: read a hatchet profile, walk it by names.

Loading and path-following come from the core's tests (its hatchet reader), as in the cupti tests.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests")))

from profile_helpers import load, node  # noqa: E402,F401


def names(literal):
    return [c["frame"]["name"] for c in literal["children"]]


def find_all(literal, predicate, prefix=()):
    """Every (path, node) below ``literal`` whose name satisfies ``predicate``."""
    out = []
    for child in literal["children"]:
        path = prefix + (child["frame"]["name"],)
        if predicate(child["frame"]["name"]):
            out.append((path, child))
        out.extend(find_all(child, predicate, path))
    return out
