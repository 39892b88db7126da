"""Shared by the distributed tests: programs run in real processes with a launcher's variables."""

import json
import os
import subprocess
import sys
import textwrap

#: Launcher variables removed from every child, so the machine running the tests cannot lend it a rank.
LAUNCHER_VARS = [v for v in os.environ if v.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "MV2_", "TORCHELASTIC_"))]
LAUNCHER_VARS += ["RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "PROTON_RUN_ID",
                  "PROTON_RANKS", "PROTON_SCHEDULE", "PROTON_FOLLOW", "PROTON_ON_DEMAND", "MPI_LOCALRANKID"]


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PROTON_BACKEND"] = "host"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def write(tmp_path, name, body) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def run(args, tmp_path, timeout=240, **env):
    return subprocess.run([str(a) for a in args], cwd=tmp_path, env=clean_env(**env), capture_output=True, text=True,
                          timeout=timeout)


def cli(tmp_path, *args, timeout=240, **env):
    return run([sys.executable, "-m", "proton_core", *args], tmp_path, timeout=timeout, **env)


def root(path) -> dict:
    with open(path) as f:
        return json.load(f)[0]


def meta(path) -> dict:
    return root(path).get("metadata", {})


def names(path) -> set:
    return {c["frame"]["name"] for c in root(path)["children"]}
