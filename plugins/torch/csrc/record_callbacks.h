// The RecordFunction callbacks: a record's frame opens at its entry and closes at its exit. Module frames
// and autograd's nodes open and close theirs with the same steps.
#pragma once

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// A frame for ``rf`` (or a module, rf == nullptr) on top of the thread's stack, not resolved; timed while tracing.
Frame& push_frame(ThreadState& ts, const at::RecordFunction* rf, int64_t seq);

// Publishing: make the new top frame's context the thread's.
void set_top(ThreadState& ts, uint64_t prev, bool always = false);

// Close the top frame (``ended``: its record is ending now).
void pop_top(ThreadState& ts, bool ended);

PyObject* py_enable(PyObject*, PyObject* args, PyObject* kwargs);
PyObject* py_disable(PyObject*, PyObject*);
PyObject* py_forget_after_fork(PyObject*, PyObject*);
PyObject* py_unobserved(PyObject*, PyObject*);
PyObject* py_null_observer(PyObject*, PyObject* args);

}  // namespace proton_torch
#pragma GCC visibility pop

