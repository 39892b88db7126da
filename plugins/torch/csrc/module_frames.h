// nn.Module calls: each opened as a scope of the core's (core_scopes.cc) or as a frame of ours.
#pragma once

#include <unordered_set>
#include <vector>

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// Bumped each time the hooks are (re)installed: frames of an older install lost their post hook
// (the hooks went away during that module's forward) and are dropped at this thread's next call.
extern uint64_t g_module_generation;

extern std::vector<uint64_t> g_module_ids;  // ids of the core's module scopes opened, for naming links
extern std::unordered_set<uint64_t> g_module_id_set;

PyObject* py_settle(PyObject*, PyObject*);
PyObject* py_module_pre_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* py_module_post_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* py_module_call_descriptor(PyObject*, PyObject* args);
PyObject* py_set_module_call(PyObject*, PyObject* arg);
PyObject* py_module_ids(PyObject*, PyObject*);

}  // namespace proton_torch
#pragma GCC visibility pop

