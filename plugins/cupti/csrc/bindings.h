// What module.cc shares with the test-only bindings of testing.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace proton_cupti {

// (nodes, records, events, dropped, device ids) recorded since the last
// flush; with collect_activity CUPTI first hands over its buffers (and, while
// PC sampling runs, its samples).  with_metrics appends a sixth element, the
// PC sampling metrics attributed since the last flush:
// [(epoch, node, kernel, device, (line,), (("samples", n), ("stall_<reason>", n), ...)), ...]
pybind11::tuple flush_all(bool collect_activity, bool complete = true, bool with_metrics = false);

// PC sampling counters and settings (pcsampling_stats in Python).
pybind11::dict pcsampling_stats_dict();

#ifdef PROTON_CUPTI_TESTING
// Adds the _test_* functions and SLOTS to the module (CMake option
// PROTON_CUPTI_TESTING=ON; release wheels are built without them).
void bind_testing(pybind11::module_& m);
#endif

}  // namespace proton_cupti
