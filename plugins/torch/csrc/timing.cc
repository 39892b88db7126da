// Diagnostic timing (timing.h): the threads' counters and timing(), which reads them.
#include "thread_state.h"

namespace proton_torch {

#ifdef PROTON_TORCH_TIMING
namespace {

const char* const kTimedNames[] = {"enter", "exit", "provide", "module_enter", "module_exit", "backward_call",
                                   "engine_record", "(classify_name)", "(classify_lookup)", "(module_name)",
                                   "(fast_open)", "(fast_close)", "(setters)", "(empty timer)"};

}  // namespace

std::mutex g_times_mu;
std::vector<ThreadTimes*> g_times;  // never freed: read after their threads end
__thread ThreadTimes* t_times __attribute__((tls_model("initial-exec"))) = nullptr;
#endif

// timing() -> (TSC cycles per second, [(os thread id, {part: (cycles, calls)})]), or None in a build without
// PROTON_TORCH_TIMING; timing(True) also zeroes the counters.
PyObject* py_timing(PyObject*, PyObject* args) {
  int reset = 0;
  if (!PyArg_ParseTuple(args, "|p", &reset)) return nullptr;
#ifdef PROTON_TORCH_TIMING
  for (int i = 0; i < 1000; ++i) {  // the timer's own cost, as "(empty timer)"
    PROTON_TIMED(kTimedNothing);
    asm volatile("" ::: "memory");
  }
  static double hz = 0;
  if (hz == 0) {  // the TSC's rate against the monotonic clock, over 50 ms
    uint64_t n0 = now_ns(), c0 = __builtin_ia32_rdtsc();
    while (now_ns() - n0 < 50000000u) {
    }
    hz = double(__builtin_ia32_rdtsc() - c0) * 1e9 / double(now_ns() - n0);
  }
  std::lock_guard<std::mutex> g(g_times_mu);
  PyObject* out = PyList_New(0);
  for (ThreadTimes* t : g_times) {
    PyObject* parts = PyDict_New();
    for (int k = 0; parts != nullptr && k < kTimedParts; ++k) {
      PyObject* v = Py_BuildValue("(KK)", (unsigned long long)t->cycles[k], (unsigned long long)t->calls[k]);
      if (v == nullptr || PyDict_SetItemString(parts, kTimedNames[k], v) < 0) Py_CLEAR(parts);
      Py_XDECREF(v);
      if (reset) t->cycles[k] = t->calls[k] = 0;
    }
    PyObject* item = parts ? Py_BuildValue("(KN)", (unsigned long long)t->tid, parts) : nullptr;
    if (item == nullptr || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return Py_BuildValue("(dN)", hz, out);
#else
  Py_RETURN_NONE;
#endif
}

}  // namespace proton_torch

