"""Helpers shared by the torch plugin's tests: read a hatchet profile, walk it by names.

Loading and path-following come from proton_core.testing (the hatchet format's reader).
"""

from proton_core.testing import child as node, load_profile as load  # noqa: F401


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
