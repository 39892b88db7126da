"""Upstream's Python viewer API (``triton.profiler.viewer``: get_raw_metrics, derive_metrics, ...) on proton_core.

What upstream's ``test_viewer.py`` asserts, checked on small profiles of our own (tests/data/viewer_api/):
the metadata scope hidden, inclusive and exclusive metrics told apart, derived metrics and their
column names, frame-name formats, include/exclude filters, the least time at the device's peak by
upstream's formulas (written out here, apart from proton_core.viewer.peaks), and the import alias
serving these names as ``triton.profiler.viewer``.
"""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("hatchet")

from proton_core.viewer import upstream_api as api  # noqa: E402
from proton_core.viewer.errors import ViewerError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "viewer_api")
NVIDIA, AMD, SCOPES, FRAMES = (os.path.join(DATA, f"{n}.json") for n in ("nvidia", "amd", "scopes", "frames"))

T = 1e12
#: upstream's peak 8-bit FLOP/s per device of the fixtures (specs.py's formulas, by hand)
SM90_FP8 = 1513 * T * (132 / 114) * (1980000 / 1755000)
SM100_FP8 = 148 * 16384 * 1965000 * 1e3
SM89_FP8 = 330.3 * T
#: CUDA bandwidth: double data rate x bus bytes x memory clock; AMD: a constant per architecture
SM90_BW, SM100_BW, SM89_BW = (2 * bus / 8 * clock * 1e3 for bus, clock in ((5120, 2619000), (8192, 4000000),
                                                                          (384, 10501000)))
AMD_FP8 = {"gfx90a": 1024 * 110 * 1700000 * 1e3, "gfx942": 4096 * 304 * 2100000 * 1e3,
           "gfx950": 8192 * 256 * 2400000 * 1e3}
AMD_BW = {"gfx90a": 3.2 * T, "gfx942": 5.3 * T, "gfx950": 8.0 * T}


def _row(gf, name):
    frame = gf.dataframe
    rows = frame[frame["name"] == name]
    assert len(rows) == 1, f"{name}: {len(rows)} rows"
    return rows.iloc[0]


def _names(gf):
    return gf.dataframe["name"].tolist()


def test_raw_metrics_of_an_open_file_a_path_and_a_stream():
    with open(SCOPES) as f:
        gf, inclusive, exclusive, devices = api.get_raw_metrics(f)
    assert sorted(inclusive) == ["bytes", "count", "time (ns)"]
    assert exclusive == ["cpu_time (ns)"]  # upstream writes it on scopes only: never summed
    assert devices["CUDA"]["0"]["arch"] == "80"
    assert not any(c.endswith("(inc)") for c in gf.dataframe.columns)  # read() computes those
    with open(SCOPES) as f:
        text = f.read()
    for source in (SCOPES, io.StringIO(text)):
        again, inc, exc, _ = api.get_raw_metrics(source)
        assert (sorted(inc), exc, _names(again)) == (sorted(inclusive), exclusive, _names(gf))


def test_launch_metadata_scope_and_what_it_holds_are_hidden():
    gf, _, _, _ = api.read(SCOPES)
    names = _names(gf)
    assert "__proton_launch_metadata" not in names and "metadata_kernel" not in names
    assert {"train_step", "forward", "matmul_kernel", "loss_kernel"} <= set(names)
    assert _row(gf, "ROOT")["time (ns) (inc)"] == 2000 + 500 + 1500  # the hidden kernel's 7000 not counted


def test_exclusive_metric_stays_per_node_and_sorts_its_scope_first():
    gf, inclusive, exclusive, devices = api.read(SCOPES)
    columns = api.derive_metrics(gf, ["cpu_time/us"], inclusive, exclusive, devices)
    assert columns == ["cpu_time/us (inc)"]
    gf = api.filter_frames(gf, None, None, None, columns[0])
    top = gf.dataframe.sort_values(by=columns, ascending=False)["name"].tolist()
    assert top[:3] == ["train_step", "forward", "eval_step"]
    assert _row(gf, "train_step")["cpu_time/us (inc)"] == pytest.approx(9.0)  # its own 9000 ns, not summed


def test_time_derivations_and_percent_of_the_root():
    gf, inclusive, exclusive, devices = api.read(NVIDIA)
    columns = api.derive_metrics(gf, ["time/s", "time/ms", "time/us", "time/ns", "time/%", "avg_time/us"],
                                 inclusive, exclusive, devices)
    assert columns == ["time/s (inc)", "time/ms (inc)", "time/us (inc)", "time/ns (inc)", "time/% (inc)",
                       "avg_time/us (inc)"]
    assert all(c in gf.inc_metrics for c in columns)
    names = ["ROOT", "attention", "flash_fwd", "gemm_fp8", "copy"]

    def values(column):
        return [_row(gf, name)[column] for name in names]

    np.testing.assert_allclose(values("time/ns (inc)"), [550000, 400000, 400000, 100000, 50000])
    np.testing.assert_allclose(values("time/ms (inc)"), [0.55, 0.4, 0.4, 0.1, 0.05])
    np.testing.assert_allclose(values("time/s (inc)"), [5.5e-4, 4e-4, 4e-4, 1e-4, 5e-5])
    np.testing.assert_allclose(values("time/% (inc)"), [100, 400 / 5.5, 400 / 5.5, 100 / 5.5, 50 / 5.5])
    # average over the inclusive count: the root's 550 us over 7 launches
    np.testing.assert_allclose(values("avg_time/us (inc)"), [550 / 7, 100, 100, 50, 50])


def test_rates_divide_the_inclusive_metric_by_time():
    gf, inclusive, exclusive, devices = api.read(NVIDIA)
    columns = api.derive_metrics(gf, ["gbyte/s", "tflop16/s", "flop8/s"], inclusive, exclusive, devices)
    assert columns == ["gbyte/s (inc)", "tflop16/s (inc)", "flop8/s (inc)"]
    np.testing.assert_allclose(_row(gf, "ROOT")["gbyte/s (inc)"], 11e8 / 550e-6 / 1e9)
    np.testing.assert_allclose(_row(gf, "attention")["tflop16/s (inc)"], 2e11 / 400e-6 / 1e12)
    np.testing.assert_allclose(_row(gf, "gemm_fp8")["flop8/s (inc)"], 3e11 / 100e-6)


def test_percent_of_an_exclusive_metric_is_of_its_sum_and_a_raw_name_is_its_column():
    gf, inclusive, exclusive, devices = api.read(SCOPES)
    columns = api.derive_metrics(gf, ["cpu_time/%", "Time", "cpu_time"], inclusive, exclusive, devices)
    assert columns == ["cpu_time/%", "time (ns) (inc)", "cpu_time (ns)"]
    assert "cpu_time/%" in gf.exc_metrics
    np.testing.assert_allclose(_row(gf, "train_step")["cpu_time/%"], 9000 / 13000 * 100)


def test_a_metric_the_profile_lacks_is_an_error_upstream_and_ours_catch():
    gf, inclusive, exclusive, devices = api.read(FRAMES)
    for metric in ("flops", "gflop8/s", "cpu_time/ns"):
        with pytest.raises(RuntimeError, match="not in this profile"):
            api.derive_metrics(gf, [metric], inclusive, exclusive, devices)
    with pytest.raises(ViewerError):
        api.derive_metrics(gf, ["time/fortnight"], inclusive, exclusive, devices)


def test_min_time_at_nvidia_peaks_by_upstreams_formulas():
    gf, _, _, devices = api.read(NVIDIA)
    flops = api.get_min_time_flops(gf.dataframe, devices)["min_time"]
    bytes_ = api.get_min_time_bytes(gf.dataframe, devices)["min_time"]
    by_name = dict(zip(_names(gf), zip(flops, bytes_)))
    assert by_name["ROOT"] == (0, 0) and by_name["attention"] == (0, 0)  # no device: nothing
    np.testing.assert_allclose(by_name["flash_fwd"], (2e11 / (SM90_FP8 / 2), 4e8 / SM90_BW))
    np.testing.assert_allclose(by_name["gemm_fp8"], (3e11 / SM100_FP8, 2e8 / SM100_BW))
    np.testing.assert_allclose(by_name["copy"], (0, 5e8 / SM89_BW))


def test_min_time_at_amd_peaks_by_upstreams_formulas():
    gf, _, _, devices = api.read(AMD)
    flops = api.get_min_time_flops(gf.dataframe, devices)["min_time"]
    bytes_ = api.get_min_time_bytes(gf.dataframe, devices)["min_time"]
    got = dict(zip(_names(gf), zip(flops, bytes_)))
    for kernel, arch, fl, by in (("mi250_gemm", "gfx90a", 6e10, 9e8), ("mi300_gemm", "gfx942", 8e11, 6e8),
                                 ("mi355_gemm", "gfx950", 2e12, 3e9)):
        np.testing.assert_allclose(got[kernel], (fl / AMD_FP8[arch], by / AMD_BW[arch]), err_msg=kernel)


def test_util_is_the_bound_side_over_time_and_nan_off_device():
    gf, inclusive, exclusive, devices = api.read(NVIDIA)
    assert api.derive_metrics(gf, ["util"], inclusive, exclusive, devices) == ["util"]
    assert "util" in gf.exc_metrics
    util = dict(zip(_names(gf), gf.dataframe["util"]))
    assert np.isnan(util["ROOT"]) and np.isnan(util["attention"])
    expected = {
        "flash_fwd": max(2e11 / (SM90_FP8 / 2), 4e8 / SM90_BW) / 400e-6,
        "gemm_fp8": max(3e11 / SM100_FP8, 2e8 / SM100_BW) / 100e-6,
        "copy": (5e8 / SM89_BW) / 50e-6,
    }
    for kernel, value in expected.items():
        np.testing.assert_allclose(util[kernel], value, rtol=1e-9, err_msg=kernel)


@pytest.mark.parametrize("option, expected", [
    ("full", "/srv/app/model.py:42@forward"),
    (None, "/srv/app/model.py:42@forward"),
    ("file_function_line", "model.py:42@forward"),
    ("function_line", "42@forward"),
    ("file_function", "model.py@forward"),
])
def test_format_frames(option, expected):
    gf, _, _, _ = api.read(FRAMES)
    gf = api.format_frames(gf, option)
    assert _names(gf).count(expected) == 1
    assert {"ROOT", "layer0", "layer1"} <= set(_names(gf))  # names without a path stay as they are


def test_include_keeps_the_paths_through_a_match():
    gf, _, _, _ = api.read(FRAMES)
    kept = api.filter_frames(gf, include=".*layer0.*")
    assert _names(kept) == ["ROOT", "layer0", "/srv/app/model.py:42@forward"]
    assert _row(kept, "ROOT")["time (ns) (inc)"] == 3000  # squashed: inclusive values recomputed


def test_exclude_drops_a_match_and_what_is_under_it():
    gf, _, _, _ = api.read(FRAMES)
    kept = api.filter_frames(gf, exclude=".*layer0.*")
    assert _names(kept) == ["ROOT", "layer1", "/srv/app/loss.py:7@compute"]


def test_threshold_drops_frames_below_it_on_the_metric():
    gf, columns = api.parse(["time/us"], NVIDIA, threshold=120)
    assert columns == ["time/us (inc)"]
    assert set(_names(gf)) == {"ROOT", "attention", "flash_fwd"}
    with pytest.raises(ViewerError):
        api.filter_frames(gf, threshold=1)


def test_parse_derives_and_registers_its_columns():
    gf, columns = api.parse(["time/s", "util", "bytes"], NVIDIA)
    assert columns == ["time/s (inc)", "util", "bytes (inc)"]
    for column in columns:
        assert column in gf.inc_metrics or column in gf.exc_metrics


def test_diff_of_a_profile_with_itself_is_zero():
    gf, columns = api.parse(["time/s"], NVIDIA)
    diff = api.apply_diff_profile(gf, columns, NVIDIA, ["time/s"], None, None, None)
    assert "time/s (inc)" in diff.dataframe.columns
    np.testing.assert_allclose(diff.dataframe["time/s (inc)"], 0)


def test_show_metrics_lists_both_kinds(capsys):
    api.show_metrics(SCOPES)
    out = capsys.readouterr().out
    assert "Available inclusive metrics:" in out and "- cpu_time" in out.split("exclusive")[1]


def test_a_profile_our_writer_wrote(tmp_path, fake):
    import proton_core as proton

    proton.start(str(tmp_path / "ours"), backend="fake")
    with proton.scope("outer", metrics={"bytes": 2e6, "wall (exc)": 5.0}):
        fake.launch("k1", 3000)
        fake.launch("k2", 500)
        fake.launch("k2", 500)
    proton.finalize()
    gf, inclusive, exclusive, devices = api.read(tmp_path / "ours.hatchet")
    assert sorted(inclusive) == ["bytes", "count", "time (ns)"] and exclusive == ["wall (exc)"]
    columns = api.derive_metrics(gf, ["avg_time/ns", "wall", "gbyte/s"], inclusive, exclusive, devices)
    assert columns == ["avg_time/ns (inc)", "wall (exc)", "gbyte/s (inc)"]
    assert _row(gf, "k2")["avg_time/ns (inc)"] == pytest.approx(500)
    assert _row(gf, "outer")["wall (exc)"] == 5.0 and np.isnan(_row(gf, "ROOT")["wall (exc)"])  # never summed
    assert _row(gf, "outer")["gbyte/s (inc)"] == pytest.approx(2e6 / 4000e-9 / 1e9)


ALIASED = textwrap.dedent('''
    import proton_core.viewer
    from proton_core.viewer import upstream_api
    from triton.profiler.viewer import (get_min_time_flops, get_min_time_bytes, get_raw_metrics, format_frames,
                                        derive_metrics, filter_frames, parse, read)
    import triton.profiler.viewer as viewer


    def test_upstream_names_are_the_upstream_api():
        assert get_raw_metrics is upstream_api.get_raw_metrics and parse is upstream_api.parse
        assert read is upstream_api.read  # a name both have means what it means upstream
        assert viewer.main is proton_core.viewer.main and viewer.load_graphframe is proton_core.viewer.load_graphframe


    def test_upstream_style_call(tmp_path):
        gf, columns = parse(["time/s"], {path!r})
        assert columns == ["time/s (inc)"] and columns[0] in gf.inc_metrics
''')


def test_alias_serves_the_api_as_triton_profiler_viewer(tmp_path):
    (tmp_path / "test_aliased.py").write_text(ALIASED.format(path=NVIDIA))
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p upstream_alias -p no:cacheprovider\n")
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_aliased.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
