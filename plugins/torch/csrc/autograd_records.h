// autograd's engine records: each node's frame, under the forward operator its sequence number names (the
// forward threads' rings), below the context the backward pass was called in.
#pragma once

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// The context of an autograd node's frame, L(B, F)/X.
uint64_t backward_context(ThreadState& ts, int64_t seq, uint64_t forward_thread, uint64_t cur, const char* name);

// A kBackwardOpen frame's context, looked up now (its context at entry is in prev, as set_top keeps it).
inline void resolve_backward(ThreadState& ts, Frame& f) {
  f.ctx = backward_context(ts, int64_t(f.ctx), f.forward_thread, f.prev, f.name);
  f.kind = kBackward;
}

// autograd's record of one node, "autograd::engine::evaluate_function: X" (``name``: X), opens the node's frame.
void enter_backward(ThreadState& ts, const at::RecordFunction& rf, const char* name);

// Sequence numbers taken since the last sweep while no frame of ours was open go under ``ctx``.
void sweep(ThreadState& ts, uint64_t ctx);

// A sweep where the thread has no frame of ours open (a module call, a backward call), with its context now.
inline void sweep_outside_frames(ThreadState& ts) {
  if (ts.frames.empty()) sweep(ts, last_set(ts));
}

// Frame ``i``, which autograd saw, is closing: the sequence numbers taken while it ran go under its context.
void remember_sequence(ThreadState& ts, size_t i);

PyObject* py_backward_enter(PyObject*, PyObject*);
PyObject* py_backward_exit(PyObject*, PyObject* arg);

}  // namespace proton_torch
#pragma GCC visibility pop

