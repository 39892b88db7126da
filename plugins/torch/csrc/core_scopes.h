// The core's scopes, activity flag and context kinds, through the core's scope engine (proton_core/scope_api.h):
// the one place this extension talks to the core's scope stack.
#pragma once

#include <atomic>

#include "proton_core/scope_api.h"
#include "thread_state.h"

namespace proton_torch {

struct ModuleSupport {
  const ProtonScopeAPI* api = nullptr;  // the core's scope engine, once set_module_support ran
  PyObject* s_modules = nullptr;        // "_modules"
  PyObject* s_name = nullptr;           // "__name__"
};
extern ModuleSupport g_mod;

// 1 while any session records, else 0.
int activity_on();

// Open module ``name`` as a scope of the core's; false, with any exception left set, if it did not open.
bool open_module_scope(ThreadState& ts, PyObject* name, uint64_t* id);

// The core's close_scope(id), whatever sits on top; an exception is left set.
void core_close_scope(uint64_t id);

// Close the core's scope ``id``; never raises (errors are counted).
void close_core_scope(ThreadState& ts, uint64_t id);

// Whether the thread's context as last set, ``id``, is a plain scope's (or the root's, or a plugin's own).
bool plain_context(ThreadState& ts, uint64_t id);

PyObject* py_set_module_support(PyObject*, PyObject*);
PyObject* py_set_first_id(PyObject* module, PyObject* arg);

}  // namespace proton_torch
