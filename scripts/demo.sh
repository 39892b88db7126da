#!/usr/bin/env bash
# The newcomer's main job: install, profile examples/quickstart.py, show it in the viewer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
out=${TMPDIR:-/tmp}/proton_quickstart
proton --name "$out" examples/quickstart.py
proton-viewer -m time/us,cpu_time/us "$out.hatchet"
