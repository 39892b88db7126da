#!/usr/bin/env bash
# Install Proton (core + every plugin + viewer + test tools) into the current Python,
# editable, from this checkout. CPU torch comes from the pinned 2.13.0 file, never a range.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --upgrade pip
$PY -m pip install -q "torch==2.13.0" "jax>=0.4.30,<1"
# A development install: proton-cupti with its test bindings (CMake option
# PROTON_CUPTI_TESTING, OFF in release wheels; scikit-build-core reads this variable).
export SKBUILD_CMAKE_DEFINE="${SKBUILD_CMAKE_DEFINE:+$SKBUILD_CMAKE_DEFINE;}PROTON_CUPTI_TESTING=ON"
plugins=()
for dir in plugins/*/; do
  [ -f "$dir/pyproject.toml" ] && plugins+=(-e "$dir")
done
$PY -m pip install -q -e ".[viewer,test]" "${plugins[@]}"
echo "proton installed: core and $(( ${#plugins[@]} / 2 )) plugin distributions"
