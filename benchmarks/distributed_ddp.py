"""A DDP training step of a transformers model on two GPUs with NCCL, profiled through
``proton-profile torchrun --nproc-per-node 2`` (issue 45's GPU check), beside the same job unprofiled and
under the bare-CUPTI floor, in the same rounds.

    python3 -m benchmarks.distributed_ddp [--rounds 3] [--steps 20] [--out DIR]

Per rank it reports: kernels counted by the floor and by Proton (over the same span: the whole program),
NCCL kernels and the scopes they were filed under, and the median step time unprofiled and profiled (each
round runs both; the ratio is taken per round, then pooled).  Then one run where rank 1 sleeps 50 ms per
step inside the scope ``data_wait``: ``proton-view --sort imbalance`` over its rank files must list that
scope first by host time (``-m cpu_time``), with rank 1 the slowest; by GPU time the all-reduce comes first,
slowest on the rank that waited for it.  Prints a table and writes ``summary.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

TRAIN = textwrap.dedent("""
    import json, os, sys, time
    FLOOR = os.environ.get("DDP_FLOOR_DIR")
    if FLOOR:  # the bare-CUPTI floor counts every kernel of the program, as Proton's session does
        sys.path.insert(0, os.environ["DDP_REPO"])
        from benchmarks.floor import build as floor_build
        floor = floor_build.load(FLOOR)
        floor.start(floor_build.find_cupti())
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import GPT2Config, GPT2LMHeadModel
    import proton_core as proton

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_head=8, n_embd=512, vocab_size=8192, n_positions=256)
    model = DDP(GPT2LMHeadModel(config).cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 8192, (8, 256), device="cuda")
    slow = os.environ.get("DDP_SLOW_RANK") == str(rank)
    times = []
    for step in range(int(os.environ.get("DDP_STEPS", "20"))):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with proton.cpu_timed_scope("data_wait"):  # host time: where a straggler spends its step
            if slow:
                time.sleep(0.05)
            torch.cuda._sleep(1000)  # every rank launches one kernel here
        with proton.scope("forward"):
            loss = model(tokens, labels=tokens).loss
        with proton.scope("backward"):  # DDP's gradient all-reduce is launched in here
            loss.backward()
        with proton.scope("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    out = {"rank": rank, "step_s": times}
    if FLOOR:
        kernels, _, dropped = floor.stop()
        out.update(floor_kernels=kernels, floor_dropped=dropped)
    with open(os.path.join(os.environ["DDP_OUT"], f"times.{os.environ['DDP_LABEL']}.rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
""")


def run(label: str, work: str, cmd: list[str], env_extra: dict) -> None:
    env = dict(os.environ, DDP_OUT=work, DDP_LABEL=label, DDP_REPO=os.getcwd(), **env_extra)
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"{label}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")


def torchrun(script: str) -> list[str]:
    return ["torchrun", "--standalone", "--nproc-per-node", "2", script]


def times(work: str, label: str, rank: int) -> dict:
    with open(os.path.join(work, f"times.{label}.rank{rank}.json")) as f:
        return json.load(f)


def median_step(doc: dict) -> float:
    return statistics.median(doc["step_s"][3:])  # the first steps warm up (allocator, cuBLAS, NCCL)


def kernels(node, path=()):
    """(scope path, kernel name, count) of every kernel node under ``node`` (a literal hatchet tree)."""
    out = []
    for child in node.get("children", []):
        name = child["frame"]["name"]
        metrics = child.get("metrics", {})
        if "device_id" in metrics and "count" in metrics:
            out.append((path, name, metrics["count"]))
        out += kernels(child, path + (name,))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="proton_ddp_")
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    from benchmarks.floor.build import build

    floor_dir = os.path.join(work, "floor")
    build(floor_dir)
    steps = {"DDP_STEPS": str(args.steps)}
    profile = [sys.executable, "-m", "proton_core", "-b", "cupti"]
    ratios = {0: [], 1: []}
    floor_ratios = {0: [], 1: []}
    for r in range(args.rounds):
        run(f"bare{r}", work, torchrun(script), steps)
        run(f"proton{r}", work, profile + ["-n", os.path.join(work, f"ddp{r}")] + torchrun(script), steps)
        run(f"floor{r}", work, torchrun(script), dict(steps, DDP_FLOOR_DIR=floor_dir))
        for rank in (0, 1):
            bare = median_step(times(work, f"bare{r}", rank))
            ratios[rank].append(median_step(times(work, f"proton{r}", rank)) / bare)
            floor_ratios[rank].append(median_step(times(work, f"floor{r}", rank)) / bare)
    summary = {"rounds": args.rounds, "steps": args.steps, "ranks": {}}
    for rank in (0, 1):
        with open(os.path.join(work, f"ddp0.rank{rank}.hatchet")) as f:
            doc = json.load(f)
        found = kernels(doc[0])
        nccl = sorted({(p, n) for p, n, _ in found if "nccl" in n.lower()})
        floor = times(work, "floor0", rank)
        summary["ranks"][rank] = {
            "proton_kernels": sum(c for _, _, c in found),
            "floor_kernels": floor["floor_kernels"], "floor_dropped": floor["floor_dropped"],
            "nccl_kernels": sum(c for _, n, c in found if "nccl" in n.lower()),
            "nccl_scopes": sorted({"/".join(p) for p, _ in nccl}),
            "metadata": doc[0].get("metadata", {}).get("distributed"),
            "step_ratio": ratios[rank], "floor_step_ratio": floor_ratios[rank],
            "step_ms_bare": [1e3 * median_step(times(work, f"bare{r}", rank)) for r in range(args.rounds)],
        }
    run("slow", work, profile + ["-n", os.path.join(work, "slow")] + torchrun(script),
        dict(steps, DDP_SLOW_RANK="1"))
    files = [os.path.join(work, "slow.rank0.hatchet"), os.path.join(work, "slow.rank1.hatchet")]
    summary["imbalance_view"] = []
    for metric in ("cpu_time/ms", "time/ms"):  # host time names the straggler; GPU time, who waited for it
        shown = subprocess.run([sys.executable, "-m", "proton_core.viewer", "--sort", "imbalance", "-m", metric,
                                *files], capture_output=True, text=True, timeout=300)
        summary["imbalance_view"] += (shown.stdout + shown.stderr).splitlines()[:12]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ddp_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for rank, row in summary["ranks"].items():
        print(f"rank {rank}: kernels proton {row['proton_kernels']} floor {row['floor_kernels']} "
              f"(dropped {row['floor_dropped']}); NCCL {row['nccl_kernels']} under {row['nccl_scopes']}; "
              f"step profiled/bare per round {[round(x, 3) for x in row['step_ratio']]}, floor/bare "
              f"{[round(x, 3) for x in row['floor_step_ratio']]}; "
              f"bare step ms {[round(x, 1) for x in row['step_ms_bare']]}")
    print("\n".join(summary["imbalance_view"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
