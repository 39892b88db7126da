"""load_graphframe: the default metric is a column the frame has, and user metrics get inclusive columns.

Before, hatchet's default ``"time"`` made ``gf.tree()`` raise KeyError on any
profile, and a Proton file (no zeros on its root) gave no inclusive column at all.
"""

import json

import pytest

import proton_core as proton
from proton_core.viewer import load_graphframe
from proton_core.viewer.graphframe import covering_metric

pytest.importorskip("hatchet.graphframe", reason="llnl-hatchet is not installed")


def by_name(gf, column):
    df = gf.dataframe
    return {name: value for name, value in zip(df["name"], df[column])}


@pytest.fixture
def host_step(tmp_path):
    """A host-only training step: cpu_time on five scopes, flops on two, as the issue's profile."""
    proton.start(str(tmp_path / "step"), backend="host")
    with proton.cpu_timed_scope("train_step"):
        with proton.cpu_timed_scope("forward"):
            with proton.scope("matmul", metrics={"flops": 1e9, "tokens (exc)": 4, "lr (pty)": 0.5}):
                pass
            with proton.cpu_timed_scope("relu"):
                pass
        with proton.cpu_timed_scope("backward"):
            with proton.scope("matmul_grad", metrics={"flops": 2e9, "tokens (exc)": 4}):
                pass
        with proton.cpu_timed_scope("optimizer"):
            pass
    proton.finalize()
    return tmp_path / "step.hatchet"


def test_host_only_profile_draws_cpu_time(host_step):
    gf = load_graphframe(host_step)
    assert gf.default_metric == "cpu_time (ns)"
    assert gf.default_metric in gf.dataframe.columns
    text = gf.tree()  # raised KeyError: 'time'
    for name in ("train_step", "forward", "relu", "backward", "optimizer"):
        assert name in text
    cpu = by_name(gf, "cpu_time (ns)")
    assert cpu["train_step"] > 0 and cpu["ROOT"] != cpu["ROOT"]  # cpu_time is never summed up the tree


def test_user_metrics_get_inclusive_columns(host_step):
    gf = load_graphframe(host_step)
    flops = by_name(gf, "flops (inc)")
    assert flops["ROOT"] == flops["train_step"] == 3e9
    assert flops["forward"] == 1e9 and flops["backward"] == 2e9
    assert "flops" in gf.exc_metrics and "flops (inc)" in gf.inc_metrics
    columns = set(gf.dataframe.columns)
    for per_node in ("cpu_time (ns)", "tokens (exc)", "lr (pty)"):  # shown per node, never summed
        assert per_node in columns and f"{per_node} (inc)" not in columns
    assert by_name(gf, "tokens (exc)")["forward"] != by_name(gf, "tokens (exc)")["forward"]


def test_gpu_profile_draws_inclusive_time(tmp_path, fake):
    proton.start(str(tmp_path / "gpu"), backend="fake")
    with proton.scope("fwd", metrics={"flops16": 4e6}):
        fake.launch("k1", 3000)
        fake.launch("k2", 1000)
    proton.finalize()
    gf = load_graphframe(tmp_path / "gpu.hatchet")
    assert gf.default_metric == "time (ns) (inc)"
    assert by_name(gf, "time (ns) (inc)")["fwd"] == 4000
    assert by_name(gf, "flops16 (inc)")["ROOT"] == 4e6
    assert "4000.000 fwd" in gf.tree()
    raw = load_graphframe(tmp_path / "gpu.hatchet", inclusive=False)
    assert raw.default_metric == "time (ns)" and "time (ns) (inc)" not in raw.dataframe.columns
    raw.tree()


def test_upstream_file_keeps_its_roots_word(tmp_path):
    """In upstream's file a key the root lacks is shown per node, as upstream's viewer shows it."""
    doc = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0, "flops": 0},
            "children": [{"frame": {"name": "s", "type": "function"}, "metrics": {"note_value": 3},
                          "children": [{"frame": {"name": "k", "type": "function"},
                                        "metrics": {"count": 1, "time (ns)": 50, "flops": 8, "note_value": 2,
                                                    "device_id": "0", "device_type": "CUDA"},
                                        "children": []}]}]},
           {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000}}}]
    path = tmp_path / "up.hatchet"
    path.write_text(json.dumps(doc))
    gf = load_graphframe(path)
    assert gf.default_metric == "time (ns) (inc)"
    assert by_name(gf, "time (ns) (inc)")["ROOT"] == 50 and by_name(gf, "flops (inc)")["s"] == 8
    assert "note_value (inc)" not in gf.dataframe.columns and by_name(gf, "note_value")["s"] == 3


def test_covering_metric_rule():
    counts = {"flops": 2, "count": 7, "cpu_time (ns)": 5, "time (ns)": 0}
    assert covering_metric(counts, counts.get) == "cpu_time (ns)"  # time with no value does not cover
    counts["time (ns)"] = 3
    assert covering_metric(counts, counts.get) == "time (ns)"
    assert covering_metric({"flops": 2, "bytes": 6}, {"flops": 2, "bytes": 6}.get) == "bytes"
    assert covering_metric([], {}.get) is None
