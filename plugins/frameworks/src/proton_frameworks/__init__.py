"""Proton context sources for frameworks: ``hook="triton"`` and ``hook="jax"``.

``hook="torch"`` is proton-profiler-torch's. :mod:`proton_frameworks.triton_hooks` installs every
plugin's entries in Triton's hooks (this distribution owns Triton).

Nothing here imports a framework at import time; each source imports its
framework when a session that names it starts.
"""

__version__ = "0.1.0"
