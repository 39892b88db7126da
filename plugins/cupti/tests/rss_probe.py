"""Where does memory go per launch?  Prints RSS deltas of launch phases (GPU only).

python3 plugins/cupti/tests/rss_probe.py
"""

import ctypes

from proton_cupti import _cupti
from proton_cupti.backend import load_cupti

N = 3_000_000


def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmRSS:"))


def phase(name, fn):
    before = rss()
    fn()
    print(f"{name:40s} RSS {before} -> {rss()} MiB ({rss() - before:+d})", flush=True)


load_cupti()
libc = ctypes.CDLL("libc.so.6")
phase("warm-up bare 100k", lambda: _cupti._test_launch_noop(100_000))
phase(f"bare {N}", lambda: _cupti._test_launch_noop(N))
_cupti.start()
_cupti.configure(False, False, [], [])
phase(f"cupti on, epoch 0, {N}", lambda: _cupti._test_launch_noop(N))
phase("flush", lambda: _cupti.flush())
_cupti.set_epoch(1)
phase(f"cupti on, epoch 1, {N}", lambda: _cupti._test_launch_noop(N))
phase(f"cupti on, epoch 1, {N} again", lambda: _cupti._test_launch_noop(N))
phase("flush", lambda: print("  records", _cupti.flush()[1:4:2]))
phase("malloc_trim", lambda: libc.malloc_trim(0))
_cupti.set_epoch(0)
phase("stop", _cupti.stop)
phase("malloc_trim", lambda: libc.malloc_trim(0))
