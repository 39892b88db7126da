// What module.cc shares with the test-only bindings of testing.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace proton_cupti {

// (nodes, records, events, dropped, device ids) recorded since the last
// flush; with collect_activity CUPTI first hands over its buffers.
pybind11::tuple flush_all(bool collect_activity, bool complete = true);

#ifdef PROTON_CUPTI_TESTING
// Adds the _test_* functions and SLOTS to the module (CMake option
// PROTON_CUPTI_TESTING=ON; release wheels are built without them).
void bind_testing(pybind11::module_& m);
#endif

}  // namespace proton_cupti
