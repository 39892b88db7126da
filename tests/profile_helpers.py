"""Reading written profiles in tests, through the hatchet format's own reader."""

from proton_core.formats.hatchet import read_document as load  # noqa: F401  ([root literal, device_info])


def node(literal, *names):
    """Follow child names from a hatchet literal node."""
    for name in names:
        matches = [c for c in literal["children"] if c["frame"]["name"] == name]
        assert matches, f"no child {name!r} under {literal['frame']['name']!r}: {[c['frame']['name'] for c in literal['children']]}"
        literal = matches[0]
    return literal
