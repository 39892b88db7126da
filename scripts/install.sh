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
  # proton-profiler-torch compiles against the torch installed above: built below, without isolation.
  [ -f "$dir/pyproject.toml" ] && [ "$dir" != plugins/torch/ ] && plugins+=(-e "$dir")
done
$PY -m pip install -q -e ".[viewer,test]" "${plugins[@]}"
$PY -m pip install -q "setuptools>=77"  # the torch plugin builds with the environment's own (PEP 639 metadata)
$PY -m pip install -q --no-build-isolation --no-deps -e plugins/torch
echo "proton-profiler installed: core and $(( ${#plugins[@]} / 2 + 1 )) plugin distributions"
# The --html page's browser test drives Debian's Chromium through playwright (the test extra);
# playwright's own browser download does not work here. As root (or passwordless sudo) this installs the
# Debian package chromium system-wide, saying so first; PROTON_INSTALL_BROWSER=0 skips it (the browser
# test is then skipped with its reason). Never failing the install.
if [ "${PROTON_INSTALL_BROWSER:-1}" = 0 ]; then
  echo "chromium not installed (PROTON_INSTALL_BROWSER=0): the --html browser test will be skipped"
elif [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium system-wide with apt-get, for the --html browser test (PROTON_INSTALL_BROWSER=0 skips it)"
  apt=()
  if [ "$(id -u)" = 0 ]; then apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    apt=(sudo -n env DEBIAN_FRONTEND=noninteractive apt-get)
  fi
  if [ ${#apt[@]} -gt 0 ] && { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq chromium; } >/dev/null 2>&1; then
    echo "chromium installed (the --html browser test)"
  else
    echo "chromium not installed (no root or apt-get failed): the --html browser test will be skipped"
  fi
fi
# The pprof tests read written files with go tool pprof (tests/test_pprof_go.py): Debian's golang-go. As root
# (or passwordless sudo) this installs it system-wide, saying so first; PROTON_INSTALL_GO=0 skips it (those
# tests are then skipped with their reason). Never failing the install.
if [ "${PROTON_INSTALL_GO:-1}" = 0 ]; then
  echo "golang-go not installed (PROTON_INSTALL_GO=0): the go tool pprof tests will be skipped"
elif ! command -v go >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's golang-go system-wide with apt-get, for the go tool pprof tests (PROTON_INSTALL_GO=0 skips it)"
  apt=()
  if [ "$(id -u)" = 0 ]; then apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    apt=(sudo -n env DEBIAN_FRONTEND=noninteractive apt-get)
  fi
  if [ ${#apt[@]} -gt 0 ] && { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq golang-go; } >/dev/null 2>&1; then
    echo "golang-go installed (the go tool pprof tests)"
  else
    echo "golang-go not installed (no root or apt-get failed): the go tool pprof tests will be skipped"
  fi
fi
