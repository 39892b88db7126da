"""Take what the torch observer compiles against out of one torch wheel per minor version, torch never installed.

    python scripts/wheel_torch_headers.py DEST 2.13 2.14      -> prints "2.13=DEST/2.13 2.14=DEST/2.14"

For each minor version, pip downloads a torch wheel of it (no dependencies; any build: the CPU and CUDA
wheels of one version have the same headers, and libc10/libtorch_cpu export the same symbols), and this
keeps `torch/include`, `torch/lib/libc10.so` and `libtorch_cpu.so` (to link against; at run time the
installed torch's are used) and writes `version.json`: the version, the C++ standard torch's
cpp_extension compiles with, and whether its libraries use the C++11 string ABI. The wheel is deleted
after. That line is what plugins/torch/setup.py reads in PROTON_TORCH_PREBUILT (decision 0232).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

KEEP = ("torch/include/", "torch/lib/libc10.so", "torch/lib/libtorch_cpu.so", "torch/utils/cpp_extension.py",
        "torch/version.py")


def download(minor: str, where: str) -> str:
    """A torch wheel of `minor` for Linux x86_64, pip's choice of the newest patch release."""
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                    "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", where,
                    f"torch=={minor}.*"], check=True)
    return os.path.join(where, next(n for n in os.listdir(where) if n.startswith("torch-")))


def extract(wheel: str, dest: str) -> dict:
    with zipfile.ZipFile(wheel) as whl:
        for name in whl.namelist():
            if name.startswith(KEEP) and not name.endswith("/"):
                whl.extract(name, dest)
    torch = os.path.join(dest, "torch")
    version = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", open(os.path.join(torch, "version.py")).read()).group(1)
    stds = re.findall(r"-std=(c\+\+\d+)", open(os.path.join(torch, "utils", "cpp_extension.py")).read())
    std = max(set(stds), key=stds.count) if stds else "c++17"
    # A library built with the C++11 ABI exports std::__cxx11 names (std::string in signatures).
    with open(os.path.join(torch, "lib", "libc10.so"), "rb") as f:
        cxx11 = int(b"__cxx11" in f.read())
    for folder in ("include", "lib"):
        shutil.move(os.path.join(torch, folder), os.path.join(dest, folder))
    shutil.rmtree(torch)
    info = {"version": version, "std": std, "cxx11_abi": cxx11}
    with open(os.path.join(dest, "version.json"), "w") as f:
        json.dump(info, f)
    return info


def main(dest: str, minors: list[str]) -> int:
    spec = []
    for minor in minors:
        root = os.path.join(dest, minor)
        if not os.path.exists(os.path.join(root, "version.json")):
            shutil.rmtree(root, ignore_errors=True)
            with tempfile.TemporaryDirectory(dir=dest) as where:
                info = extract(download(minor, where), root)
            if not info["version"].startswith(minor + "."):
                print(f"wheel_torch_headers: asked for torch {minor}, got {info['version']}", file=sys.stderr)
                return 1
        spec.append(f"{minor}={root}")
    print(" ".join(spec))
    return 0


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    sys.exit(main(os.path.abspath(sys.argv[1]), sys.argv[2:]))
