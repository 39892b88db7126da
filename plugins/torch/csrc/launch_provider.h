// The provider a launch asks for its context (providing), and the channels to the running backends.
#pragma once

#include "operator_names.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// The thread's context now, given the one last ``set``: providing, its innermost frame's, unless something
// set another inside our frames (an NVTX range or a Python scope, which then wins).
inline uint64_t answer(ThreadState& ts, uint64_t set) {
  if (!g_providing.load(std::memory_order_relaxed) || ts.frames.empty() || set != ts.base) return set;
  return resolve_to(ts, ts.frames.size() - 1);
}

// The calling thread's context now.
uint64_t effective(ThreadState& ts);

PyObject* py_set_channels(PyObject*, PyObject* args, PyObject* kwargs);
PyObject* py_current(PyObject*, PyObject*);

}  // namespace proton_torch
#pragma GCC visibility pop

