// roctx ranges -> scopes (see markers.h).
#include "markers.h"

#include <proton_core/scope_api.h>

#include <atomic>
#include <cstring>
#include <vector>

namespace proton_roc {

namespace {

std::atomic<const ProtonScopeAPI*> g_api{nullptr};
std::atomic<uint64_t> g_misnested{0};
thread_local std::vector<uint64_t> tls_ranges;  // context ids of this thread's open roctx ranges

}  // namespace

bool enable_markers(bool on) {
  if (!on) {
    g_api.store(nullptr, std::memory_order_release);
    return true;
  }
  const ProtonScopeAPI* api = ProtonScopeAPI_Import(1);
  if (api == nullptr) return false;
  g_api.store(api, std::memory_order_release);
  return true;
}

void marker_push(const char* message) {
  const ProtonScopeAPI* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr || !Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* name = PyUnicode_DecodeUTF8(message && *message ? message : "<roctx>", Py_ssize_t(strlen(message && *message ? message : "<roctx>")), "replace");
  uint64_t id = 0;
  if (name != nullptr && api->open_scope(name, &id) == 0) {
    tls_ranges.push_back(id);
  } else {
    PyErr_Clear();
    tls_ranges.push_back(0);  // keeps pops paired with pushes
  }
  Py_XDECREF(name);
  PyGILState_Release(gil);
}

void marker_pop() {
  const ProtonScopeAPI* api = g_api.load(std::memory_order_acquire);
  if (tls_ranges.empty()) {
    g_misnested.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t id = tls_ranges.back();
  tls_ranges.pop_back();
  if (api == nullptr || id == 0 || !Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = api->close_scope(id);
  if (rc < 0) PyErr_Clear();
  if (rc != 1) g_misnested.fetch_add(1, std::memory_order_relaxed);
  PyGILState_Release(gil);
}

uint64_t marker_misnested() { return g_misnested.load(std::memory_order_relaxed); }

}  // namespace proton_roc
