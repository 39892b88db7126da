"""Reading hatchet profiles in the cupti tests (loading and path-following come from proton_core.testing)."""

from proton_core.testing import child, load_profile as load  # noqa: F401


def kernels(literal):
    """{kernel name: metrics} of a node's kernel children."""
    return {c["frame"]["name"]: c["metrics"] for c in literal["children"] if "device_id" in c["metrics"]}


def walk(literal, path=()):
    """Yield (path of names, node) for every node below ``literal``."""
    for c in literal["children"]:
        p = path + (c["frame"]["name"],)
        yield p, c
        yield from walk(c, p)
