"""Helpers shared by the frameworks tests: read a hatchet profile, walk it by names."""

import json


def load(path):
    with open(path) as f:
        return json.load(f)


def names(literal):
    return [c["frame"]["name"] for c in literal["children"]]


def node(literal, *path):
    """Follow child names from a hatchet literal node; fail with the children seen."""
    for name in path:
        matches = [c for c in literal["children"] if c["frame"]["name"] == name]
        assert matches, f"no child {name!r} under {literal['frame']['name']!r}: {names(literal)}"
        literal = matches[0]
    return literal


def find_all(literal, predicate, prefix=()):
    """Every (path, node) below ``literal`` whose name satisfies ``predicate``."""
    out = []
    for child in literal["children"]:
        path = prefix + (child["frame"]["name"],)
        if predicate(child["frame"]["name"]):
            out.append((path, child))
        out.extend(find_all(child, predicate, path))
    return out
