"""The rank-merge benchmark runs (2 ranks of 2000 nodes, as CI can afford) and its files merge as promised."""

from benchmarks import merge_ranks  # the repository root is on sys.path under `python3 -m pytest`


def test_benchmark_runs_small(capsys):
    assert merge_ranks.main(["--ranks", "2", "--nodes", "2000"]) == 0
    out = capsys.readouterr().out
    assert "| 2 | " in out and "budget" in out


def test_straggler_tops_the_imbalance_list(tmp_path, capsys):
    from proton_core import viewer

    merge_ranks.generate(str(tmp_path), 3, 3000)
    assert viewer.main(["--sort", "imbalance", str(tmp_path)]) == 0
    first = capsys.readouterr().out.splitlines()[2]
    assert "model.layers.7" in first and first.split()[5] == "1"  # rank 1 is 3x slower there
