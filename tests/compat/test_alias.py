"""The import alias of scripts/upstream_tests.sh: ``import triton.profiler`` gives proton_core (issue 44 item 4).

Run in a child process: the alias replaces ``triton`` in ``sys.modules``, which the rest of the suite must not see.
"""

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

UPSTREAM_STYLE = textwrap.dedent('''
    import pytest
    import proton_core
    import triton.profiler as proton
    import triton.profiler.mode as mode
    import triton.profiler.viewer as viewer
    from triton.profiler.hooks.hook import HookManager
    from triton.profiler.hooks.launch import COMPUTE_METADATA_SCOPE_NAME
    from triton.profiler.state import enter_state, exit_state
    from triton._internal_testing import is_hip


    def test_modules_are_ours():
        assert proton is proton_core and mode is proton_core.mode
        assert proton.context is proton_core.context and enter_state is proton_core.enter_state
        assert viewer.load_graphframe is proton_core.viewer.load_graphframe
        assert COMPUTE_METADATA_SCOPE_NAME == "__proton_launch_metadata" and is_hip() is False


    def test_fresh_knobs_switch_profiling_off(tmp_path, fresh_knobs):
        fresh_knobs.proton.disable = True
        assert proton.start(str(tmp_path / "off")) is None
        proton.finalize()
        assert not (tmp_path / "off.hatchet").exists()


    def test_knobs_reset_after_the_test(tmp_path):
        assert proton.start(str(tmp_path / "on")) == 0
        proton.finalize()
        assert (tmp_path / "on.hatchet").exists()


    def test_a_name_ours_lacks_fails_alone():
        from triton.profiler.viewer import upstream_only_name  # upstream's viewer functions are imported so

        with pytest.raises(NotImplementedError, match="has no upstream_only_name"):
            upstream_only_name()
        with pytest.raises(NotImplementedError, match="upstream's internal"):
            HookManager.register(None, 0)


    def test_the_viewer_bound_by_import_as_is_upstreams():
        import triton.profiler.viewer as viewer  # binds triton.profiler's attribute (test_profile.py's import)

        assert callable(viewer.get_raw_metrics) and viewer.read.__module__.endswith("upstream_api")
''')


def test_upstream_style_tests_run_against_proton_core(tmp_path):
    (tmp_path / "test_upstream_style.py").write_text(UPSTREAM_STYLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p upstream_alias -p no:cacheprovider\n")
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), PROTON_BACKEND="")
    env.pop("TRITON_PROTON_DISABLE", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "test_upstream_style.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout
