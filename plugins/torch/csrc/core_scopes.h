// What reads and drives the core's Python objects: its scope stack (plugin_api.scope_stack_protocol), its
// setters, its activity flag and context entries (set_module_support). All of it in core_scopes.cc, moved
// unchanged from ops.cc, so that one file changes when the core hands these out through a C API.
#pragma once

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

struct ModuleSupport {
  PyObject* activity = nullptr;  // plugin_api.ACTIVITY: .any
  PyObject* thread = nullptr;    // the core's threading.local: .stack, .current
  PyObject* index = nullptr;     // (parent, "scope", name) -> id
  PyObject* child = nullptr;     // TREE.child(parent, kind, name) -> id
  PyObject* kind = nullptr;      // "scope"
  PyObject* manager = nullptr;   // .setters, .tracing
  PyObject* open_scope = nullptr;
  PyObject* close_scope = nullptr;
  PyObject* s_any = nullptr;
  PyObject* s_stack = nullptr;
  PyObject* s_current = nullptr;
  PyObject* s_setters = nullptr;
  PyObject* s_tracing = nullptr;
  PyObject* s_modules = nullptr;
  PyObject* s_name = nullptr;
  PyObject* zero = nullptr;
  Py_ssize_t any_offset = 0;         // ACTIVITY's "any" slot, 0: read it through getattr
  PyObject* manager_dict = nullptr;  // MANAGER.__dict__, where setters/tracing are read (nullptr: getattr)
  PyObject* entries = nullptr;       // the core's context entries, id -> (parent, kind, name), or nullptr
};
extern ModuleSupport g_mod;

// ACTIVITY.any: 1, 0, -1 with an exception.
int activity_on();

// Open module ``name`` as a scope of the core's; false, with any exception left set, if it did not open.
bool open_module_scope(ThreadState& ts, PyObject* name, uint64_t* id);

// plugin_api.close_scope(id), in Python; an exception is left set.
void python_close_scope(uint64_t id);

// Close the core's scope ``id`` (the plain case natively, else through Python); never raises.
void close_core_scope(ThreadState& ts, uint64_t id);

// Whether the thread's context as last set, ``id``, is a plain scope's (or the root's, or a plugin's own).
bool plain_context(ThreadState& ts, uint64_t id);

PyObject* py_set_module_support(PyObject*, PyObject* args);

}  // namespace proton_torch
#pragma GCC visibility pop

