"""Where librocprofiler-sdk is looked for, in order, and the one line when it is nowhere."""

import os

from proton_roctracer import libsearch


def touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    return str(path)


def test_search_order(tmp_path):
    env_dir, rocm, opt, opt_old, site = (tmp_path / n for n in ("env", "rocm", "opt", "opt6", "site"))
    files = [
        touch(env_dir / "librocprofiler-sdk.so.1"),
        touch(rocm / "lib" / "librocprofiler-sdk.so"),
        touch(opt / "lib" / "librocprofiler-sdk.so.1"),
        touch(opt_old / "lib" / "librocprofiler-sdk.so.0"),
        touch(site / "_rocm_sdk_core" / "lib" / "librocprofiler-sdk.so.1.0.0"),
    ]
    touch(site / "_rocm_sdk_core" / "lib" / "librocprofiler-sdk.so")  # a wheel's unversioned name is not used
    env = {"PROTON_ROCPROFILER_SDK_PATH": str(env_dir), "ROCM_PATH": str(rocm)}
    got = libsearch.candidates(environ=env, opt_dirs=[str(opt), str(opt_old)], site_dirs=[str(site)])
    assert got == files + list(libsearch.SONAMES)


def test_versioned_names_newest_first(tmp_path):
    for name in ("librocprofiler-sdk.so.0.4.0", "librocprofiler-sdk.so.1", "librocprofiler-sdk.so.1.1.0"):
        touch(tmp_path / name)
    assert [os.path.basename(p) for p in libsearch.files_in(str(tmp_path), True)] == [
        "librocprofiler-sdk.so.1.1.0", "librocprofiler-sdk.so.1", "librocprofiler-sdk.so.0.4.0"]


def test_env_var_may_name_the_file(tmp_path):
    f = touch(tmp_path / "custom.so")
    assert libsearch.candidates(environ={"PROTON_ROCPROFILER_SDK_PATH": f}, opt_dirs=[], site_dirs=[])[0] == f


def test_not_found_is_one_line_naming_every_place(tmp_path):
    env = {"PROTON_ROCPROFILER_SDK_PATH": str(tmp_path / "nowhere"), "ROCM_PATH": str(tmp_path / "rocm")}
    msg = libsearch.not_found_message([("x.so", "bad ELF")], environ=env, opt_dirs=["/opt/rocm"], site_dirs=[])
    assert "\n" not in msg
    for place in (str(tmp_path / "nowhere"), str(tmp_path / "rocm" / "lib"), "/opt/rocm/lib", libsearch.LOADER,
                  "PROTON_ROCPROFILER_SDK_PATH", "x.so: bad ELF"):
        assert place in msg


def test_old_rocm_with_only_roctracer_is_named(tmp_path):
    touch(tmp_path / "lib" / "libroctracer64.so.4")
    msg = libsearch.not_found_message(environ={"ROCM_PATH": str(tmp_path)}, opt_dirs=[], site_dirs=[])
    assert "only roctracer was found" in msg and "older than 6.2" in msg
