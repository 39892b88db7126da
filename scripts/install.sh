#!/usr/bin/env bash
# Install Proton (core + every plugin + viewer + test tools) into the current Python,
# editable, from this checkout. CPU torch comes from the pinned 2.13.0 file, never a range.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --upgrade pip
$PY -m pip install -q "torch==2.13.0" "jax>=0.4.30,<1"
# Installs from before the rename to proton-profiler(-*) go first: their metadata would still
# claim the plugins' entry points and the `proton` script. Only ours (entry points into
# proton_* modules), never PyPI's unrelated "proton".
old=$($PY - <<'EOF'
from importlib import metadata
for name in ("proton", "proton-cupti", "proton-frameworks", "proton-roctracer", "proton-instrumentation",
             "proton-nvtx"):
    try:
        eps = metadata.distribution(name).entry_points
    except metadata.PackageNotFoundError:
        continue
    if any(ep.value.startswith("proton_") for ep in eps):
        print(name)
EOF
)
if [ -n "$old" ]; then
  echo "uninstalling the old distributions:" $old
  # shellcheck disable=SC2086 # one word a name
  $PY -m pip uninstall -q -y $old
fi
# Their egg-info left in the tree is metadata too, wherever src/ or the root is on sys.path.
rm -rf proton.egg-info plugins/*/src/proton_{cupti,frameworks,roctracer,instrumentation,nvtx}.egg-info
# A development install: proton-profiler-cupti with its test bindings (CMake option
# PROTON_CUPTI_TESTING, OFF in release wheels; scikit-build-core reads this variable).
export SKBUILD_CMAKE_DEFINE="${SKBUILD_CMAKE_DEFINE:+$SKBUILD_CMAKE_DEFINE;}PROTON_CUPTI_TESTING=ON"
plugins=()
for dir in plugins/*/; do
  [ -f "$dir/pyproject.toml" ] && plugins+=(-e "$dir")
done
$PY -m pip install -q -e ".[viewer,test]" "${plugins[@]}"
echo "proton-profiler installed: core and $(( ${#plugins[@]} / 2 )) plugin distributions"
