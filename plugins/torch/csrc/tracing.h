// Trace events (data="trace"): one per operator, node and module frame, kept until a session takes them.
#pragma once

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// Frame ``f`` of thread ``ts`` ends now: its event.
void record_event(ThreadState& ts, const Frame& f);

PyObject* py_set_tracing(PyObject*, PyObject* arg);
PyObject* py_take_events(PyObject*, PyObject*);

}  // namespace proton_torch
#pragma GCC visibility pop

