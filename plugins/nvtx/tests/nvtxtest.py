"""Helpers the nvtx tests share (a module of its own: `from conftest import` picks whichever conftest loaded last)."""

from __future__ import annotations

import ctypes


def run_thread(lib, names, iterations=1, extra_pops=0, start_ctx=0):
    """Push ``names`` nested, ``iterations`` times, on a pthread that never holds the GIL."""
    arr = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
    assert lib.client_run_thread(arr, len(names), iterations, extra_pops, start_ctx) == 0
