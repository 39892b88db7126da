"""The release files as a user meets them: scripts/build_wheels.sh's wheelhouse passes
`twine check --strict`, its native wheels carry one CPython version each at Triton's glibc floor
(auditwheel show), and they install without a compiler on two Python versions (3.11 and
$PROTON_PACKAGING_PYTHON, default 3.12), profile and view; beside Triton, whose `proton`/`proton-viewer`
stay Triton's; and the torch plugin's rebuild hint, run as printed, builds its native observer.

Slow and online: marked `packaging` (-m 'not packaging' leaves it out); skipped, with the
reason, when the index cannot be reached (the GPU machine is offline).
"""

import importlib.metadata
import json
import os
import re
import shutil
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
DISTS = ["proton-profiler", *(f"proton-profiler-{p}" for p in PLUGINS)]
# Distributions with compiled modules (a wheel per CPython version) and the module each must carry.
NATIVE = {"proton_profiler": "proton_core._scope_fast", "proton_profiler_cupti": "proton_cupti._cupti",
          "proton_profiler_frameworks": "proton_frameworks._triton_fast", "proton_profiler_nvtx": "proton_nvtx._inject",
          "proton_profiler_roctracer": "proton_roctracer._rocprofiler"}
PYTHONS = ("3.11", os.environ.get("PROTON_PACKAGING_PYTHON", "3.12"))
GLIBC_FLOOR = (2, 27)  # Triton 3.6.0's wheels: manylinux_2_27_x86_64.manylinux_2_28_x86_64


def local_torch():
    """The torch this machine's tests use (a CPU build), whose minor version the wheelhouse gets an observer for."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


TORCH = local_torch()
TORCH_MINOR = ".".join(TORCH.split("+")[0].split(".")[:2]) if TORCH else None
if TORCH_MINOR:  # a wheel per Python version, carrying the observer for this torch
    NATIVE["proton_profiler_torch"] = f"proton_torch._observers.torch{TORCH_MINOR.replace('.', '_')}._C"
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


def interpreter(version):
    """The CPython `version` the release script would use (scripts/wheel_pythons.py)."""
    proc = subprocess.run([sys.executable, "-I", os.path.join(ROOT, "scripts", "wheel_pythons.py"), version],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


class Venv:
    """A fresh `python -m venv`; cwd is its own folder, so the checkout is never importable.

    With `compiler=False` its commands run with no C or C++ compiler to be found (CC/CXX `false`, and
    gcc, cc, g++, c++, clang, clang++ on PATH are `false` too): an install that needed one fails."""

    def __init__(self, path, python=sys.executable, compiler=True):
        self.path = path
        subprocess.run([str(python), "-m", "venv", str(path)], check=True, timeout=300)
        self.bin = path / "bin"
        self.env = {}
        if not compiler:
            nocc = path / "no-compiler"
            nocc.mkdir()
            for name in ("gcc", "cc", "g++", "c++", "clang", "clang++"):
                (nocc / name).symlink_to(shutil.which("false"))
            self.env = {"CC": "false", "CXX": "false", "PATH_FIRST": str(nocc)}

    def run(self, *cmd, cwd=None, **env):
        env = {**self.env, **env}
        first = [p for p in (env.pop("PATH_FIRST", None), str(self.bin)) if p]
        return run(cmd, cwd or self.path, PATH=os.pathsep.join([*first, os.environ.get("PATH", "")]), **env)

    def python(self, code):
        return self.run(self.bin / "python", "-c", code).stdout

    def pip_install(self, *args):
        return self.run(self.bin / "python", "-m", "pip", "install", "-q", *args)

    def console_scripts(self):
        """name -> [target, distribution] of every proton* console script the environment declares."""
        code = ("import json, importlib.metadata as m; print(json.dumps({e.name: [e.value, e.dist.name] for e in "
                "m.entry_points(group='console_scripts') if e.name.startswith('proton')}))")
        return json.loads(self.python(code))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheelhouse, tools venv, Triton's cp311 wheel): the script run once, as a release would, in its own
    environment, for the two Python versions tested (a release builds 3.10-3.13)."""
    reason = unreachable_index()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("packaging")
    tools = Venv(tmp / "tools")
    tools.pip_install("twine", "auditwheel")
    out = tmp / "wheelhouse"
    if os.environ.get("PROTON_PACKAGING_WHEELHOUSE"):  # a wheelhouse this test built before (to rerun the checks)
        shutil.copytree(os.environ["PROTON_PACKAGING_WHEELHOUSE"], out)
    else:
        # A dev shell's test-bindings switch: the script must build the release wheel without it.
        run(["bash", os.path.join(ROOT, "scripts", "build_wheels.sh"), out], ROOT, timeout=2400,
            PYTHON=str(tools.bin / "python"), SKBUILD_CMAKE_DEFINE="PROTON_CUPTI_TESTING=ON",
            PROTON_WHEEL_PYTHONS=" ".join(PYTHONS), PROTON_WHEEL_TORCH=TORCH_MINOR or "")
    tools.run(tools.bin / "python", "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
              "--python-version", "3.11", "-d", tmp / "triton", TRITON)
    return out, tools, next((tmp / "triton").glob("triton-*.whl"))


@pytest.fixture(scope="module", params=PYTHONS)
def ours(request, built, tmp_path_factory):
    """A venv of that Python with proton-profiler[cupti,viewer,nvtx,frameworks,roctracer] from the wheelhouse, installed
    where no compiler can be found and our distributions only as wheels."""
    venv = Venv(tmp_path_factory.mktemp(f"ours{request.param}") / "venv", interpreter(request.param), compiler=False)
    venv.pip_install("--find-links", built[0], "--only-binary", ",".join(DISTS),
                     "proton-profiler[cupti,viewer,nvtx,frameworks,roctracer]")
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


def wheel_tags(wheel):
    """(python tag, abi tag, platform tag) of a wheel's file name."""
    return tuple(wheel.name[:-len(".whl")].split("-")[-3:])


def test_twine_check_strict_on_every_file(built):
    out, tools, _ = built
    files = sorted(f for f in out.iterdir() if f.name.endswith((".whl", ".tar.gz")))
    dists = ["proton_profiler", *(f"proton_profiler_{p}" for p in PLUGINS)]
    wheels = dists + [d for d in NATIVE for _ in PYTHONS[1:]]  # one wheel a Python version where native
    assert sorted(f.name.split("-")[0] for f in files) == sorted(dists + wheels)  # and an sdist each
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
        if dist in NATIVE:  # compiled: one CPython version, one manylinux tag, its module inside
            python, abi, platform = wheel_tags(wheel)
            assert python == abi and python in {f"cp{v.replace('.', '')}" for v in PYTHONS}, wheel.name
            assert platform.startswith("manylinux"), wheel.name  # manylinux1_x86_64 (glibc 2.5) where it can
            suffix = f".cpython-{python[2:]}-x86_64-linux-gnu.so"
            assert NATIVE[dist].replace(".", "/") + suffix in names, (wheel.name, names)
            if dist == "proton_profiler_cupti":  # the injection entry points for programs without Python
                assert "proton_cupti/libproton_inject.so" in names, (wheel.name, names)
        else:  # the torch plugin too where no torch gave it an observer to carry
            assert wheel_tags(wheel) == ("py3", "none", "any"), wheel.name


def test_native_wheels_need_no_newer_glibc_than_tritons(built):
    """auditwheel show, run here on every native wheel (and its report beside the wheelhouse), names a
    manylinux tag no newer than Triton's floor, and no versioned glibc symbol past it."""
    out, tools, _ = built
    wheels = [w for w in out.glob("*.whl") if w.name.split("-")[0] in NATIVE]
    assert len(wheels) == len(NATIVE) * len(PYTHONS)
    assert " ".join((out / "auditwheel.txt").read_text().split()).count("is consistent") == len(wheels)
    for wheel in wheels:
        shown = " ".join(tools.run(tools.bin / "auditwheel", "show", wheel).stdout.split())
        # The torch observers link libc10 and libtorch_cpu, which are not on this system (the user's torch has
        # them): auditwheel calls that wheel linux_x86_64, and its symbol versions' tag is the glibc floor.
        tag = re.search(r'platform tag(?::| to) "manylinux_(\d+)_(\d+)_x86_64"', shown)
        assert tag and tuple(map(int, tag.groups())) <= GLIBC_FLOOR, (wheel.name, shown)
        versions = [tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", shown)]
        assert max(versions, default=(0,)) <= GLIBC_FLOOR, (wheel.name, shown)  # frameworks' needs none
        if wheel.name.split("-")[0] != "proton_profiler_torch":  # that one shares libstdc++ with torch
            assert "libstdc++" not in shown, (wheel.name, shown)  # zig's libc++ is linked in


def test_installs_without_a_compiler_profiles_and_views(ours, tmp_path):
    profile_and_view(ours, tmp_path)
    # Every compiled module came in a wheel and loads (no build ran: there was no compiler to run); the torch
    # observer needs torch's libraries, and is loaded by the torch test below.
    modules = sorted(m for d, m in NATIVE.items() if d != "proton_profiler_torch")
    loaded = ours.python(f"import importlib, json; print(json.dumps([importlib.import_module(m).__name__ for m in {modules!r}]))")
    assert json.loads(loaded) == modules
    code = "import proton_cupti._cupti as c; print([n for n in dir(c) if n.startswith('_test_')])"
    assert ours.python(code).strip() == "[]"  # release build: no test bindings
    # The injection library came with it and names what it exports (no compiler was there to build it).
    code = ("import ctypes, proton_cupti.injected as i; lib = ctypes.CDLL(i.library_path()); "
            "print(bool(lib.InitializeInjection), bool(lib.InitializeInjectionNvtx2))")
    assert ours.python(code).strip() == "True True"
    listing = ours.run("proton-profile", "plugins").stdout
    assert any(line.split()[:2] == ["cupti", "proton-profiler-cupti"] for line in listing.splitlines()), listing


def test_a_compiler_is_really_hidden(ours, tmp_path):
    """The venv's no-compiler setting holds: building a C file there fails (so the installs above used wheels)."""
    (tmp_path / "x.c").write_text("int main(void) { return 0; }\n")
    for compiler in ("cc", "gcc", "c++"):
        proc = subprocess.run([compiler, "x.c"], cwd=tmp_path, capture_output=True,
                              env=clean_env(PATH=os.pathsep.join([ours.env["PATH_FIRST"], os.environ["PATH"]])))
        assert proc.returncode != 0


def test_triton_installed_after_ours_leaves_both_commands(ours, built, tmp_path):
    python = ours.python("import sys; print('%d.%d' % sys.version_info[:2])").strip()
    if python == "3.11":
        triton = built[2]
    else:
        ours.run(ours.bin / "python", "-m", "pip", "download", "-q", "--no-deps", "-d", tmp_path, TRITON)
        triton = next(tmp_path.glob("triton-*.whl"))
    ours.pip_install("--no-deps", triton)
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


@pytest.mark.skipif(TORCH is None, reason="no torch here to take the version of (tests install a CPU torch)")
def test_torch_observer_loads_without_a_compiler_and_the_rebuild_hint_builds_one(built, tmp_path):
    """The wheel's prebuilt observer for the installed torch's minor version loads where no compiler is; where
    the wheel has none for that torch, the line hook="torch" prints names a command that, run as printed (the
    wheelhouse standing in for the index), compiles one against the installed torch."""
    venv = Venv(tmp_path / "venv", interpreter("3.11"), compiler=False)
    try:  # only this exact version: a CPU build, never a CUDA torch
        venv.pip_install("--only-binary", "torch", f"torch=={TORCH}")
    except AssertionError as exc:
        pytest.skip(f"torch {TORCH} not installable from the index here ({str(exc).splitlines()[-1][:200]})")
    venv.pip_install("--find-links", built[0], "--only-binary", ",".join(DISTS), "proton-profiler[frameworks]")
    loaded = venv.python("import proton_torch.native as n; m = n.load(); print(m.__name__, m.BUILT_FOR, m.__file__)")
    name, built_for, path = loaded.split()
    assert (name, built_for.split("+")[0].rsplit(".", 1)[0]) == ("proton_torch._C", TORCH_MINOR), loaded
    assert f"/_observers/torch{TORCH_MINOR.replace('.', '_')}/" in path, loaded
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import torch, proton_core as proton
        proton.start("t", hook="torch")
        torch.ones(4).add(1.0)
        proton.finalize()
    """))
    venv.run(venv.bin / "python", "prog.py", cwd=tmp_path, PROTON_BACKEND="host")
    assert (tmp_path / "t.hatchet").is_file()

    # A torch minor version the wheel has no observer for: the same as removing the one it has.
    shutil.rmtree(os.path.dirname(os.path.dirname(path)))
    why = "import proton_torch.native as n\ntry:\n    n.load()\nexcept n.NativeUnavailable as e:\n    print(e)"
    line = venv.python(why).strip()
    assert f"observer for torch {TORCH_MINOR} does not load" in line and "\n" not in line, line
    command = line[line.index("pip install "):line.index(" (a C++ compiler")]
    venv.run("bash", "-c", command, PIP_FIND_LINKS=str(built[0]), CC="gcc", CXX="g++", PATH_FIRST="")
    loaded = venv.python("import torch, proton_torch.native as n, proton_torch._build_info as b; "
                         "print(n.load().__name__, b.TORCH_VERSION == torch.__version__)")
    assert loaded.split() == ["proton_torch._C", "True"], loaded
