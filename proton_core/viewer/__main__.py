"""``python -m proton_core.viewer``: the same as ``proton-viewer``."""

import sys

from . import main

sys.exit(main())
