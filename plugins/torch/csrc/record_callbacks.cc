// The RecordFunction callbacks (record_callbacks.h): their registration, which operators torch observes,
// and each record's entry and exit.
#include "record_callbacks.h"

#include <ATen/SequenceNumber.h>

#include <cstring>

#include "autograd_records.h"
#include "launch_provider.h"
#include "operator_names.h"
#include "torch_internals.h"
#include "tracing.h"
#include "unobserved.h"

namespace proton_torch {

using proton_torch_internals::names_operator;
using proton_torch_internals::observer_count;
using proton_torch_internals::operator_schema;
using proton_torch_internals::record_string;

// ---------------------------------------------------------------- callbacks ----
// Two ways to hand contexts to the backends, chosen by set_channels:
// * providing (every running backend's capsule has set_provider, version 2): an operator's entry pushes
//   its frame and names it (on_enter); nothing is set. A launch asks the provider (``provide``) for its
//   context, the innermost frame's. Frames of other records (autograd's own "detach", say) are pushed
//   open and named when something first needs them (``resolve_to``).
// * publishing (a backend of version 1): each frame is resolved at its entry and its context set,
//   and the previous one set again at its exit.
// Input shapes (record_shapes) resolve each frame at its entry either way: the inputs are there only.

namespace {

const char kEnginePrefix[] = "autograd::engine::evaluate_function: ";

// X where a record of its own string (names_operator(rf) must not hold) is autograd's record of a node,
// "autograd::engine::evaluate_function: X", else nullptr (a comparison of fixed length, expanded in place).
inline const char* engine_node(const at::RecordFunction& rf) {
  const std::string& name = record_string(rf);
  constexpr size_t n = sizeof kEnginePrefix - 1;
  return name.size() >= n && std::memcmp(name.data(), kEnginePrefix, n) == 0 ? name.c_str() + n : nullptr;
}

at::CallbackHandle g_handle = at::INVALID_CALLBACK_HANDLE;  // touched with the GIL held only

struct SchemaListener final : c10::OpRegistrationListener {
  void onOperatorRegistered(const c10::OperatorHandle&) override {}
  void onOperatorDeregistered(const c10::OperatorHandle&) override { g_schema_generation.fetch_add(1); }
};

void listen_for_removed_operators() {
  static c10::RegistrationHandleRAII* handle = nullptr;  // kept for the process
  if (handle == nullptr)
    handle = new c10::RegistrationHandleRAII(
        c10::Dispatcher::singleton().addRegistrationListener(std::make_unique<SchemaListener>()));
}

bool g_null_hide = false;  // the benchmark's null observer asked for the operators that launch nothing hidden

}  // namespace

// Hide or show the operators that launch nothing as the state now asks (g_enable_mu held).
void apply_unobserved() {
  bool hide = (g_on.load() && !g_tracing.load() && !g_other_observer && !g_observe_all) || g_null_hide;
  g_unobserved.store(proton_torch::set_unobserved(hide));
}

namespace {

// The outermost frame is opening: the context it opens in, and a sweep.
__attribute__((noinline)) void open_outermost(ThreadState& ts) {
  ts.base = last_set(ts);
  sweep(ts, ts.base);
}

// A frame for ``rf`` (or a module, rf == nullptr) on top of the thread's stack, not resolved, entered at
// ``start`` (0: not traced). Inlined: it is the whole of an operator's entry on the fast path (on_enter).
__attribute__((always_inline)) inline Frame& push_open(ThreadState& ts, const at::RecordFunction* rf, int64_t seq,
                                                       uint64_t start) {
  if (ts.frames.empty()) open_outermost(ts);
  ts.frames.push_back(Frame{rf, nullptr, nullptr, 0, 0, start, seq, kOpen, false});
  return ts.frames.back();
}

}  // namespace

// push_open, timed while a session traces.
Frame& push_frame(ThreadState& ts, const at::RecordFunction* rf, int64_t seq) {
  return push_open(ts, rf, seq, g_tracing.load(std::memory_order_relaxed) ? now_ns() : 0);
}

// Publishing: make the new top frame's context the thread's (``prev``: the one before, set again at its
// exit if this one changed it; ``always``: set it even where it is the same).
void set_top(ThreadState& ts, uint64_t prev, bool always) {
  Frame& f = ts.frames.back();
  f.prev = prev;
  if (g_providing.load(std::memory_order_relaxed) || (f.ctx == prev && !always)) return;
  f.changed = true;
  publish(ts, f.ctx);
}

namespace {

// A record runs another observer besides ours: it may want every operator, so all are observed again (until
// the next enable). The operators' records it missed meanwhile are those between its start and this record.
__attribute__((noinline)) void another_observer() {
  if (!g_unobserved.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> g(g_enable_mu);
  g_other_observer = true;
  apply_unobserved();
}

// Every other entry: publishing, tracing or shapes; a thread's first record; a full stack; a record of neither
// an operator nor a node. Cold while providing: kept out of the hot entry's cache lines.
__attribute__((noinline, cold)) std::unique_ptr<at::ObserverContext> enter_slow(const at::RecordFunction& rf) {
  if (!g_on.load(std::memory_order_relaxed)) return nullptr;
  try {
    ThreadState& ts = state();
    if (!names_operator(rf)) {
      if (const char* node = engine_node(rf)) {
        enter_backward(ts, rf, node);
        return nullptr;
      }
    }
    if (g_providing.load(std::memory_order_relaxed) && !g_shapes.load(std::memory_order_relaxed)) {
      push_frame(ts, &rf, rf.seqNr());
      return nullptr;
    }
    uint64_t cur = effective(ts);
    push_frame(ts, &rf, rf.seqNr());
    classify(ts, ts.frames.size() - 1, cur, &rf);
    set_top(ts, cur);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
  return nullptr;
}

// An operator's entry, providing (g_fast): a frame pushed and named at once; an autograd node's, a frame looked up
// when needed (enter_backward). Everything else (a thread's first record, another record, a full stack) takes
// enter_slow.
//
// Named now, not when a launch first asks: with the operators that launch nothing unobserved, nearly every
// record left is named by some launch anyway, and here the name comes from classify_operator's cache by the
// schema's address, which the record holds, without reading the schema (on the H200, a launch's provider took
// 470-690 ns naming frames from their schemas, all cache misses; torch_part_times.py).
std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& rf) {
  PROTON_TIMED(kTimedEnter);
  if (__builtin_expect(observer_count(rf) != 1, 0)) another_observer();
  ThreadState* ts = t_fast;
  if (__builtin_expect(ts != nullptr && g_fast.load(std::memory_order_relaxed) && !ts->frames.full(), 1)) {
    if (__builtin_expect(names_operator(rf), 1)) {
      push_open(*ts, &rf, rf.seqNr(), 0).schema = operator_schema(rf);  // g_fast: not tracing
      try {
        auto& frames = ts->frames;
        size_t i = frames.size() - 1;
        uint64_t parent = i == 0 ? ts->base : unresolved(frames[i - 1].kind) ? resolve_to(*ts, i - 1) : frames[i - 1].ctx;
        classify_operator(*ts, i, parent);
      } catch (...) {  // left open: a launch or the exit names it
        g_callback_errors.fetch_add(1, std::memory_order_relaxed);
      }
      return nullptr;
    }
    if (const char* node = engine_node(rf)) {  // autograd's record of a node: a frame looked up when needed
      try {
        enter_backward(*ts, rf, node);
      } catch (...) {
        g_callback_errors.fetch_add(1, std::memory_order_relaxed);
      }
      return nullptr;
    }
  }
  return enter_slow(rf);
}

}  // namespace

// Close the top frame: its record is ending now (``ended``), or lost its end (its record may be gone,
// so it is not looked at).
void pop_top(ThreadState& ts, bool ended) {
  size_t i = ts.frames.size() - 1;
  const Frame& f = ts.frames[i];
  if (ended && f.seq >= 0) remember_sequence(ts, i);
  if (f.start != 0) {
    if (ended && unresolved(f.kind)) resolve_to(ts, i);
    if (f.kind == kOp || f.kind == kBackward || f.kind == kModule) record_event(ts, f);
  }
  bool changed = f.changed;
  uint64_t prev = f.prev;
  ts.frames.pop_back();
  if (changed) publish(ts, prev);
}

namespace {

__attribute__((noinline)) void exit_slow(const at::RecordFunction& rf) {
  ThreadState& ts = state();
  auto& frames = ts.frames;
  size_t i = frames.size();
  if (__builtin_expect(i == 0 || frames[i - 1].rf != &rf, 0)) {
    // Not the innermost frame: those above lost their end (an asynchronous record ending elsewhere),
    // and close with it.
    while (i > 0 && frames[i - 1].rf != &rf) --i;
    if (i == 0) {
      if (g_on.load(std::memory_order_relaxed)) g_misnested.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  try {
    while (frames.size() > i) pop_top(ts, false);
    pop_top(ts, true);
  } catch (...) {
    g_callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// A record's exit: where its frame is the innermost, set no context, kept no entry time and took no sequence
// number a node was given (remember_sequence), a pop; else exit_slow.
void on_exit(const at::RecordFunction& rf, at::ObserverContext*) {
  PROTON_TIMED(kTimedExit);
  ThreadState* ts = t_fast;
  if (__builtin_expect(ts != nullptr && !ts->frames.empty(), 1)) {
    const Frame& f = ts->frames.back();
    if (__builtin_expect(f.rf == &rf && f.start == 0 && !f.changed, 1) &&
        (f.seq < 0 || int64_t(at::sequence_number::peek()) <= f.seq)) {
      ts->frames.pop_back();
      return;
    }
  }
  exit_slow(rf);
}

// ------------------------------------------------------------- Python API ----
// Global callbacks on operator and backward-function records: ours, and the benchmarks' null observer
// (which must be registered exactly as ours are to stand for torch's share).
at::CallbackHandle add_callbacks(at::RecordFunctionCallback::StartCallback start,
                                 at::RecordFunctionCallback::EndCallback end, bool inputs) {
  at::RecordFunctionCallback cb(start, end);
  cb.needsInputs(inputs).scopes({at::RecordScope::FUNCTION});
  return at::addGlobalCallback(cb);
}

bool set_callbacks(bool on, bool shapes, bool observe_all = false) {
  std::lock_guard<std::mutex> g(g_enable_mu);
  if (g_handle != at::INVALID_CALLBACK_HANDLE && (!on || shapes != g_shapes.load())) {
    at::removeCallback(g_handle);
    g_handle = at::INVALID_CALLBACK_HANDLE;
  }
  g_shapes.store(shapes);
  bool starting = on && !g_on.load();
  if (starting) listen_for_removed_operators();
  if (on && g_handle == at::INVALID_CALLBACK_HANDLE) g_handle = add_callbacks(&on_enter, &on_exit, shapes);
  if (starting) {
    g_other_observer = false;
    g_observe_all = observe_all;
    g_sweep_epoch.fetch_add(1);
    sweep(state(), 0);  // the starting thread's first sweep of the epoch: its numbers count from here
  }
  g_on.store(on);
  refresh_fast();
  apply_unobserved();
  return true;
}

// The least any RecordFunction observer costs: callbacks registered as ours are (add_callbacks, no
// inputs) that do nothing. benchmarks/ measures it beside the floor and ours, to tell torch's
// price for building records from what our callbacks add.
std::unique_ptr<at::ObserverContext> null_enter(const at::RecordFunction&) { return nullptr; }
void null_exit(const at::RecordFunction&, at::ObserverContext*) {}
at::CallbackHandle g_null_handle = at::INVALID_CALLBACK_HANDLE;

}  // namespace

PyObject* py_null_observer(PyObject*, PyObject* args) {
  int on = 0, hide = 0;
  if (!PyArg_ParseTuple(args, "p|p", &on, &hide)) return nullptr;
  std::lock_guard<std::mutex> g(g_enable_mu);
  try {
    g_null_hide = on && hide;
    apply_unobserved();
    if (!on && g_null_handle != at::INVALID_CALLBACK_HANDLE) {
      at::removeCallback(g_null_handle);
      g_null_handle = at::INVALID_CALLBACK_HANDLE;
    } else if (on && g_null_handle == at::INVALID_CALLBACK_HANDLE) {
      g_null_handle = add_callbacks(&null_enter, &null_exit, false);
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_enable(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"shapes", "observe_all", nullptr};
  int shapes = 0, observe_all = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pp", const_cast<char**>(kw), &shapes, &observe_all))
    return nullptr;
  try {
    set_callbacks(true, shapes != 0, observe_all != 0);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_disable(PyObject*, PyObject*) {
  try {
    set_callbacks(false, false);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_forget_after_fork(PyObject*, PyObject*) {
  // A forked child has no session: stop setting contexts without touching torch's own (copied) locks.
  g_on.store(false);
  g_providing.store(false);
  refresh_fast();
  g_nchannels.store(0);
  g_unobserved.store(proton_torch::set_unobserved(false));
  Py_RETURN_NONE;
}

PyObject* py_unobserved(PyObject*, PyObject*) {
  std::vector<std::string> names;
  try {
    names = proton_torch::unobserved_now();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyObject* out = PyList_New(0);
  for (const std::string& name : names) {
    PyObject* item = out ? PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size())) : nullptr;
    if (item == nullptr || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_XDECREF(out);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return out;
}

}  // namespace proton_torch

