"""The release files as a user meets them: scripts/build_wheels.sh's wheelhouse passes
`twine check --strict`, installs into fresh virtual environments (the rest from the package
index), profiles and views, and lives beside Triton, whose `proton`/`proton-viewer` stay Triton's.

Slow and online: marked `packaging` (-m 'not packaging' leaves it out); skipped, with the
reason, when the index cannot be reached (the GPU machine is offline).
"""

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
import zipfile

import pytest

pytestmark = pytest.mark.packaging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
PLUGINS = ("cupti", "frameworks", "instrumentation", "nvtx", "roctracer", "torch")
# The Triton the brief names: its wheel (188 MB, about 6 s from PyPI) has both console scripts.
TRITON = "triton==3.6.0"
OURS = {"proton-profile": "proton_core.cli:main", "proton-view": "proton_core.viewer:main"}
TRITONS = {"proton": "triton.profiler.proton:main", "proton-viewer": "triton.profiler.viewer:main"}


def unreachable_index():
    try:
        urllib.request.urlopen(f"{INDEX}/pluggy/", timeout=5).close()
    except (OSError, ValueError) as exc:
        return f"package index {INDEX} unreachable ({exc}): packaging tests build and install from it"
    return None


def clean_env(**extra):
    """No PYTHONPATH and no PROTON_* settings: what runs must be what was installed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PROTON_")}
    return {**env, **extra}


def run(cmd, cwd, timeout=600, **env):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=clean_env(**env), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


class Venv:
    """A fresh `python -m venv`; cwd is its own folder, so the checkout is never importable."""

    def __init__(self, path):
        self.path = path
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
        self.bin = path / "bin"

    def run(self, *cmd, cwd=None, **env):
        path = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        return run(cmd, cwd or self.path, PATH=path, **env)

    def pip_install(self, *args):
        return self.run(self.bin / "python", "-m", "pip", "install", "-q", *args)

    def console_scripts(self):
        """name -> [target, distribution] of every proton* console script the environment declares."""
        code = ("import json, importlib.metadata as m; print(json.dumps({e.name: [e.value, e.dist.name] for e in "
                "m.entry_points(group='console_scripts') if e.name.startswith('proton')}))")
        return json.loads(self.run(self.bin / "python", "-c", code).stdout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheelhouse, tools venv): the script run once, as a release would, in its own environment."""
    reason = unreachable_index()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("packaging")
    tools = Venv(tmp / "tools")
    out = tmp / "wheelhouse"
    # A dev shell's test-bindings switch: the script must build the release wheel without it.
    run(["bash", os.path.join(ROOT, "scripts", "build_wheels.sh"), out], ROOT, timeout=900,
        PYTHON=str(tools.bin / "python"), SKBUILD_CMAKE_DEFINE="PROTON_CUPTI_TESTING=ON")
    tools.run(tools.bin / "python", "-m", "pip", "download", "-q", "--no-deps", "-d", tmp / "triton", TRITON)
    return out, tools, next((tmp / "triton").glob("triton-*.whl"))


@pytest.fixture(scope="module")
def ours(built, tmp_path_factory):
    """A venv with proton-profiler[cupti,viewer] from the wheelhouse."""
    venv = Venv(tmp_path_factory.mktemp("ours") / "venv")
    venv.pip_install("--find-links", built[0], "proton-profiler[cupti,viewer]")
    return venv


def profile_and_view(venv, tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import proton_core as proton
        with proton.scope("packaged_scope", metrics={"n": 4}):
            pass
    """))
    venv.run("proton-profile", "prog.py", cwd=tmp_path, PROTON_BACKEND="host")
    assert (tmp_path / "proton.hatchet").is_file()
    shown = venv.run("proton-view", "-m", "n", "proton.hatchet", cwd=tmp_path).stdout
    assert "packaged_scope" in shown and "4.000" in shown, shown


def assert_commands(venv):
    """Triton keeps `proton`/`proton-viewer`, we keep ours: in the metadata and in the files pip wrote."""
    scripts = venv.console_scripts()
    assert {name: target for name, (target, _) in scripts.items()} == {**OURS, **TRITONS}
    assert {name: dist for name, (_, dist) in scripts.items()} == {
        **dict.fromkeys(OURS, "proton-profiler"), **dict.fromkeys(TRITONS, "triton")}
    for name, target in {**OURS, **TRITONS}.items():
        assert f"from {target.split(':')[0]} import main" in (venv.bin / name).read_text()


def test_twine_check_strict_on_every_file(built):
    out, tools, _ = built
    files = sorted(out.iterdir())
    dists = ["proton_profiler", *(f"proton_profiler_{p}" for p in PLUGINS)]
    assert sorted(f.name.split("-")[0] for f in files) == sorted(dists * 2)  # a wheel and an sdist each
    report = tools.run(tools.bin / "python", "-m", "twine", "check", "--strict", *files).stdout
    assert report.count("PASSED") == len(files), report


def test_wheels_carry_license_py_typed_and_a_manylinux_tag(built):
    for wheel in built[0].glob("*.whl"):
        dist = wheel.name.split("-")[0]
        package = "proton_core" if dist == "proton_profiler" else dist.replace("proton_profiler_", "proton_")
        with zipfile.ZipFile(wheel) as whl:
            names = whl.namelist()
            meta = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert f"{package}/py.typed" in names, wheel.name
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), wheel.name
        assert "License-Expression: MIT" in meta and "Project-URL: Source, " in meta, wheel.name
        if dist in ("proton_profiler_cupti", "proton_profiler_nvtx"):  # native code
            assert "-manylinux_" in wheel.name, wheel.name
        if dist == "proton_profiler_torch":
            # Its extension is compiled against the user's torch at install (--no-build-isolation); an isolated
            # build has no torch, so the release wheel is pure Python and says how to build the extension.
            assert wheel.name.endswith("-py3-none-any.whl"), wheel.name


def test_installs_profiles_and_views(ours, tmp_path):
    profile_and_view(ours, tmp_path)
    code = "import proton_cupti._cupti as c; print([n for n in dir(c) if n.startswith('_test_')])"
    assert ours.run(ours.bin / "python", "-c", code).stdout.strip() == "[]"  # release build: no test bindings
    listing = ours.run("proton-profile", "plugins").stdout
    assert any(line.split()[:2] == ["cupti", "proton-profiler-cupti"] for line in listing.splitlines()), listing


def test_triton_installed_after_ours_leaves_both_commands(ours, built, tmp_path):
    ours.pip_install("--no-deps", built[2])
    assert_commands(ours)
    profile_and_view(ours, tmp_path)


def test_all_installed_after_triton_leaves_both_commands(built, tmp_path):
    venv = Venv(tmp_path / "venv")
    venv.pip_install("--no-deps", built[2])
    venv.pip_install("--find-links", built[0], "proton-profiler[all]")
    assert_commands(venv)
    installed = venv.run(venv.bin / "python", "-m", "pip", "list", "--format=json").stdout
    names = {d["name"].lower() for d in json.loads(installed)}
    assert {f"proton-profiler-{p}" for p in PLUGINS} <= names and "llnl-hatchet" in names
    assert "torch" not in names  # no range of ours pulls torch
    profile_and_view(venv, tmp_path)
