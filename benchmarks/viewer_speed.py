"""How long proton-view takes on large profiles, beside upstream's viewer on the same files.

    python3 -m benchmarks.viewer_speed                        # 10k, 100k, 1M nodes
    python3 -m benchmarks.viewer_speed --sizes 10000          # what CI runs
    python3 -m benchmarks.viewer_speed --upstream-python /tmp/upvenv/bin/python

Profiles are generated with a training run's shape: steps, forward/backward,
layers, attention/MLP op scopes (some with cpu_time) and kernel leaves (time,
count, device, flops16 on GEMMs, bytes), kernel names Triton-style and C++
mangled.  Each command runs in its own process; the table gives wall seconds
and the process's peak RSS (``wait4``).  Upstream's viewer
(``python -m triton.profiler.viewer``, Triton on a CPU machine is enough) runs
the commands it has, under a time limit; once a command times out at one size
it is not tried at larger ones.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

SIZES = (10_000, 100_000, 1_000_000)

KERNELS = (
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN5flash16flash_fwd_kernelILi128ELi64ELb1EEEvNS_6ParamsE",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedEEEEEvNT_6ParamsE",
    "_ZN4vllm25paged_attention_v1_kernelIttLi128ELi16ELi128ELb0EEEvPT_PKS1_S4_S4_ifPKiS6_iPKfiii",
    "_Z6kernelPfS_i",
    "matmul_kernel_0d1d2d3d4d5d6d7c8d9c10d11c",
    "_attn_fwd_inner_0d1d2d3de4de5de6de7de8de9de10de11de12",
    "fused_layer_norm_kernel_BLOCK_SIZE_1024",
    "triton_per_fused_native_layer_norm_0",
    "triton_poi_fused_add_gelu_mul_1",
)
GEMMS = {KERNELS[2], KERNELS[5]}
OPS = ("attention", "mlp")
SUBOPS = {"attention": ("qkv_proj", "softmax", "out_proj"), "mlp": ("up_proj", "gelu", "down_proj")}


def _kernel(rnd: random.Random) -> dict:
    name = rnd.choice(KERNELS)
    t = rnd.randint(2_000, 2_000_000)
    metrics = {"time (ns)": t, "count": rnd.randint(1, 64), "device_id": str(rnd.randint(0, 1)), "device_type": "CUDA",
               "bytes": t * rnd.randint(50, 400)}
    if name in GEMMS:
        metrics["flops16"] = float(t) * rnd.randint(200_000, 900_000)
    return {"frame": {"name": name, "type": "function"}, "metrics": metrics, "children": []}


def _scope(name: str, metrics: dict, children: list) -> dict:
    return {"frame": {"name": name, "type": "function"}, "metrics": metrics, "children": children}


def _layer(rnd: random.Random, index: int) -> dict:
    ops = []
    for op in OPS:
        subs = [_scope(sub, {}, [_kernel(rnd) for _ in range(rnd.randint(2, 5))]) for sub in SUBOPS[op]]
        ops.append(_scope(op, {"cpu_time (ns)": rnd.randint(10_000, 900_000)}, subs))
    return _scope(f"model.layers.{index}", {"cpu_time (ns)": rnd.randint(100_000, 9_000_000)}, ops)


def _step(rnd: random.Random, index: int, layers: int) -> dict:
    phases = [_scope(phase, {"cpu_time (ns)": rnd.randint(10**6, 10**8)}, [_layer(rnd, i) for i in range(layers)])
              for phase in ("forward", "backward")]
    phases.append(_scope("optimizer", {}, [_kernel(rnd) for _ in range(4)]))
    return _scope(f"train_step_{index}", {}, phases)


def _size(node: dict) -> int:
    stack, n = [node], 0
    while stack:
        item = stack.pop()
        n += 1
        stack.extend(item["children"])
    return n


def generate(nodes: int, path: str, seed: int = 0, layers: int = 24) -> int:
    """Write a profile of about ``nodes`` nodes to ``path``, a step at a time; returns the node count."""
    rnd = random.Random(seed)
    count, index = 1, 0
    devices = {"CUDA": {str(d): {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                                 "bus_width": 5120} for d in (0, 1)}}
    with open(path, "w") as f:
        f.write('[{"frame":{"name":"ROOT","type":"function"},"metrics":{"time (ns)":0,"count":0},'
                '"metadata":{"name":"bench","context":"shadow","data":"tree"},"children":[')
        while count < nodes:
            step = _step(rnd, index, layers)
            f.write(("," if index else "") + json.dumps(step, separators=(",", ":")))
            count += _size(step)
            index += 1
        f.write("]}," + json.dumps(devices, separators=(",", ":")) + "]")
    return count


def run(cmd: list[str], out: str, timeout: float) -> tuple[float | None, float]:
    """(wall seconds or None past ``timeout``, peak RSS in MB) of one command, its stdout to ``out``."""
    with open(out, "w") as sink, tempfile.TemporaryFile("w+") as errors:  # a file: a full pipe would stall it
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=errors, text=True)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return None, usage.ru_maxrss / 1024
            time.sleep(0.01)
        wall = time.perf_counter() - start
        errors.seek(0)
        err = errors.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024


#: (case, our arguments, upstream's arguments or None where upstream has no such command)
CASES = [
    ("read only", None, None),
    ("-d 3", ["-m", "time/us,time/%", "-d", "3"], ["-m", "time/us", "-d", "3"]),
    ("-t 1 (time/%)", ["-m", "time/%,time/us", "-t", "1"], ["-m", "time/%", "-t", "1"]),
    ("-i/-e -d 5", ["-m", "time/us", "-i", "attention", "-e", "softmax", "-d", "5"],
     ["-m", "time/us", "-i", "attention", "-d", "5"]),
    ("--print-sorted -d 2", ["-m", "time/us", "--print-sorted", "-d", "2"],
     ["-m", "time/us", "--print-sorted", "-d", "2"]),
    ("-diff -d 3", ["-m", "time/us", "-d", "3", "-diff", "{other}"], ["-m", "time/us", "-d", "3", "-diff", "{other}"]),
    ("full tree to a file", ["-m", "time/us,time/%"], ["-m", "time/us"]),
]


def measure(sizes, upstream_python: str | None, timeout: float, workdir: str, log=print) -> list[dict]:
    rows, gave_up = [], set()
    for size in sizes:
        path, other = os.path.join(workdir, f"p{size}.hatchet"), os.path.join(workdir, f"q{size}.hatchet")
        nodes = generate(size, path, seed=1)
        generate(size, other, seed=2)
        megabytes = os.path.getsize(path) / 2**20
        log(f"{nodes} nodes, {megabytes:.0f} MB")
        for case, ours, theirs in CASES:
            row = {"nodes": nodes, "file_mb": round(megabytes, 1), "case": case}
            if ours is None:
                cmd = [sys.executable, "-c", "import sys; from proton_core.viewer import table; table.read(sys.argv[1])", path]
            else:
                cmd = [sys.executable, "-m", "proton_core.viewer", *[a.format(other=other) for a in ours], path]
            row["ours_s"], row["ours_mb"] = run(cmd, os.path.join(workdir, "out.txt"), timeout=max(timeout, 120))
            if upstream_python and theirs is not None and case not in gave_up:
                cmd = [upstream_python, "-m", "triton.profiler.viewer", *[a.format(other=other) for a in theirs], path]
                row["upstream_s"], row["upstream_mb"] = run(cmd, os.path.join(workdir, "up.txt"), timeout)
                if row["upstream_s"] is None:
                    gave_up.add(case)
            elif upstream_python and theirs is not None:
                row["upstream_s"] = None  # timed out at a smaller size
            rows.append(row)
            log(table([row], timeout, header=False))
    return rows


def _cell(value, timeout) -> str:
    return f"> {timeout:.0f}" if value is None else f"{value:.2f}"


def table(rows, timeout: float, header: bool = True) -> str:
    lines = ["| nodes | file MB | command | ours s | ours peak MB | upstream s | upstream peak MB |",
             "|---:|---:|---|---:|---:|---:|---:|"] if header else []
    for r in rows:
        up_s = _cell(r["upstream_s"], timeout) if "upstream_s" in r else "n/a"
        up_mb = f"{r['upstream_mb']:.0f}" if r.get("upstream_mb") and r.get("upstream_s") is not None else "-"
        lines.append(f"| {r['nodes']:,} | {r['file_mb']:.0f} | {r['case']} | {r['ours_s']:.2f} | {r['ours_mb']:.0f} "
                     f"| {up_s} | {up_mb} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated node counts")
    parser.add_argument("--upstream-python", default=None,
                        help="a Python with triton and llnl-hatchet installed, to time upstream's viewer too")
    parser.add_argument("--timeout", type=float, default=300, help="seconds an upstream command may take")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="viewer_speed_") as workdir:
        rows = measure(sizes, args.upstream_python, args.timeout, workdir, log=lambda s: print(s, file=sys.stderr))
    print(table(rows, args.timeout))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
