"""What every profiled process does right after its session starts (the CLI's program, followed children):
arm the step schedule, and serve on-demand control where ``PROTON_ON_DEMAND=1``."""

from __future__ import annotations

import importlib.util
import os
import sys

ON_DEMAND_VAR = "PROTON_ON_DEMAND"


def run(session_id: int) -> None:
    from ..distributed import schedule

    schedule.arm_from_environment(session_id)
    if os.environ.get(ON_DEMAND_VAR, "").strip() != "1":
        return
    if importlib.util.find_spec("proton_core.control") is None:
        print("proton: --on-demand needs proton_core.control, which this installation lacks; recording "
              "as usual", file=sys.stderr)
        return
    from .. import control

    control.serve()
