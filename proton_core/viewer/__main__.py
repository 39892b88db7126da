"""``python -m proton_core.viewer``: the same as ``proton-view``."""

import sys

from . import main

sys.exit(main())
