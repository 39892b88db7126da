// The provider a launch asks (launch_provider.h), and set_channels, which hands it to the backends.
#include "launch_provider.h"

namespace proton_torch {

NativeContext g_channels[kMaxChannels];
std::atomic<int> g_nchannels{0};
namespace {
// Each channel's set_provider (version 2), or nullptr; touched with the GIL held only.
void (*g_provider_setters[kMaxChannels])(uint64_t (*)(uint64_t)) = {};
int g_nprovider_setters = 0;

}  // namespace

uint64_t effective(ThreadState& ts) { return answer(ts, last_set(ts)); }

namespace {

// The provider the backends ask at each launch (providing), on the launching thread.
uint64_t provide(uint64_t set) {
  PROTON_TIMED(kTimedProvide);
  ThreadState* ts = t_fast;
  if (ts == nullptr) return set;
  try {
    return answer(*ts, set);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
    return set;
  }
}

}  // namespace

PyObject* py_set_channels(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"capsules", "provide", nullptr};
  PyObject* list;
  int wanted = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p", const_cast<char**>(kw), &list, &wanted)) return nullptr;
  PyObject* seq = PySequence_Fast(list, "set_channels takes a list of capsules");
  if (seq == nullptr) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  NativeContext found[kMaxChannels];
  void (*setters[kMaxChannels])(uint64_t (*)(uint64_t)) = {};
  int k = 0;
  bool all_provide = true;
  for (Py_ssize_t i = 0; i < n && k < kMaxChannels; ++i) {
    PyObject* cap = PySequence_Fast_GET_ITEM(seq, i);
    auto* nc = static_cast<NativeContext*>(PyCapsule_GetPointer(cap, "proton.native_context.v1"));
    if (nc == nullptr) {
      Py_DECREF(seq);
      return nullptr;
    }
    if (nc->version >= 1 && nc->set != nullptr && nc->get != nullptr) {
      setters[k] = nc->version >= 2 ? static_cast<NativeContextV2*>(nc)->set_provider : nullptr;
      all_provide = all_provide && setters[k] != nullptr;
      found[k++] = *nc;
    }
  }
  Py_DECREF(seq);
  // Only while no operator runs with hook="torch" on (the Python side calls this at session changes):
  // readers see the count first, and slots below it are written before it grows.
  for (int i = 0; i < g_nprovider_setters; ++i)
    if (g_provider_setters[i] != nullptr) g_provider_setters[i](nullptr);
  g_providing.store(false);
  refresh_fast();
  g_nchannels.store(0, std::memory_order_release);
  for (int i = 0; i < k; ++i) g_channels[i] = found[i];
  g_nchannels.store(k, std::memory_order_release);
  bool providing = wanted && k > 0 && all_provide;
  g_nprovider_setters = providing ? k : 0;
  for (int i = 0; i < g_nprovider_setters; ++i) {
    g_provider_setters[i] = setters[i];
    setters[i](&provide);
  }
  g_providing.store(providing);
  refresh_fast();
  return PyLong_FromLong(k);
}

PyObject* py_current(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(effective(state())); }

}  // namespace proton_torch

