#!/usr/bin/env bash
# The newcomer's main job: install, profile examples/quickstart.py, show it in the viewer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
out=${TMPDIR:-/tmp}/proton_quickstart
proton-profile --name "$out" examples/quickstart.py
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  proton-view -m time/us,cpu_time/us "$out.hatchet"      # GPU: kernel time under each scope
else
  proton-view -m cpu_time/us,samples "$out.hatchet"      # CPU only: host-side times and metrics
fi
