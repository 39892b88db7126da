"""Helpers shared by the torch plugin's tests: read a hatchet profile, walk it by names.

Loading and path-following come from proton_core.testing (the hatchet format's reader).
"""

from proton_core.testing import child as node, child_names as names, find_all, load_profile as load  # noqa: F401
