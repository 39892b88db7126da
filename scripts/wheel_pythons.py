"""Print one CPython interpreter per version asked for (`python scripts/wheel_pythons.py 3.10 3.12`), one path a line.

The release builds a wheel per Python version (decision 0230), so it needs each interpreter, not only
the one running it. Looked for in order: `python3.X` on PATH, pyenv's versions, uv's managed Pythons
(`uv python find`), and last `uv python install 3.X` (uv taken from PATH, else pip-installed beside this
interpreter). Exits 1 naming the versions it could not find, in one line.
"""

import glob
import os
import shutil
import subprocess
import sys


def reports(python: str, version: str) -> bool:
    """Whether `python` runs and is CPython `version` (a pyenv shim for a missing version does not run)."""
    code = "import sys, platform; print(platform.python_implementation(), '%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out == ["CPython", version]


def uv() -> str | None:
    """uv's executable: on PATH, else installed with this interpreter's pip into its scripts folder."""
    found = shutil.which("uv")
    if found:
        return found
    scripts = os.path.dirname(sys.executable)
    if not os.path.exists(os.path.join(scripts, "uv")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "uv"], check=False)
    return os.path.join(scripts, "uv") if os.path.exists(os.path.join(scripts, "uv")) else None


def candidates(version: str):
    yield shutil.which(f"python{version}")
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    yield from sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")), reverse=True)
    tool = uv()
    if tool:
        for args in (["python", "find", version], ["python", "install", version], ["python", "find", version]):
            proc = subprocess.run([tool, *args], capture_output=True, text=True)
            if args[1] == "find" and proc.returncode == 0:
                yield proc.stdout.strip()


def find(version: str) -> str | None:
    return next((p for p in candidates(version) if p and reports(p, version)), None)


def main(versions: list[str]) -> int:
    found = {v: find(v) for v in versions}
    missing = [v for v, p in found.items() if p is None]
    if missing:
        print(f"wheel_pythons: no CPython {', '.join(missing)} found (PATH, pyenv, uv)", file=sys.stderr)
        return 1
    print("\n".join(found.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
