// The core's scope stack, setters, activity flag and context entries, read and driven from native code
// (core_scopes.h). Moved unchanged from ops.cc: the one file to replace when the core exports a C API.
#include "core_scopes.h"

#include <structmember.h>

#include <initializer_list>

#include "module_frames.h"

namespace proton_torch {

ModuleSupport g_mod;

// ACTIVITY.any: 1, 0, -1 with an exception. ACTIVITY is a __slots__ object: its slot is read where it
// lies (g_mod.any_offset), else through getattr.
int activity_on() {
  if (g_mod.any_offset > 0) {
    PyObject* any = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(g_mod.activity) + g_mod.any_offset);
    if (any == Py_True) return 1;
    if (any == Py_False) return 0;
  }
  PyObject* any = PyObject_GetAttr(g_mod.activity, g_mod.s_any);
  if (any == nullptr) return -1;
  int on = PyObject_IsTrue(any);
  Py_DECREF(any);
  return on;
}

namespace {

// MANAGER.<name> (a new reference): from its instance dict where no class attribute can come first.
PyObject* manager_attr(PyObject* name) {
  if (g_mod.manager_dict != nullptr) {
    PyObject* v = PyDict_GetItemWithError(g_mod.manager_dict, name);
    if (v != nullptr) return Py_NewRef(v);
    if (PyErr_Occurred()) return nullptr;
  }
  return PyObject_GetAttr(g_mod.manager, name);
}

// The offset of a plain object slot ``name`` of ``obj``'s type (a __slots__ member), else 0.
Py_ssize_t slot_offset(PyObject* obj, PyObject* name) {
  PyObject* descr = _PyType_Lookup(Py_TYPE(obj), name);
  if (descr == nullptr || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) return 0;
  PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
  return member->type == T_OBJECT_EX || member->type == T_OBJECT ? member->offset : 0;
}

// The instance dict of ``obj`` (a new reference) if none of ``names`` is a class attribute of its type (which
// could shadow or compute the value), else nullptr.
PyObject* plain_instance_dict(PyObject* obj, std::initializer_list<PyObject*> names) {
  for (PyObject* name : names)
    if (_PyType_Lookup(Py_TYPE(obj), name) != nullptr) return nullptr;
  PyObject* d = PyObject_GenericGetDict(obj, nullptr);
  if (d == nullptr || !PyDict_CheckExact(d)) {
    PyErr_Clear();
    Py_XDECREF(d);
    return nullptr;
  }
  return d;
}

PyObject* core_dict(ThreadState& ts) {
  if (ts.core_dict == nullptr) ts.core_dict = PyObject_GetAttrString(g_mod.thread, "__dict__");
  return ts.core_dict;
}

bool call_setters(PyObject* ctx) {
  PROTON_TIMED(kTimedSetters);
  PyObject* setters = manager_attr(g_mod.s_setters);
  if (setters == nullptr) return false;
  bool ok = PyTuple_Check(setters);
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(setters); ++i) {
    PyObject* r = PyObject_CallOneArg(PyTuple_GET_ITEM(setters, i), ctx);
    ok = r != nullptr;
    Py_XDECREF(r);
  }
  Py_DECREF(setters);
  return ok;
}

// `list.pop()` of the last item (n > 0), keeping the list's array: list_resize would free a short stack's
// array when it empties (and shrink it below half), so every push/pop pair paid a malloc and a free.
void drop_last(PyObject* list) {
  Py_ssize_t n = PyList_GET_SIZE(list);
  PyObject* item = PyList_GET_ITEM(list, n - 1);
  Py_SET_SIZE(list, n - 1);
  Py_DECREF(item);
}

// The id of the innermost scope on a core stack (borrowed), the root's for an empty one.
PyObject* stack_top(PyObject* stack) {
  Py_ssize_t n = PyList_GET_SIZE(stack);
  if (n == 0) return g_mod.zero;
  PyObject* top = PyList_GET_ITEM(stack, n - 1);
  return PyTuple_Check(top) && PyTuple_GET_SIZE(top) > 0 ? PyTuple_GET_ITEM(top, 0) : nullptr;
}

// The core's id of scope ``name`` under ``parent`` (a new reference): the thread's cache (ids are never
// reused, so an entry never goes stale), else index[(parent, "scope", name)], else TREE.child(...).
PyObject* scope_id(ThreadState& ts, PyObject* parent, PyObject* name) {
  uint64_t p = PyLong_AsUnsignedLongLong(parent);
  if (p == uint64_t(-1) && PyErr_Occurred()) return nullptr;
  if (!ts.scopes) ts.scopes.reset(new ScopeSlot[kCacheSlots]());
  ScopeSlot& slot = ts.scopes[mix(p, uintptr_t(name)) & (kCacheSlots - 1)];
  if (slot.ctx != nullptr && slot.parent == p && slot.name == name) return Py_NewRef(slot.ctx);
  PyObject* key = PyTuple_Pack(3, parent, g_mod.kind, name);
  PyObject* ctx = key ? PyDict_GetItemWithError(g_mod.index, key) : nullptr;
  Py_XDECREF(key);
  if (ctx != nullptr) {
    Py_INCREF(ctx);
  } else if (!PyErr_Occurred()) {
    ctx = PyObject_CallFunctionObjArgs(g_mod.child, parent, g_mod.kind, name, nullptr);
  }
  if (ctx != nullptr && PyLong_CheckExact(ctx)) {
    PyObject* old_name = slot.name;
    PyObject* old_ctx = slot.ctx;
    slot = ScopeSlot{p, Py_NewRef(name), Py_NewRef(ctx)};
    Py_XDECREF(old_name);
    Py_XDECREF(old_ctx);
  }
  return ctx;
}

// open_scope(name) in the plain case (no state or op on top): a new reference to the id; nullptr with no
// error set when it is not the plain case.
PyObject* fast_open(ThreadState& ts, PyObject* name) {
  PyObject* d = core_dict(ts);
  PyObject* stack = d ? PyDict_GetItemWithError(d, g_mod.s_stack) : nullptr;
  if (stack == nullptr || !PyList_Check(stack)) return nullptr;
  Py_INCREF(stack);
  PyObject* result = nullptr;
  PyObject* parent = stack_top(stack);
  PyObject* current = parent ? PyDict_GetItemWithError(d, g_mod.s_current) : nullptr;
  if (current != nullptr && PyObject_RichCompareBool(current, parent, Py_EQ) == 1) {
    PyObject* ctx = scope_id(ts, parent, name);
    PyObject* now = ctx ? PyLong_FromUnsignedLongLong(now_ns()) : nullptr;
    PyObject* entry = now ? PyTuple_Pack(3, ctx, name, now) : nullptr;
    Py_XDECREF(now);
    if (entry != nullptr && PyList_Append(stack, entry) == 0 && PyDict_SetItem(d, g_mod.s_current, ctx) == 0 &&
        call_setters(ctx)) {
      result = ctx;
      ctx = nullptr;
    }
    Py_XDECREF(entry);
    Py_XDECREF(ctx);
  }
  Py_DECREF(stack);
  return result;
}

// close_scope(id) in the plain case: 1 closed, 0 not the plain case (nothing changed), -1 an error.
int fast_close(ThreadState& ts, uint64_t id) {
  PyObject* tracing = manager_attr(g_mod.s_tracing);
  if (tracing == nullptr) return -1;
  bool traced = !PyTuple_Check(tracing) || PyTuple_GET_SIZE(tracing) > 0;
  Py_DECREF(tracing);
  if (traced) return 0;  // close_scope records the scope's event
  PyObject* d = core_dict(ts);
  PyObject* stack = d ? PyDict_GetItemWithError(d, g_mod.s_stack) : nullptr;
  if (stack == nullptr || !PyList_Check(stack)) return PyErr_Occurred() ? -1 : 0;
  Py_INCREF(stack);
  int done = 0;
  Py_ssize_t n = PyList_GET_SIZE(stack);
  PyObject* top = n ? stack_top(stack) : nullptr;
  if (top != nullptr && PyLong_Check(top) && PyLong_AsUnsignedLongLong(top) == id) {
    Py_INCREF(top);
    PyObject* current = PyDict_GetItemWithError(d, g_mod.s_current);
    int plain = current ? PyObject_RichCompareBool(current, top, Py_EQ) : -1;
    Py_DECREF(top);
    if (plain == 1) {
      drop_last(stack);
      PyObject* parent = stack_top(stack);
      Py_XINCREF(parent);
      done = parent && PyDict_SetItem(d, g_mod.s_current, parent) == 0 && call_setters(parent) ? 1 : -1;
      Py_XDECREF(parent);
    } else if (plain < 0) {
      done = -1;
    }
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_DECREF(stack);
  return done;
}

}  // namespace

PyObject* py_set_module_support(PyObject*, PyObject* args) {
  PyObject *activity, *protocol, *entries = nullptr;
  if (!PyArg_ParseTuple(args, "OO|O!", &activity, &protocol, &PyList_Type, &entries)) return nullptr;
  // (1, thread, index, child, scope_kind, manager, open_scope, close_scope): plugin_api.scope_stack_protocol()
  if (!PyTuple_Check(protocol) || PyTuple_GET_SIZE(protocol) < 8 || !PyLong_Check(PyTuple_GET_ITEM(protocol, 0)) ||
      PyLong_AsLong(PyTuple_GET_ITEM(protocol, 0)) != 1 || !PyDict_Check(PyTuple_GET_ITEM(protocol, 2))) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "unknown scope stack protocol (proton_core is newer than proton-profiler-torch)");
    return nullptr;
  }
  PyObject** slots[] = {&g_mod.thread, &g_mod.index, &g_mod.child, &g_mod.kind, &g_mod.manager, &g_mod.open_scope,
                        &g_mod.close_scope};
  for (int i = 0; i < 7; ++i) Py_XSETREF(*slots[i], Py_NewRef(PyTuple_GET_ITEM(protocol, i + 1)));
  Py_XSETREF(g_mod.activity, Py_NewRef(activity));
  Py_XSETREF(g_mod.entries, entries != nullptr ? Py_NewRef(entries) : nullptr);
  ++g_module_generation;
  if (g_mod.s_any == nullptr) {
    g_mod.s_any = PyUnicode_InternFromString("any");
    g_mod.s_stack = PyUnicode_InternFromString("stack");
    g_mod.s_current = PyUnicode_InternFromString("current");
    g_mod.s_setters = PyUnicode_InternFromString("setters");
    g_mod.s_tracing = PyUnicode_InternFromString("tracing");
    g_mod.s_modules = PyUnicode_InternFromString("_modules");
    g_mod.s_name = PyUnicode_InternFromString("__name__");
    g_mod.zero = PyLong_FromLong(0);
  }
  g_mod.any_offset = slot_offset(activity, g_mod.s_any);
  Py_XSETREF(g_mod.manager_dict, plain_instance_dict(g_mod.manager, {g_mod.s_setters, g_mod.s_tracing}));
  Py_RETURN_NONE;
}

// plugin_api.close_scope(id), in Python; an exception is left set.
void python_close_scope(uint64_t id) {
  PyObject* arg = PyLong_FromUnsignedLongLong(id);
  PyObject* r = arg ? PyObject_CallOneArg(g_mod.close_scope, arg) : nullptr;
  Py_XDECREF(arg);
  Py_XDECREF(r);
}

void close_core_scope(ThreadState& ts, uint64_t id) {
  int done;
  {
    PROTON_TIMED(kTimedFastClose);
    done = fast_close(ts, id);
  }
  if (done == 0) python_close_scope(id);
  if (done < 0 || PyErr_Occurred()) {
    PyErr_Clear();
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// Open module ``name`` as a scope of the core's (its id in *id, kept for naming links: module_ids); false, with
// any exception left set, if it did not open.
bool open_module_scope(ThreadState& ts, PyObject* name, uint64_t* id) {
  PyObject* ctx;
  {
    PROTON_TIMED(kTimedFastOpen);
    ctx = fast_open(ts, name);
  }
  if (ctx == nullptr && !PyErr_Occurred()) ctx = PyObject_CallOneArg(g_mod.open_scope, name);
  if (ctx == nullptr) return false;
  *id = PyLong_AsUnsignedLongLong(ctx);
  Py_DECREF(ctx);
  if (PyErr_Occurred()) return false;
  if (g_module_id_set.find(*id) == g_module_id_set.end()) {  // find first: emplace would allocate every call
    g_module_id_set.insert(*id);
    g_module_ids.push_back(*id);
  }
  return true;
}

// Whether the thread's context as last set, ``id``, is a plain scope's (or the root's, or a plugin's own): a
// module call opened there as the core's scope would be its child. Not so under a state or op of the core's,
// which stay the path's suffix below the scopes opened inside them (context.ThreadContext.recompute): there a
// module call is the core's scope, as without g_fast. Ids are never reused: answers are kept per thread.
bool plain_context(ThreadState& ts, uint64_t id) {
  if (id == 0 || id >= (uint64_t(1) << 32)) return true;
  PlainSlot& slot = ts.plain[id & (kPlainSlots - 1)];
  if (slot.id == id + 1) return slot.plain;
  PyObject* entries = g_mod.entries;
  if (entries == nullptr || Py_ssize_t(id) >= PyList_GET_SIZE(entries)) return false;
  PyObject* entry = PyList_GET_ITEM(entries, Py_ssize_t(id));
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) return false;
  PyObject* kind = PyTuple_GET_ITEM(entry, 1);
  int plain = kind == g_mod.kind ? 1 : PyObject_RichCompareBool(kind, g_mod.kind, Py_EQ);
  if (plain < 0) {
    PyErr_Clear();
    return false;
  }
  slot = PlainSlot{id + 1, plain == 1};
  return plain == 1;
}

}  // namespace proton_torch

