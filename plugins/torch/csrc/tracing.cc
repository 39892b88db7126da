// Trace events (tracing.h): kept as frames close, drained by take_events().
#include "tracing.h"

namespace proton_torch {

namespace {

// ------------------------------------------------------ trace events ----
struct Event {
  uint64_t ctx;
  uint64_t tid;
  uint64_t start;
  uint64_t end;
};
std::mutex g_events_mu;
std::vector<Event> g_events;

}  // namespace

void record_event(ThreadState& ts, const Frame& f) {
  uint64_t end = now_ns();
  std::lock_guard<std::mutex> g(g_events_mu);
  if (g_events.size() >= kMaxEvents) {
    g_dropped_events.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_events.push_back(Event{f.ctx, os_thread(ts), f.start, end});
}

PyObject* py_set_tracing(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  std::lock_guard<std::mutex> g(g_enable_mu);
  g_tracing.store(on != 0);
  refresh_fast();
  apply_unobserved();
  Py_RETURN_NONE;
}

PyObject* py_take_events(PyObject*, PyObject*) {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> g(g_events_mu);
    events.swap(g_events);
  }
  PyObject* out = PyList_New(Py_ssize_t(events.size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    PyObject* t = Py_BuildValue("(KKKK)", (unsigned long long)e.ctx, (unsigned long long)e.tid,
                                (unsigned long long)e.start, (unsigned long long)e.end);
    if (t == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, Py_ssize_t(i), t);
  }
  return out;
}

}  // namespace proton_torch

