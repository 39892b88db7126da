// Diagnostic timing of the extension's entry points (a PROTON_TORCH_TIMING=1 build only): PROTON_TIMED(part).
#pragma once

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <vector>

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// timing() -> the counters of a PROTON_TORCH_TIMING=1 build, else None (timing.cc).
PyObject* py_timing(PyObject*, PyObject* args);

}  // namespace proton_torch
#pragma GCC visibility pop

// ------------------------------------------------------- diagnostic timing ----
// Built with PROTON_TORCH_TIMING=1 (setup.py): TSC cycles and calls of each entry point of ours, per thread,
// read by timing(). Never in a release build: each timed call pays two rdtsc.
#ifdef PROTON_TORCH_TIMING

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

enum TimedPart { kTimedEnter, kTimedExit, kTimedProvide, kTimedModuleEnter, kTimedModuleExit, kTimedBackwardCall,
                 kTimedEngineRecord, kTimedClassifyName, kTimedClassifyLookup, kTimedModuleName, kTimedFastOpen,
                 kTimedFastClose, kTimedSetters, kTimedNothing, kTimedParts };
struct ThreadTimes {
  uint64_t tid = 0;
  uint64_t cycles[kTimedParts] = {};
  uint64_t calls[kTimedParts] = {};
};
extern std::mutex g_times_mu;
extern std::vector<ThreadTimes*> g_times;  // never freed: read after their threads end
extern __thread ThreadTimes* t_times __attribute__((tls_model("initial-exec")));

inline ThreadTimes& thread_times() {
  if (t_times == nullptr) {
    auto* t = new ThreadTimes();
    t->tid = uint64_t(syscall(SYS_gettid));
    std::lock_guard<std::mutex> g(g_times_mu);
    g_times.push_back(t);
    t_times = t;
  }
  return *t_times;
}

struct Timed {
  TimedPart part;
  uint64_t start;
  explicit Timed(TimedPart p) : part(p), start(__builtin_ia32_rdtsc()) {}
  ~Timed() {
    ThreadTimes& t = thread_times();
    t.cycles[part] += __builtin_ia32_rdtsc() - start;
    ++t.calls[part];
  }
};

}  // namespace proton_torch
#pragma GCC visibility pop

#define PROTON_TIMED(part) Timed timed_scope_(part)
#else
#define PROTON_TIMED(part)
#endif

