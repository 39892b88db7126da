"""The third-party examples in docs/examples (a sink and a backend) load through the real entry-point path,
run whole sessions, pass the backend contract, use only the public contract, and docs/plugins.md shows
their code as it is."""

import ast
import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import proton_core.plugin_api
from proton_core.testing import BackendContract, Driver

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "docs", "examples")
GUIDE = os.path.join(ROOT, "docs", "plugins.md")


def example_dirs():
    return sorted(os.path.join(EXAMPLES, d) for d in os.listdir(EXAMPLES)
                  if os.path.isfile(os.path.join(EXAMPLES, d, "pyproject.toml")))


def example_sources():
    return [os.path.join(d, f) for d in example_dirs() for f in sorted(os.listdir(d)) if f.endswith(".py")]


def install_as_distribution(example, site):
    """What ``pip install <example>`` leaves that Proton reads: the modules on ``site`` (a sys.path entry)
    and a ``.dist-info`` with the name, version and ``proton`` entry points of the example's pyproject.toml."""
    project = tomllib.load(open(os.path.join(example, "pyproject.toml"), "rb"))
    meta, modules = project["project"], project["tool"]["setuptools"]["py-modules"]
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    points = "".join(f"{name} = {target}\n" for name, target in meta["entry-points"]["proton"].items())
    (info / "entry_points.txt").write_text(f"[proton]\n{points}")
    for module in modules:
        shutil.copy(os.path.join(example, f"{module}.py"), site)
    return meta["name"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Every example installed as a distribution into one site folder."""
    site = tmp_path_factory.mktemp("examples") / "site"
    site.mkdir()
    names = [install_as_distribution(example, site) for example in example_dirs()]
    assert {"proton-csv-sink", "proton-cpu-timer"} <= set(names)
    return site


def run_python(code, site, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROTON_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(site), env.get("PYTHONPATH", "")] if p)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_the_plugins_command_lists_both_examples(site, tmp_path):
    out = run_python("from proton_core.cli import main; main(['plugins'])", site, tmp_path)
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert rows["csv_sink"][1:5] == ["proton-csv-sink", "0.1.0", "sink", "csv"]
    assert rows["cpu_timer"][1:5] == ["proton-cpu-timer", "0.1.0", "backend", "cpu_timer"]
    assert rows["csv_sink"][5] == rows["cpu_timer"][5] == "loaded"


SESSION = """
    import time
    import proton_core as proton
    from proton_cpu_timer import kernel

    @kernel("decode")
    def decode(n):
        return n + 1

    proton.start("run", backend="cpu_timer", data={data!r}, output_format={fmt!r})
    with proton.scope("step", {{"bytes": 12}}):
        with kernel("tokenize"):
            time.sleep(0.002)
        assert decode(1) == 2 and decode(2) == 3
    with kernel("loose"):
        pass
    proton.deactivate()
    with kernel("unseen"):
        pass
    proton.activate()
    print(proton.finalize())
"""


def test_the_backend_runs_a_session_into_hatchet(site, tmp_path):
    out = run_python(SESSION.format(data="tree", fmt="hatchet"), site, tmp_path)
    assert out.stdout.strip() == "['run.hatchet']" and out.stderr == ""
    root, devices = json.loads((tmp_path / "run.hatchet").read_text())
    children = {c["frame"]["name"]: c for c in root["children"]}
    assert sorted(children) == ["loose", "step"]  # "unseen" ran while deactivated (epoch 0)
    step = {c["frame"]["name"]: c["metrics"] for c in children["step"]["children"]}
    assert children["step"]["metrics"]["bytes"] == 12
    assert step["tokenize"]["count"] == 1 and step["tokenize"]["time (ns)"] >= 2_000_000
    assert step["decode"]["count"] == 2 and 0 < step["decode"]["time (ns)"] < step["tokenize"]["time (ns)"]
    assert step["decode"]["device_type"] == "CPU" and step["decode"]["device_id"] == "0"
    assert children["loose"]["metrics"]["count"] == 1


def test_the_backend_and_the_sink_together(site, tmp_path):
    """One session through both third-party plugins: cpu_timer records, csv writes."""
    run_python(SESSION.format(data="tree", fmt="csv"), site, tmp_path)
    rows = {row["path"]: row for row in csv.DictReader(open(tmp_path / "run.csv", newline=""))}
    assert sorted(rows) == ["loose", "step", "step/decode", "step/tokenize"]
    assert rows["step"]["bytes"] == "12" and rows["step/decode"]["count"] == "2"
    assert int(rows["step/tokenize"]["time (ns)"]) >= 2_000_000


def test_the_backend_traces_one_event_per_kernel(site, tmp_path):
    out = run_python(SESSION.format(data="trace", fmt="chrome_trace"), site, tmp_path)
    assert out.stdout.strip() == "['run.chrome_trace']"
    events = json.loads((tmp_path / "run.chrome_trace").read_text())["traceEvents"]
    kernels = sorted(e["name"] for e in events if e["ph"] == "X" and e.get("cat") != "scope"
                     and e["name"] in ("tokenize", "decode", "loose", "unseen"))
    assert kernels == ["decode", "decode", "loose", "tokenize"]


def test_the_sink_writes_a_host_session(site, tmp_path):
    out = run_python("""
        import proton_core as proton
        proton.start("prof", backend="host", output_format="csv")
        with proton.scope("outer", {"bytes": 12}):
            with proton.scope("inner", {"flops16": 3}):
                pass
        print(proton.finalize())
    """, site, tmp_path)
    assert out.stdout.strip() == "['prof.csv']"
    assert (tmp_path / "prof.csv").read_text().splitlines() == [
        "path,bytes,count,flops16,time (ns)", "outer,12,0,,0", "outer/inner,,0,3,0"]


# ---------------------------------------------------------------- the backend contract ----
def load_example(module):
    path = os.path.join(EXAMPLES, module.replace("_", "-"), f"{module}.py")
    spec = importlib.util.spec_from_file_location(f"example_{module}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


class CpuTimerDriver(Driver):
    def __init__(self, module):
        self.backend = module.CpuTimerBackend()

    def launch(self, kernel, duration_ns=1000, device=0):
        start = 1_000_000
        self.backend.launch(kernel, start, start + duration_ns, device)


class TestCpuTimerBackend(BackendContract):
    """The example backend passes the suite every backend passes (docs/plugins.md says to run it)."""

    @pytest.fixture(scope="class")
    def module(self):
        return load_example("proton_cpu_timer")

    @pytest.fixture
    def driver(self, module):
        return CpuTimerDriver(module)


# ------------------------------------------------------------------- the import boundary ----
#: module -> the names an example may import from it
ALLOWED = {"proton_core": {"hookimpl"}, "proton_core.plugin_api": set(proton_core.plugin_api.__all__)}


def boundary_violations(path):
    """``line: what`` for every import of proton_core in ``path`` outside plugin_api and hookimpl."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "proton_core"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "proton_core":
            found += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names
                      if a.name not in ALLOWED.get(node.module, set())]
    return found


def test_the_examples_import_only_the_public_contract():
    sources = example_sources()
    assert {os.path.basename(p) for p in sources} >= {"proton_csv_sink.py", "proton_cpu_timer.py"}
    assert {p: boundary_violations(p) for p in sources} == {p: [] for p in sources}


def test_the_boundary_check_catches_an_internal(tmp_path):
    path = tmp_path / "leaky.py"
    path.write_text("import proton_core\nfrom proton_core.session import MANAGER\nfrom proton_core import hookimpl, "
                    "scope\nfrom proton_core.plugin_api import Backend\n")
    assert boundary_violations(path) == ["1: import proton_core", "2: proton_core.session.MANAGER",
                                         "3: proton_core.scope"]


# ----------------------------------------------------------------------- the guide ----
def quoted_blocks():
    """(example file, code) for every fenced block of docs/plugins.md whose first line names an example file."""
    text = open(GUIDE, encoding="utf-8").read()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first, _, rest = block.partition("\n")
        match = re.fullmatch(r"# (docs/examples/\S+\.py)", first.strip())
        if match:
            yield match.group(1), rest


def test_the_guide_quotes_each_example_as_it_is():
    blocks = list(quoted_blocks())
    assert {path for path, _ in blocks} == {"docs/examples/proton-csv-sink/proton_csv_sink.py",
                                            "docs/examples/proton-cpu-timer/proton_cpu_timer.py"}
    for path, code in blocks:
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        for part in code.split("\n...\n"):  # "..." alone on a line: lines left out
            assert part.strip("\n") in source, f"docs/plugins.md quotes {path} with lines it does not have:\n{part}"


def api_table_names():
    """The names the guide's table of ``proton_core.plugin_api`` lists (parenthesised remarks left out)."""
    text = open(GUIDE, encoding="utf-8").read()
    section = text.split("## The public plugin API", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or set(cells[2].strip()) <= {"-"} or cells[1].strip() == "for":
            continue
        cell = cells[2]
        while re.search(r"\([^()]*\)", cell):
            cell = re.sub(r"\([^()]*\)", "", cell)
        names |= set(re.findall(r"`([A-Za-z_]\w*)`", cell))
    return names


def test_the_guide_lists_only_names_the_plugin_api_has_and_mentions_all_of_them():
    listed = api_table_names()
    assert {"Backend", "Batch", "ContextSource", "Profile", "hookimpl", "ProtonError"} <= listed
    assert sorted(n for n in listed if not hasattr(proton_core.plugin_api, n)) == []
    mentioned = set(re.findall(r"`([A-Za-z_]\w*)", open(GUIDE, encoding="utf-8").read()))
    assert sorted(set(proton_core.plugin_api.__all__) - mentioned) == []
