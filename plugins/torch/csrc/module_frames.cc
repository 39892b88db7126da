// nn.Module calls (module_frames.h): the hooks and the __call__ descriptor, the modules' names, and module
// frames of ours (settled into the core's scopes when something opens one under them).
#include "module_frames.h"

#include <ATen/SequenceNumber.h>

#include <memory>
#include <unordered_map>

#include "autograd_records.h"
#include "core_scopes.h"
#include "launch_provider.h"
#include "operator_names.h"
#include "record_callbacks.h"

namespace proton_torch {

// ------------------------------------------------------------ nn.Module calls ----
// A module call becomes a scope of the core's (so scopes the user opens inside its forward nest under it),
// opened through the core's scope engine (its C API: open_scope/close_scope, core_scopes.cc); a module called
// inside one of our records (a forward recomputed in backward by activation checkpointing) becomes a frame of
// ours.
//
// Two ways in, both with the GIL held: module_call, a method descriptor of nn.Module put in place of
// nn.Module.__call__, which calls the original with the module opened around it (no Python frame of ours
// per module call; Dynamo is shown a Python equivalent, proton_torch.ops), or module_pre_hook and
// module_post_hook, called by the Python wrapper of proton_frameworks where Dynamo cannot be shown one.

// Bumped each time the hooks are (re)installed: frames of an older install lost their post hook
// (the hooks went away during that module's forward) and are dropped at this thread's next call.
uint64_t g_module_generation = 1;

namespace {

// (parent module, module) -> its attribute name in the parent (strong references to the names only).
std::unordered_map<std::pair<uint64_t, uint64_t>, PyObject*, PairHash> g_module_names;

}  // namespace

std::vector<uint64_t> g_module_ids;  // ids of the core's module scopes opened, for naming links
std::unordered_set<uint64_t> g_module_id_set;

namespace {

// module_call: the nn.Module.__call__ it wraps (kept after a session: code that saved the descriptor
// still calls through it), whether it opens modules now, and the descriptor, one per process (Dynamo
// registers it once).
PyObject* g_call_original = nullptr;
bool g_call_on = false;
PyObject* g_call_descr = nullptr;

// parent._modules, borrowed from the instance dict (nn.Module keeps it there), else nullptr without an error.
PyObject* children_of(PyObject* parent, PyObject** holder) {
  *holder = PyObject_GenericGetDict(parent, nullptr);
  if (*holder == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* children = PyDict_GetItemWithError(*holder, g_mod.s_modules);
  if (children == nullptr || !PyDict_Check(children)) {
    PyErr_Clear();
    return nullptr;
  }
  return children;
}

// A new reference to the name the Python side would give: the attribute name in the parent, else the class name.
PyObject* module_name(PyObject* parent, PyObject* module) {
  PyObject* holder = nullptr;
  PyObject* children = parent != nullptr ? children_of(parent, &holder) : nullptr;
  if (children != nullptr) {
    auto key = std::make_pair(uint64_t(uintptr_t(parent)), uint64_t(uintptr_t(module)));
    auto it = g_module_names.find(key);
    if (it != g_module_names.end() && PyDict_GetItemWithError(children, it->second) == module) {
      Py_DECREF(holder);
      return Py_NewRef(it->second);
    }
    PyErr_Clear();
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(children, &pos, &k, &v)) {
      if (v == module && PyUnicode_Check(k)) {
        if (g_module_names.size() > 100000) {
          for (auto& kv : g_module_names) Py_DECREF(kv.second);
          g_module_names.clear();
        }
        auto found = g_module_names.find(key);
        if (found != g_module_names.end()) {
          Py_SETREF(found->second, Py_NewRef(k));
        } else {
          g_module_names.emplace(key, Py_NewRef(k));
        }
        Py_DECREF(holder);
        return Py_NewRef(k);
      }
    }
  }
  Py_XDECREF(holder);
  PyTypeObject* type = Py_TYPE(module);
  if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE))  // a class statement's type: its __name__ is ht_name
    return Py_NewRef(reinterpret_cast<PyHeapTypeObject*>(type)->ht_name);
  return PyObject_GetAttr(reinterpret_cast<PyObject*>(type), g_mod.s_name);
}

// A frame of ours for a module call: inside one of our records, or anywhere while providing (see settle).
// ``set``: the thread's context as last set (last_set), read by the caller.
uint64_t own_module_frame(ThreadState& ts, PyObject* name, uint64_t set) {
  Py_ssize_t len;
  const char* text = PyUnicode_AsUTF8AndSize(name, &len);
  if (text == nullptr) return 0;
  uint64_t cur = answer(ts, set);
  // keyed by the str object (the parent's attribute name, or the class's __name__: kept alive by them); a hit
  // is checked against the entry's copy of the text, so a str freed and another made at its address is told apart
  uint64_t ctx = lookup(ts, cur, text, size_t(len), uintptr_t(name), kModuleEntry);
  Frame& f = push_frame(ts, nullptr, int64_t(at::sequence_number::peek()));  // its nodes: remember_sequence
  f.kind = kModule;
  f.ctx = ctx;
  set_top(ts, cur);
  return ctx;
}

// Close the module frame of ours with context ``ctx`` and the frames above it (records that lost their end).
void close_own_module_frame(ThreadState& ts, uint64_t ctx) {
  auto& frames = ts.frames;
  size_t i = frames.size();
  while (i > 0 && !(frames[i - 1].kind == kModule && frames[i - 1].ctx == ctx)) --i;
  if (i > 0) {
    while (frames.size() > i) pop_top(ts, false);
    pop_top(ts, true);
  }
}

// Something is about to open a scope, state or op of the core's on this thread (the core calls the settlers,
// plugin_api.register_settler): while only module frames of ours are open (no record), they become the core's
// scopes, outermost first, as they would have been opened without g_fast, so what opens now nests under them.
// Each frame is closed first, taking the sequence numbers of its nodes so far (remember_sequence), which
// go under its own context, named as the scope that replaces it is. With a record open, nothing changes:
// what opens inside a record wins over our frames, as it always has.
void settle(ThreadState& ts) {
  auto& frames = ts.frames;
  size_t n = frames.size();
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i)
    if (frames[i].kind != kModule) return;  // a record's frame: never kModule
  // Their module calls: the innermost n of kind kOwnFrame, in the same order (checked by context).
  auto& modules = ts.modules;
  std::vector<size_t> owners;
  for (size_t j = modules.size(); j > 0 && owners.size() < n; --j)
    if (modules[j - 1].kind == kOwnFrame) owners.push_back(j - 1);
  if (owners.size() != n) return;
  for (size_t k = 0; k < n; ++k)
    if (modules[owners[n - 1 - k]].ctx != frames[k].ctx || modules[owners[n - 1 - k]].name == nullptr) return;
  while (!frames.empty()) pop_top(ts, true);
  sweep_outside_frames(ts);
  for (size_t k = n; k > 0; --k) {
    ModuleFrame& m = modules[owners[k - 1]];
    uint64_t id = 0;
    m.kind = open_module_scope(ts, m.name, &id) ? kCoreScope : kNoScope;
    m.ctx = id;
    Py_CLEAR(m.name);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      g_callback_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace

PyObject* py_settle(PyObject*, PyObject*) {
  ThreadState* ts = t_fast;
  if (ts != nullptr && !ts->frames.empty()) settle(*ts);
  Py_RETURN_NONE;
}

namespace {

// Open a module call (``on``: ACTIVITY.any, else it gets no scope). Never raises into the user's forward:
// a failure leaves this call without a scope. Called with no exception set.
// Drop the module frames of an older install of the hooks (see g_module_generation).
__attribute__((noinline, cold)) void drop_stale_modules(ThreadState& ts) {
  auto& modules = ts.modules;
  while (!modules.empty() && modules.back().generation != g_module_generation) {
    ModuleFrame stale = modules.back();
    modules.pop_back();
    Py_DECREF(stale.module);
    Py_XDECREF(stale.name);
    if (stale.kind == kCoreScope) {  // its scope is still open on the core's stack: closed if innermost
      core_close_scope(stale.ctx);
      if (PyErr_Occurred()) PyErr_Clear();
    } else if (stale.kind == kOwnFrame) {  // its frame is still on ours: closed with those above it
      close_own_module_frame(ts, stale.ctx);
    }
  }
}

void module_enter(ThreadState& ts, PyObject* module, int on) {
  auto& modules = ts.modules;
  if (__builtin_expect(!modules.empty() && modules.back().generation != g_module_generation, 0)) drop_stale_modules(ts);
  PyObject* name;
  {
    PROTON_TIMED(kTimedModuleName);
    name = on > 0 ? module_name(modules.empty() ? nullptr : modules.back().module, module) : nullptr;
  }
  uint64_t id = 0;
  ModuleKind kind = kNoScope;
  // A frame of ours inside a record, and anywhere while providing without a trace (g_fast): there a module
  // call costs a push and a pop, and becomes the core's scope only if something opens one under it (settle).
  uint64_t set = 0;
  if (name != nullptr && g_on.load(std::memory_order_relaxed) &&
      (set = last_set(ts), !ts.frames.empty() || (g_fast.load(std::memory_order_relaxed) && plain_context(ts, set)))) {
    id = own_module_frame(ts, name, set);
    kind = id != 0 ? kOwnFrame : kNoScope;
  } else if (name != nullptr) {
    sweep_outside_frames(ts);
    kind = open_module_scope(ts, name, &id) ? kCoreScope : kNoScope;
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (kind != kOwnFrame) Py_CLEAR(name);  // kOwnFrame: the frame keeps the reference
  modules.push_back(ModuleFrame{Py_NewRef(module), name, id, g_module_generation, kind});
}

// Close the module call ``module`` if it is the innermost one open (else its enter was not ours).
void module_exit(ThreadState& ts, PyObject* module) {
  auto& modules = ts.modules;
  if (modules.empty() || modules.back().module != module) return;
  ModuleFrame f = modules.back();
  modules.pop_back();
  Py_DECREF(f.module);  // the caller holds its own reference: still alive here
  Py_XDECREF(f.name);
  if (f.kind == kOwnFrame) {
    close_own_module_frame(ts, f.ctx);
  } else if (f.kind == kCoreScope) {
    sweep_outside_frames(ts);
    close_core_scope(ts, f.ctx);
  }
}

}  // namespace

PyObject* py_module_pre_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || g_mod.api == nullptr) Py_RETURN_NONE;
  int on = activity_on();
  if (on < 0) PyErr_Clear();
  module_enter(state(), args[0], on);
  Py_RETURN_NONE;
}

PyObject* py_module_post_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs >= 1) module_exit(state(), args[0]);
  Py_RETURN_NONE;
}

namespace {

// nn.Module.__call__(self, *args, **kwargs): the original, with the module opened around it while a session
// records (ACTIVITY.any, as the Python wrapper checks); an exception from forward passes through unchanged.
PyObject* py_module_call(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* original = g_call_original;
  if (original == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "proton_torch: nn.Module.__call__ replaced without the original");
    return nullptr;
  }
  Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  size_t total = size_t(1 + nargs + nkw);
  PyObject* small[8];
  std::unique_ptr<PyObject*[]> big;
  PyObject** stack = small;
  if (total > 8) {
    big.reset(new PyObject*[total]);
    stack = big.get();
  }
  stack[0] = module;
  for (size_t i = 1; i < total; ++i) stack[i] = args[i - 1];
  Py_INCREF(original);  // a session ending inside forward may replace it
  int on = 0;
  if (g_call_on && g_mod.api != nullptr) {
    on = activity_on();
    if (on < 0) {
      PyErr_Clear();
      on = 0;
    }
  }
  if (on) {
    PROTON_TIMED(kTimedModuleEnter);
    module_enter(state(), module, on);
  }
  PyObject* result = PyObject_Vectorcall(original, stack, size_t(1 + nargs), kwnames);
  if (on) {
    PROTON_TIMED(kTimedModuleExit);
    PyObject *type, *value, *traceback;  // the forward's exception, kept across the exit
    PyErr_Fetch(&type, &value, &traceback);
    module_exit(state(), module);
    PyErr_Restore(type, value, traceback);
  }
  Py_DECREF(original);
  return result;
}

PyMethodDef g_call_def = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "__call__($self, /, *args, **kwargs)\n--\n\nCall the module (proton-profiler-torch: with its scope around "
    "the call while a session records)."};

}  // namespace

PyObject* py_module_call_descriptor(PyObject*, PyObject* args) {
  PyObject *type, *original;
  if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &type, &original)) return nullptr;
  if (!PyCallable_Check(original)) {
    PyErr_SetString(PyExc_TypeError, "module_call_descriptor(type, original): original must be callable");
    return nullptr;
  }
  if (g_call_descr == nullptr) {
    g_call_descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type), &g_call_def);
    if (g_call_descr == nullptr) return nullptr;
  } else if (PyDescr_TYPE(g_call_descr) != reinterpret_cast<PyTypeObject*>(type)) {
    PyErr_SetString(PyExc_ValueError, "module_call_descriptor: the descriptor belongs to another type");
    return nullptr;
  }
  Py_XSETREF(g_call_original, Py_NewRef(original));
  return Py_NewRef(g_call_descr);
}

PyObject* py_set_module_call(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  g_call_on = on != 0 && g_call_original != nullptr;
  Py_RETURN_NONE;
}

PyObject* py_module_ids(PyObject*, PyObject*) {
  PyObject* out = PyList_New(Py_ssize_t(g_module_ids.size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < g_module_ids.size(); ++i)
    PyList_SET_ITEM(out, Py_ssize_t(i), PyLong_FromUnsignedLongLong(g_module_ids[i]));
  return out;
}

}  // namespace proton_torch

