#!/usr/bin/env bash
# Try Proton as a new user would, on a GPU machine: a fresh clone (the tree without what git ignores), a fresh virtual environment (which sees
# the machine's torch, triton, jax and transformers, as a user's would), the install gpu_check.sh does
# there (no package registry), then programs not written for a test, each profiled and checked:
#   - upstream Proton's Triton matmul tutorial (launch_metadata: renamed kernels with flops and bytes),
#     its one import line pointed at proton_core, run as its own docstring says (--profile); kept in
#     .newuser/matmul.py, never committed (carry it: run's carry ["gpu_wheels", ".newuser"]);
#   - examples/llama_training.py, a transformers Llama from a config, under `proton-profile --hook torch`;
#   - examples/jax_scopes.py, a jitted function with three named scopes compiled before start() (XLA fuses
#     two of them into one Triton kernel);
#   - CUPTI's own injection sample target, a CUDA program without Python (threads, streams, every GPU), under
#     `proton-profile ./complex_target`, its kernel counts against the bare-CUPTI floor's.
# Logs and the viewer's output go to $OUT/new_user. Exit status: the number of programs that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
LOG="$OUT/new_user"
mkdir -p "$LOG"
src=$PWD
work=$(mktemp -d)
# What a clone holds: the tree without what git ignores (build outputs; the carried wheels are copied after)
mkdir -p "$work/proton"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null |
  tar -xf - -C "$work/proton" || { echo "copy failed"; exit 1; }
[ -d "$src/gpu_wheels" ] && cp -r "$src/gpu_wheels" "$work/proton/"
# The machine's packages (torch, triton, jax, transformers, the build tools) live in the environment its
# python3 runs in: the fresh venv sees them through a .pth line, as a user's venv would hold them after
# pip install (there is no registry here). Our own distributions are installed into the venv itself.
machine_site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
echo "$machine_site" > "$(python -c 'import site; print(site.getsitepackages()[0])')/machine_packages.pth"
cd "$work/proton"
if ! OUT="$LOG/install" bash scripts/gpu_check.sh --no-tests > "$LOG/install.log" 2>&1; then
  tail -20 "$LOG/install.log"
  echo "install failed"
  exit 1
fi
echo "installed into a fresh venv: $(python -c 'import proton_core; print(proton_core.__version__)')"
failed=0
# TRY_ONLY=name,name runs only those programs (matmul, llama, jax, cuda); all by default.
want() { [ -z "${TRY_ONLY:-}" ] || [[ ",$TRY_ONLY," == *",$1,"* ]]; }
run_check() {  # name, profile (no extension), then the python check reading it, in the current directory
  local name=$1 profile=$2 check=$3
  if python - "$profile" <<<"$check" >> "$LOG/$name.log" 2>&1; then
    echo "PASS $name: $(tail -1 "$LOG/$name.log")"
  else
    echo "FAIL $name (see new_user/$name.log):"; tail -5 "$LOG/$name.log"; failed=$((failed + 1))
  fi
}
COMMON='
import sys
from proton_core.testing import load_profile
def walk(node, path=()):
    for child in node["children"]:
        p = path + (child["frame"]["name"],)
        yield p, child
        yield from walk(child, p)
root = load_profile(sys.argv[1] + ".hatchet")[0]
nodes = list(walk(root))
'

# Triton: upstream's tutorial, as its docstring runs it
mkdir -p "$work/triton" && cd "$work/triton"
if ! want matmul; then
  :
elif [ -f "$src/.newuser/matmul.py" ]; then
  # The tutorial's launch_metadata reads metadata.cluster_dims, which triton 3.6's KernelMetadata lacks
  # (upstream's own mismatch, not the profiler's): read as 1x1x1 where absent.
  sed -e 's/^import triton.profiler as proton$/import proton_core as proton/' \
      -e 's/= metadata\.cluster_dims$/= getattr(metadata, "cluster_dims", (1, 1, 1))/' "$src/.newuser/matmul.py" > matmul.py
  if python matmul.py --profile > "$LOG/matmul.log" 2>&1; then
    proton-view -m tflop/s,time/s matmul.hatchet > "$LOG/matmul_view.txt" 2>&1
    run_check matmul matmul "$COMMON"'
kernels = [(p, n) for p, n in nodes if p[-1].startswith("matmul_<grid:")]
assert kernels, "no renamed matmul kernel"
assert all(any(k.startswith("flops") for k in n["metrics"]) and any(k.startswith("bytes") for k in n["metrics"])
           for _, n in kernels), "a renamed kernel without flops or bytes"
assert any("<autotune>" in p for p, _ in kernels) and any("triton" in p for p, _ in kernels)
assert any("cublas" in p for p, _ in nodes), "no cublas scope"
launches = sum(n["metrics"]["count"] for _, n in kernels)
print(f"{len(kernels)} renamed matmul kernel nodes, all with flops and bytes; {launches} launches")'
  else
    echo "FAIL matmul: the tutorial did not run"; tail -5 "$LOG/matmul.log"; failed=$((failed + 1))
  fi
else
  echo "FAIL matmul: .newuser/matmul.py was not carried"; failed=$((failed + 1))
fi

# PyTorch: a transformers model under the command line, hook="torch"
mkdir -p "$work/torch" && cd "$work/torch"
if ! want llama; then
  :
elif proton-profile --name llama --hook torch "$work/proton/examples/llama_training.py" > "$LOG/llama_run.log" 2>&1; then
  proton-view -m time/ms llama.hatchet > "$LOG/llama_view.txt" 2>&1
  run_check llama llama "$COMMON"'
kernels = [(p, n) for p, n in nodes if not n["children"] and "count" in n["metrics"]]
attn = [p for p, _ in kernels if "LlamaForCausalLM" in p and "self_attn" in p and any(s.startswith("aten::") for s in p)]
assert attn, "no kernel under LlamaForCausalLM/.../self_attn/aten::..."
backward = [p for p, _ in kernels if any(s.endswith("Backward0") for s in p)]
under_forward = [p for p in backward if any(s.startswith("aten::") for s in p[:min(i for i, s in enumerate(p) if s.endswith("Backward0"))])]
assert backward and under_forward, "no backward kernel under the forward operator that created it"
print(f"{len(kernels)} kernel nodes: {len(attn)} under self_attn, {len(backward)} backward, {len(under_forward)} of them under a forward operator")'
else
  echo "FAIL llama: the program did not run"; tail -5 "$LOG/llama_run.log"; failed=$((failed + 1))
fi

# JAX: compiled before start(), no registration
mkdir -p "$work/jax" && cd "$work/jax"
if ! want jax; then
  :
elif XLA_PYTHON_CLIENT_PREALLOCATE=false python "$work/proton/examples/jax_scopes.py" jax_scopes > "$LOG/jax_run.log" 2>&1; then
  proton-view -m time/us jax_scopes.hatchet > "$LOG/jax_view.txt" 2>&1
  run_check jax jax_scopes "$COMMON"'
under = {}
for p, n in nodes:
    if "jit(layer)" in p and not n["children"] and "count" in n["metrics"]:
        i = p.index("jit(layer)")
        under.setdefault(p[i + 1] if i + 1 < len(p) - 1 else "(none)", []).append(n["metrics"]["count"])
assert not any("<jax: no HLO match>" in p for p, _ in nodes), "kernels left unplaced"
for scope in ("project", "normalize"):
    assert scope in under, f"no kernel under jit(layer)/{scope}: {sorted(under)}"
# XLA fuses activate into the kernel of normalize: the kernel says so (its name, and fused_scopes)
assert "activate" in under or any("activate" in p[-1] and "normalize" in p for p, _ in nodes), "activate not named"
print("jit(layer): " + ", ".join(f"{s} {len(c)} kernel(s) x {max(c)} launches" for s, c in sorted(under.items())))'
else
  echo "FAIL jax: the program did not run"; tail -5 "$LOG/jax_run.log"; failed=$((failed + 1))
fi
# A CUDA program without Python, written by NVIDIA, not for us: CUPTI's own injection sample target
# (extras/CUPTI/samples/profiling_injection/complex_target.cu: a stream per kernel, a thread per GPU), built
# with nvcc, run under the bare-CUPTI floor (as an injection library) and under `proton-profile ./program`:
# the same kernels, counted the same, on every GPU.
mkdir -p "$work/cuda" && cd "$work/cuda"
sample=$(ls "${CUDA_HOME:-/usr/local/cuda}"/extras/CUPTI/samples/profiling_injection/complex_target.cu 2>/dev/null)
if ! want cuda; then
  :
elif [ -z "$sample" ]; then
  echo "FAIL cuda: no CUPTI sample complex_target.cu in the CUDA toolkit here"; failed=$((failed + 1))
elif ! nvcc -O2 -o complex_target "$sample" -I"$(dirname "$sample")/../common" -lcuda > "$LOG/cuda_build.log" 2>&1; then
  echo "FAIL cuda: nvcc could not build the sample"; tail -5 "$LOG/cuda_build.log"; failed=$((failed + 1))
elif ! (cd "$work/proton" && python -c '
import subprocess, sys
from benchmarks.floor import build
lib = build.build_injection(sys.argv[1] + "/floor")
subprocess.run([sys.argv[1] + "/complex_target"], env=build.injection_environment(lib, sys.argv[1] + "/floor.json"),
               check=True, stdout=subprocess.DEVNULL)' "$work/cuda") > "$LOG/cuda_floor.log" 2>&1; then
  echo "FAIL cuda: the sample did not run under the floor"; tail -5 "$LOG/cuda_floor.log"; failed=$((failed + 1))
elif proton-profile -n cplx ./complex_target > "$LOG/cuda_run.log" 2>&1 && mv cplx.pid*.hatchet cplx.hatchet; then
  proton-view -m time/us,count cplx.hatchet > "$LOG/cuda_view.txt" 2>&1
  run_check cuda cplx "$COMMON"'
import json, subprocess
floor = json.load(open("floor.json"))
kernels = [(p, n) for p, n in nodes if not n["children"] and "count" in n["metrics"]]
ours = {}
for p, n in kernels:
    ours[p[-1]] = ours.get(p[-1], 0) + int(n["metrics"]["count"])
def plain(counts):  # both as CUPTI names them (mangled), compared demangled
    names = list(counts)
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    merged = {}
    for raw, name in zip(names, out):
        merged[name] = merged.get(name, 0) + int(counts[raw])
    return merged
ours, want = plain(ours), plain(floor["per_kernel"])
assert ours == want, (ours, want)
gpus = len([l for l in subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines() if l.startswith("GPU ")])
devices = {n["metrics"].get("device_id") for _, n in kernels}
assert len(devices) == gpus, (devices, gpus)
print(f"{sum(ours.values())} launches of {sorted(ours)} on {len(devices)} GPU(s), equal to the floor per kernel")'
else
  echo "FAIL cuda: proton-profile ./complex_target did not run"; tail -5 "$LOG/cuda_run.log"; failed=$((failed + 1))
fi
exit $failed
