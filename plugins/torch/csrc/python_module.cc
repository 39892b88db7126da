// PyTorch operators as Proton contexts, from RecordFunction callbacks: no Python per operator.
//
// While a session with hook="torch" runs, one global RecordFunction callback pair
// (scope FUNCTION only) is registered.  Each record opens a frame on its thread's
// stack.  A frame resolves to (its parent's context, operator name)
// interned into a context id of our own (from FIRST_ID, the range the core reserved; named for the core
// through this module); views, wrappers and re-dispatches resolve to their
// parent's.  Where every running backend takes a context provider (capsule
// "proton.native_context.v1", version 2), an operator's frame is named at its
// entry and nothing is set: a launch asks for the innermost frame's context
// (``provide``).  With a backend of version 1 each frame's id is also set as the
// thread's context, the previous one set again at its exit.
//
// Backward: autograd runs each node inside a FUNCTION record
// "autograd::engine::evaluate_function: X", with the node set as the thread's
// current one (get_current_node): its sequence number and the thread that
// created it.  That record is the node's frame, so torch need not build the
// node's own BACKWARD_FUNCTION record (that scope is not registered).  Forward
// operators that ran with a sequence number remember their context id in a
// ring per forward thread; the node with that number opens under a link
// context L(B, F): B is the context the backward pass was called
// in (published by the Python side around torch.autograd's engine call, else
// the running thread's own), F the forward operator's context.  L is named when
// a profile is built (Python, proton_torch.ops.resolve): F's module and operator
// path, under B.
//
// Operators that launch nothing (views, metadata reads, allocations) are left
// unobserved while no trace and no other observer needs them (unobserved.cc), so
// torch builds no record for them; the nodes they create are linked by the frame
// around them, or by a sweep of the sequence numbers taken outside any frame.
//
// nn.Module calls: global forward pre/post hooks written here (C functions, with
// the GIL) open each module call as a scope of the core's, or, inside one of our
// records, as a frame of ours.
//
// Where each part lives:
//   thread_state.h/.cc      switches, counters and each thread's state (its frames and caches)
//   record_callbacks.h/.cc  the RecordFunction callbacks: registration, a record's entry and exit
//   operator_names.h/.cc    context ids, the thread's caches, input shapes, what a frame stands for
//   autograd_records.h/.cc  autograd's node records: sequence-number rings, backward calls, sweeps
//   launch_provider.h/.cc   the provider a launch asks, the channels to the backends
//   module_frames.h/.cc     nn.Module calls: hooks, the __call__ descriptor, module frames of ours
//   core_scopes.h/.cc       the core's scopes through its scope engine (proton_core/scope_api.h)
//   tracing.h/.cc           trace events and their drain
//   timing.h/.cc            diagnostic timing (PROTON_TORCH_TIMING=1 builds)
//   unobserved.h/.cc        operators that launch nothing, left unobserved
//   python_module.cc        this file: the Python module's table

#include "thread_state.h"

#include "autograd_records.h"
#include "core_scopes.h"
#include "launch_provider.h"
#include "module_frames.h"
#include "operator_names.h"
#include "record_callbacks.h"
#include "tracing.h"

#ifndef PROTON_TORCH_BUILT_FOR
#define PROTON_TORCH_BUILT_FOR "unknown"
#endif

namespace proton_torch {
namespace {

PyObject* py_stats(PyObject*, PyObject*) {
  size_t entries;
  {
    std::lock_guard<std::mutex> g(g_intern_mu);
    entries = g_entries.size();
  }
  return Py_BuildValue("{s:O,s:O,s:O,s:O,s:i,s:n,s:K,s:K,s:K,s:K,s:K,s:n,s:I}", "enabled",
                       g_on.load() ? Py_True : Py_False, "providing", g_providing.load() ? Py_True : Py_False,
                       "unobserved", g_unobserved.load() ? Py_True : Py_False,
                       "shapes", g_shapes.load() ? Py_True : Py_False, "channels", g_nchannels.load(), "entries",
                       Py_ssize_t(entries), "linked", (unsigned long long)g_linked.load(), "unlinked",
                       (unsigned long long)g_unlinked.load(), "misnested", (unsigned long long)g_misnested.load(),
                       "callback_errors", (unsigned long long)g_callback_errors.load(), "dropped_events",
                       (unsigned long long)g_dropped_events.load(), "open_frames_this_thread",
                       Py_ssize_t(state().frames.size()), "schema_generation",
                       (unsigned int)g_schema_generation.load());
}

PyObject* py_reset_stats(PyObject*, PyObject*) {
  g_linked.store(0);
  g_unlinked.store(0);
  g_misnested.store(0);
  g_callback_errors.store(0);
  g_dropped_events.store(0);
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"timing", py_timing, METH_VARARGS,
     "timing(reset=False) -> (tsc hz, [(os thread id, {part: (tsc cycles, calls)})]) of a PROTON_TORCH_TIMING=1 "
     "build, else None"},
    {"enable", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_enable)), METH_VARARGS | METH_KEYWORDS,
     "enable(shapes=False, observe_all=False): register the RecordFunction callbacks (again, if shapes changed); "
     "observe_all, read when they are first registered: leave no operator unobserved"},
    {"disable", py_disable, METH_NOARGS, "disable(): remove the callbacks (records already open still close)"},
    {"forget_after_fork", py_forget_after_fork, METH_NOARGS, "in a forked child: set no context any more"},
    {"unobserved", py_unobserved, METH_NOARGS,
     "unobserved(): the operators that launch nothing (name.overload) torch builds no record for now"},
    {"set_channels", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_set_channels)),
     METH_VARARGS | METH_KEYWORDS,
     "set_channels([capsule, ...], provide=True): the running backends' native context setters; returns how "
     "many. provide: name each launch's context when the backend asks (all of version 2), instead of setting "
     "one per operator"},
    {"set_tracing", py_set_tracing, METH_O, "set_tracing(on): keep an event per operator for take_events()"},
    {"entry", py_entry, METH_O,
     "entry(id) -> ('name', parent, name, 'op'|'module'|'backward'|'name') | ('link', backward context, "
     "forward context, known) | None"},
    {"intern", py_intern, METH_VARARGS, "intern(parent, name) -> the id of that context"},
    {"set_module_support", py_set_module_support, METH_NOARGS,
     "set_module_support(): take the core's scope engine (its C API), which module_pre_hook/module_post_hook and "
     "the module call wrapper open the core's scopes through"},
    {"set_first_id", py_set_first_id, METH_O,
     "set_first_id(first): our context ids start there (the range the core reserved for this plugin); FIRST_ID"},
    {"module_pre_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_pre_hook)),
     METH_FASTCALL, "module_pre_hook(module, args): a global nn.Module forward pre hook"},
    {"module_post_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_post_hook)),
     METH_FASTCALL, "module_post_hook(module, args, output): a global nn.Module forward hook (always_call)"},
    {"module_call_descriptor", py_module_call_descriptor, METH_VARARGS,
     "module_call_descriptor(nn.Module, original) -> a method descriptor of nn.Module (one per process) calling "
     "original with the module opened around it while set_module_call(True)"},
    {"set_module_call", py_set_module_call, METH_O,
     "set_module_call(on): whether the module_call descriptor opens modules (off: it only calls the original)"},
    {"module_ids", py_module_ids, METH_NOARGS, "module_ids() -> the ids of the module scopes of the core opened"},
    {"settle", py_settle, METH_NOARGS,
     "settle(): the calling thread's module frames of ours (no record open) become the core's scopes (a settler "
     "of plugin_api.register_settler)"},
    {"backward_enter", py_backward_enter, METH_NOARGS,
     "backward_enter() -> token: publish the calling thread's context for autograd's threads"},
    {"backward_exit", py_backward_exit, METH_O, "backward_exit(token): undo backward_enter"},
    {"current", py_current, METH_NOARGS, "current() -> the calling thread's context, as the backends hold it"},
    {"take_events", py_take_events, METH_NOARGS, "take_events() -> [(context, thread id, start ns, end ns)]"},
    {"null_observer", py_null_observer, METH_VARARGS,
     "null_observer(on, hide=False): register (or remove) RecordFunction callbacks that do nothing (a benchmark "
     "anchor); hide: with the operators that launch nothing unobserved, as hook='torch' leaves them"},
    {"stats", py_stats, METH_NOARGS, "counters and settings"},
    {"reset_stats", py_reset_stats, METH_NOARGS, "zero the counters (tests)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModuleDef = {PyModuleDef_HEAD_INIT, "_C", "PyTorch operator contexts from RecordFunction callbacks", -1,
                       kMethods};

}  // namespace

}  // namespace proton_torch

using proton_torch::kModuleDef;

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&kModuleDef);
  if (m == nullptr) return nullptr;
  if (PyModule_AddObject(m, "FIRST_ID", PyLong_FromUnsignedLongLong(proton_torch::g_first_id.load())) < 0 ||
      PyModule_AddStringConstant(m, "BUILT_FOR", PROTON_TORCH_BUILT_FOR) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}

