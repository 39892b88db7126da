"""The bare-CUPTI floor: the least any CUPTI profiler costs, compiled at run time (build.py)."""
