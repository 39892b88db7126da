"""Reading hatchet profiles in the cupti tests."""

import json


def load(path):
    with open(path) as f:
        return json.load(f)


def child(literal, *names):
    """Follow child frame names from a hatchet literal node; fail with the choices."""
    for name in names:
        matches = [c for c in literal["children"] if c["frame"]["name"] == name]
        assert matches, f"no {name!r} under {literal['frame']['name']!r}: {[c['frame']['name'] for c in literal['children']]}"
        literal = matches[0]
    return literal


def kernels(literal):
    """{kernel name: metrics} of a node's kernel children."""
    return {c["frame"]["name"]: c["metrics"] for c in literal["children"] if "device_id" in c["metrics"]}


def walk(literal, path=()):
    """Yield (path of names, node) for every node below ``literal``."""
    for c in literal["children"]:
        p = path + (c["frame"]["name"],)
        yield p, c
        yield from walk(c, p)
