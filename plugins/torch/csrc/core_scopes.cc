// The core's scopes, activity flag and context kinds, through the core's scope engine (core_scopes.h):
// proton_core/scope_api.h, the one C API every native plugin uses. Nothing here reads a core Python object.
#include "core_scopes.h"

#include "module_frames.h"

namespace proton_torch {

ModuleSupport g_mod;
std::atomic<uint64_t> g_first_id{uint64_t(1) << 41};

// 1 while any session records, else 0 (the engine's is_active never fails).
int activity_on() { return g_mod.api->is_active(); }

// The core's close_scope(id), whatever sits on top; an exception is left set.
void core_close_scope(uint64_t id) { g_mod.api->close_scope(id); }

void close_core_scope(ThreadState& ts, uint64_t id) {
  int done;
  {
    PROTON_TIMED(kTimedFastClose);
    done = g_mod.api->close_scope(id);
  }
  if (done < 0 || PyErr_Occurred()) {
    PyErr_Clear();
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// Open module ``name`` as a scope of the core's (its id in *id, kept for naming links: module_ids); false, with
// any exception left set, if it did not open.
bool open_module_scope(ThreadState& ts, PyObject* name, uint64_t* id) {
  int rc;
  {
    PROTON_TIMED(kTimedFastOpen);
    rc = g_mod.api->open_scope(name, id);
  }
  if (rc < 0) return false;
  if (g_module_id_set.find(*id) == g_module_id_set.end()) {  // find first: emplace would allocate every call
    g_module_id_set.insert(*id);
    g_module_ids.push_back(*id);
  }
  return true;
}

// Whether the thread's context as last set, ``id``, is a plain scope's (or the root's, or a plugin's own): a
// module call opened there as the core's scope would be its child. Not so under a state or op of the core's,
// which stay the path's suffix below the scopes opened inside them: there a module call is the core's scope, as
// without g_fast. Ids never change meaning: answers are kept per thread.
bool plain_context(ThreadState& ts, uint64_t id) {
  if (id == 0 || id >= (uint64_t(1) << 32)) return true;
  PlainSlot& slot = ts.plain[id & (kPlainSlots - 1)];
  if (slot.id == id + 1) return slot.plain;
  int kind = g_mod.api->context_kind(id);
  if (kind < 0) {
    PyErr_Clear();
    return false;
  }
  bool plain = kind == PROTON_CONTEXT_SCOPE || kind == PROTON_CONTEXT_FOREIGN;
  slot = PlainSlot{id + 1, plain};
  return plain;
}

PyObject* py_set_module_support(PyObject*, PyObject*) {
  const ProtonScopeAPI* api = ProtonScopeAPI_Import(1);
  if (api == nullptr) return nullptr;
  if (g_mod.s_modules == nullptr) {
    g_mod.s_modules = PyUnicode_InternFromString("_modules");
    g_mod.s_name = PyUnicode_InternFromString("__name__");
    if (g_mod.s_modules == nullptr || g_mod.s_name == nullptr) return nullptr;
  }
  g_mod.api = api;
  ++g_module_generation;
  Py_RETURN_NONE;
}

PyObject* py_set_first_id(PyObject* module, PyObject* arg) {
  unsigned long long first = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  if (first < (uint64_t(1) << 32)) return PyErr_Format(PyExc_ValueError, "set_first_id: %llu is among the core's ids", first);
  g_first_id.store(first, std::memory_order_relaxed);
  if (PyObject_SetAttrString(module, "FIRST_ID", arg) < 0) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace proton_torch
