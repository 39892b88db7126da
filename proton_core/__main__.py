"""``python -m proton_core``: the same as the ``proton-profile`` command."""

import sys

from .cli import main

sys.exit(main())
