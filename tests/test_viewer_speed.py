"""The viewer speed benchmark runs (at 10 000 nodes, as CI can afford); the figures are in docs/performance.md."""

import json


def load_benchmark():
    from benchmarks import viewer_speed  # the repository root is on sys.path under `python3 -m pytest`

    return viewer_speed


def test_benchmark_runs_at_10k(tmp_path, capsys):
    bench = load_benchmark()
    assert bench.main(["--sizes", "10000", "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["case"] for r in rows] == [case for case, _, _ in bench.CASES]
    assert all(r["nodes"] >= 10000 and r["ours_s"] > 0 for r in rows)
    assert "| nodes | file MB | command |" in capsys.readouterr().out


def test_generated_profile_has_the_promised_shape(tmp_path):
    bench = load_benchmark()
    path = tmp_path / "p.hatchet"
    nodes = bench.generate(3000, str(path))
    from proton_core.viewer import table

    read = table.read(path)
    assert read.size == nodes >= 3000
    assert {"time (ns)", "count", "bytes", "flops16", "cpu_time (ns)"} <= set(read.metric_keys())
    order, parent = read.walk()
    depth = {read.root: 0}
    for i in order[1:]:
        depth[i] = depth[parent[i]] + 1
    assert max(depth.values()) == 6  # step / phase / layer / op / sub-op / kernel
