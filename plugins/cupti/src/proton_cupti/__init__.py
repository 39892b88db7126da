"""Proton's CUPTI backend: per-kernel GPU time and count on NVIDIA GPUs.

The native extension ``proton_cupti._cupti`` loads libcupti at run time, so
importing this package never needs a GPU, a driver or CUPTI.
"""

__version__ = "0.1.0"
