// roctx ranges as Proton scopes: roctxRangePushA/Pop reach the core's scope engine through its C
// API (proton_core/include/proton_core/scope_api.h), the same path the NVTX plugin's ranges take.
#pragma once

#include <Python.h>

namespace proton_roc {

// Import the core's scope table (GIL held).  False with a Python exception set on failure.
bool enable_markers(bool on);
void marker_push(const char* message);  // on the thread that called roctxRangePushA
void marker_pop();
uint64_t marker_misnested();  // pops that found another scope innermost, or none

}  // namespace proton_roc
