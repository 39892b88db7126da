import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from proton_fixtures import clean_manager, fake  # noqa: E402,F401
