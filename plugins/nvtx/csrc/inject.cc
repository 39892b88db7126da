// NVTX ranges as Proton scopes: the NVTX v3 injection library and its Python module in one file.
//
// NVTX_INJECTION64_PATH names this very .so, so the library NVTX loads and the
// module Python imports are one copy with one state.  Each NVTX range push
// becomes a scope on the calling thread:
//
// * a thread that holds the GIL (Python code, torch.cuda.nvtx, the nvtx
//   package) goes through Python, as proton.enter_scope does, so ranges and
//   Proton scopes nest in program order;
// * any other thread (NCCL, cuDNN, user C++) never touches Python: ranges are
//   interned here into context ids of the range the core reserved for this
//   plugin (which the core resolves through this module) and published to the running backends
//   through their native context setters (capsule "proton.native_context.v1").
//
// Start/End ranges and marks go to data="trace" sessions only: they are kept
// here and taken by Python when a session flushes.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nvtx_abi.h"
#include "proton_core/scope_api.h"

namespace {

using namespace nvtx_abi;

constexpr size_t kMaxNameBytes = 1024;             // longer names are cut (README)
constexpr int kMaxChannels = 8;

// What a backend exposes so native code can set the calling thread's context without Python.
struct NativeContext {
  uint32_t version;  // 1
  void (*set)(uint64_t context_id);
  uint64_t (*get)();
};

// ----------------------------------------------------------------- state ----
std::atomic<bool> g_on{false};        // a session with NVTX on is open
std::atomic<bool> g_cpu_time{false};  // record each range's wall time as cpu_time
std::atomic<bool> g_prefix{true};     // "domain::name"
std::atomic<int> g_inits{0};          // NVTX libraries that loaded us
std::atomic<bool> g_probe{false};     // count pushes while off (does a library reach us?)
std::atomic<uint64_t> g_probe_hits{0};
std::atomic<uint64_t> g_unbalanced{0};
std::atomic<uint64_t> g_python_errors{0};
std::atomic<uint64_t> g_native_pushes{0};
// The first of our context ids: the range the core reserved for this plugin (set_bridge), far above its own.
std::atomic<uint64_t> g_first_id{uint64_t(1) << 40};

// Backends' native setters; slots are written before the count grows and only while no session runs.
NativeContext g_channels[kMaxChannels];
std::atomic<int> g_nchannels{0};

PyObject* g_py_push = nullptr;  // plugin_api.open_scope(name) -> context id
PyObject* g_py_pop = nullptr;   // plugin_api.close_scope(context id) -> False if misnested
std::atomic<uint64_t> g_misnested{0};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // time.monotonic_ns()'s clock: trace events line up
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// ----------------------------------------------------------------- names ----
// A name is UTF-8, never empty, at most kMaxNameBytes (cut at a character boundary).
void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Bytes that are not UTF-8 become U+FFFD, so the profile file stays valid.
std::string clean_utf8(const char* s) {
  std::string out;
  if (s == nullptr) return out;
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  while (*p && out.size() < kMaxNameBytes) {
    unsigned c = *p;
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0) {
      append_utf8(out, 0xFFFD);
      ++p;
      continue;
    }
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    int i = 1;
    for (; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) break;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (i <= n) {  // truncated sequence
      append_utf8(out, 0xFFFD);
      p += i;
      continue;
    }
    append_utf8(out, cp);
    p += n + 1;
  }
  if (*p) out += "...";
  return out;
}

std::string from_wide(const wchar_t* s) {
  std::string out;
  if (s == nullptr) return out;
  for (; *s && out.size() < kMaxNameBytes; ++s) append_utf8(out, uint32_t(*s));
  if (*s) out += "...";
  return out;
}

std::atomic<bool> g_keep_ids{false};  // PROTON_NVTX_KEEP_IDS=1

// torch.autograd.profiler.emit_nvtx names every op call apart ("aten::linear, seq = 12, op_id = 225"):
// those counters are cut so calls of one op aggregate in one node (their shapes, if recorded, stay).
void strip_call_ids(std::string& name) {
  for (const char* tag : {", seq = ", ", op_id = "}) {
    size_t at = name.find(tag);
    while (at != std::string::npos) {
      size_t end = at + std::strlen(tag);
      while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
      name.erase(at, end - at);
      at = name.find(tag, at);
    }
  }
}

std::string finish(std::string name) {
  if (!g_keep_ids.load(std::memory_order_relaxed) && name.find(" = ") != std::string::npos) strip_call_ids(name);
  return name.empty() ? std::string("<empty>") : name;
}

struct Domain {
  std::string prefix;  // "name::"
};
struct Registered {
  std::string text;
};

std::string domain_name(const void* domain, std::string name) {
  if (domain != nullptr && g_prefix.load(std::memory_order_relaxed)) {
    const auto* d = static_cast<const Domain*>(domain);
    if (!d->prefix.empty()) return d->prefix + name;
  }
  return name;
}

std::string attributes_name(const EventAttributes* a) {
  if (a == nullptr) return std::string();
  switch (a->message_type) {
    case kMessageAscii: return clean_utf8(a->message.ascii);
    case kMessageUnicode: return from_wide(a->message.unicode);
    case kMessageRegistered:
      return a->message.registered ? static_cast<const Registered*>(a->message.registered)->text : std::string();
    default: return std::string();
  }
}

// ------------------------------------------------------------ native ids ----
// (parent context, name) -> our id; entries are kept for the process (ids never change).
std::mutex g_intern_mu;
std::unordered_map<std::string, uint64_t> g_intern;  // key: 8 bytes of parent + name
std::vector<std::pair<uint64_t, std::string>> g_entries;

uint64_t intern(uint64_t parent, const std::string& name) {
  std::string key(reinterpret_cast<const char*>(&parent), sizeof parent);
  key += name;
  std::lock_guard<std::mutex> g(g_intern_mu);
  auto it = g_intern.find(key);
  if (it != g_intern.end()) return it->second;
  uint64_t id = g_first_id.load(std::memory_order_relaxed) + g_entries.size();
  g_entries.emplace_back(parent, name);
  g_intern.emplace(std::move(key), id);
  return id;
}

// ------------------------------------------------------ per-thread stacks ----
enum Kind : uint8_t { kNative, kPython, kSkipped };

struct Range {
  Kind kind;
  const void* domain;
  uint64_t ctx;   // native: this range's id
  uint64_t prev;  // native: the context before it, restored at pop
  uint64_t start;
};

struct ThreadStack {
  std::vector<Range> ranges;
};
thread_local ThreadStack t_stack;

uint64_t backend_context() {
  int n = g_nchannels.load(std::memory_order_acquire);
  return n > 0 && g_channels[0].get != nullptr ? g_channels[0].get() : 0;
}

void publish(uint64_t ctx) {
  int n = g_nchannels.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) g_channels[i].set(ctx);
}

// Cpu time of native ranges, per context id, until Python takes it.
std::mutex g_metrics_mu;
std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> g_metrics;  // ctx -> (count, ns)

// Start/End ranges and marks for trace sessions.
struct TraceEvent {
  uint64_t ctx;
  std::string name;
  uint64_t tid;
  uint64_t start;
  uint64_t end;  // == start: a mark
};
std::mutex g_trace_mu;
std::unordered_map<uint64_t, TraceEvent> g_open;  // nvtxRangeId_t -> started range
std::vector<TraceEvent> g_done;
uint64_t g_next_range_id = 1;

uint64_t thread_id() { return uint64_t(PyThread_get_thread_native_id()); }

bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

bool holds_gil() { return python_alive() && PyGILState_Check(); }

uint64_t current_context() {
  const auto& r = t_stack.ranges;
  for (auto it = r.rbegin(); it != r.rend(); ++it)
    if (it->kind == kNative) return it->ctx;
  return backend_context();
}

// Names as Python strings, made once (touched only with the GIL held); bounded.
std::unordered_map<std::string, PyObject*> g_py_names;

// A new reference to the name's string (cached: the first 100 000 distinct names are kept).
PyObject* python_name(const std::string& name) {
  auto it = g_py_names.find(name);
  if (it != g_py_names.end()) {
    Py_INCREF(it->second);
    return it->second;
  }
  PyObject* s = PyUnicode_DecodeUTF8(name.data(), Py_ssize_t(name.size()), "replace");
  if (s != nullptr && g_py_names.size() < 100000) {
    Py_INCREF(s);
    g_py_names.emplace(name, s);
  }
  return s;
}

// Threads holding the GIL: ranges are scopes of the core's stack, through the core's scope engine
// (proton_core/scope_api.h); without it (a core built without its C extension) the Python functions
// set_bridge was given do the same.
const ProtonScopeAPI* g_api = nullptr;

// Open: the new id (>= 0), or -1 (an exception is set).
long long open_held(PyObject* name) {
  if (g_api != nullptr) {
    uint64_t id = 0;
    return g_api->open_scope(name, &id) == 0 ? (long long)id : -1;
  }
  PyObject* r = PyObject_CallOneArg(g_py_push, name);
  long long ctx = r ? PyLong_AsLongLong(r) : -1;
  Py_XDECREF(r);
  return ctx;
}

// Close: 1 closed, 0 another scope is innermost, -1 an exception.
int close_held(uint64_t id) {
  if (g_api != nullptr) return g_api->close_scope(id);
  PyObject* arg = PyLong_FromUnsignedLongLong(id);
  PyObject* res = arg ? PyObject_CallOneArg(g_py_pop, arg) : nullptr;
  Py_XDECREF(arg);
  int closed = res == nullptr ? -1 : res != Py_False;
  Py_XDECREF(res);
  return closed;
}

// ----------------------------------------------------------- push / pop ----
bool off() {
  if (g_on.load(std::memory_order_relaxed)) return false;
  if (g_probe.load(std::memory_order_relaxed)) g_probe_hits.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int push(const void* domain, std::string name) {
  if (!g_on.load(std::memory_order_relaxed)) return -1;
  name = domain_name(domain, finish(std::move(name)));
  auto& ranges = t_stack.ranges;
  uint64_t start = g_cpu_time.load(std::memory_order_relaxed) ? now_ns() : 0;
  if (holds_gil() && g_py_push != nullptr) {
    PyObject* s = python_name(name);
    long long ctx = s != nullptr ? open_held(s) : -1;
    Py_XDECREF(s);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      g_python_errors.fetch_add(1, std::memory_order_relaxed);
      ctx = -1;
    }
    ranges.push_back(Range{ctx >= 0 ? kPython : kSkipped, domain, ctx >= 0 ? uint64_t(ctx) : 0, 0, start});
    return int(ranges.size()) - 1;
  }
  uint64_t prev = current_context();
  uint64_t ctx = intern(prev, name);
  ranges.push_back(Range{kNative, domain, ctx, prev, start});
  g_native_pushes.fetch_add(1, std::memory_order_relaxed);
  publish(ctx);
  return int(ranges.size()) - 1;
}

int pop(const void* domain, bool match_domain) {
  auto& ranges = t_stack.ranges;
  if (ranges.empty() || (match_domain && ranges.back().domain != domain)) {
    if (g_on.load(std::memory_order_relaxed)) g_unbalanced.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  Range r = ranges.back();
  ranges.pop_back();
  int64_t ns = r.start != 0 ? int64_t(now_ns() - r.start) : -1;
  if (r.kind == kPython && python_alive()) {
    // Pushed holding the GIL; a pop without it (rare: a C++ region in between) takes it.
    bool held = PyGILState_Check();
    PyGILState_STATE st = held ? PyGILState_UNLOCKED : PyGILState_Ensure();
    if (g_api != nullptr || g_py_pop != nullptr) {
      int closed = close_held(r.ctx);
      if (closed == 0) g_misnested.fetch_add(1, std::memory_order_relaxed);
      if (closed < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        g_python_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (!held) PyGILState_Release(st);
  } else if (r.kind == kNative) {
    publish(r.prev);
  }
  if (ns >= 0 && r.kind != kSkipped) {
    std::lock_guard<std::mutex> g(g_metrics_mu);
    auto& m = g_metrics[r.ctx];
    m.first += 1;
    m.second += uint64_t(ns);
  }
  return int(ranges.size());
}

uint64_t range_start(std::string name, const void* domain) {
  if (!g_on.load(std::memory_order_relaxed)) return 0;
  name = domain_name(domain, finish(std::move(name)));
  uint64_t ctx = current_context();
  std::lock_guard<std::mutex> g(g_trace_mu);
  uint64_t id = g_next_range_id++;
  g_open.emplace(id, TraceEvent{ctx, std::move(name), thread_id(), now_ns(), 0});
  return id;
}

void range_end(uint64_t id) {
  if (id == 0) return;
  uint64_t end = now_ns();
  std::lock_guard<std::mutex> g(g_trace_mu);
  auto it = g_open.find(id);
  if (it == g_open.end()) return;
  it->second.end = end;
  g_done.push_back(std::move(it->second));
  g_open.erase(it);
}

void mark(std::string name, const void* domain) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  name = domain_name(domain, finish(std::move(name)));
  uint64_t t = now_ns();
  uint64_t ctx = current_context();
  std::lock_guard<std::mutex> g(g_trace_mu);
  g_done.push_back(TraceEvent{ctx, std::move(name), thread_id(), t, t});
}

// ------------------------------------------------------- NVTX callbacks ----
int RangePushA(const char* m) { return off() ? -1 : push(nullptr, clean_utf8(m)); }
int RangePushW(const wchar_t* m) { return off() ? -1 : push(nullptr, from_wide(m)); }
int RangePushEx(const EventAttributes* a) { return off() ? -1 : push(nullptr, attributes_name(a)); }
int RangePop() { return t_stack.ranges.empty() && !g_on.load(std::memory_order_relaxed) ? -1 : pop(nullptr, false); }
int DomainRangePushEx(const void* d, const EventAttributes* a) { return off() ? -1 : push(d, attributes_name(a)); }
int DomainRangePop(const void* d) {
  return t_stack.ranges.empty() && !g_on.load(std::memory_order_relaxed) ? -1 : pop(d, true);
}
uint64_t RangeStartA(const char* m) { return range_start(clean_utf8(m), nullptr); }
uint64_t RangeStartW(const wchar_t* m) { return range_start(from_wide(m), nullptr); }
uint64_t RangeStartEx(const EventAttributes* a) { return range_start(attributes_name(a), nullptr); }
uint64_t DomainRangeStartEx(const void* d, const EventAttributes* a) { return range_start(attributes_name(a), d); }
void RangeEnd(uint64_t id) { range_end(id); }
void DomainRangeEnd(const void*, uint64_t id) { range_end(id); }
void MarkA(const char* m) { mark(clean_utf8(m), nullptr); }
void MarkW(const wchar_t* m) { mark(from_wide(m), nullptr); }
void MarkEx(const EventAttributes* a) { mark(attributes_name(a), nullptr); }
void DomainMarkEx(const void* d, const EventAttributes* a) { mark(attributes_name(a), d); }

void* DomainCreateA(const char* name) { return new Domain{clean_utf8(name) + "::"}; }
void* DomainCreateW(const wchar_t* name) { return new Domain{from_wide(name) + "::"}; }
void DomainDestroy(void*) {}  // handles may still sit in open ranges: kept
void* DomainRegisterStringA(const void*, const char* s) { return new Registered{clean_utf8(s)}; }
void* DomainRegisterStringW(const void*, const wchar_t* s) { return new Registered{from_wide(s)}; }

template <typename F>
void fill(FunctionTable table, unsigned size, unsigned slot, F fn) {
  if (slot < size && table[slot] != nullptr) *table[slot] = reinterpret_cast<FunctionPointer>(fn);
}

// ------------------------------------------------------------ Python API ----
PyObject* py_configure(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"on", "cpu_time", "domain_prefix", "keep_ids", nullptr};
  int on = 0, cpu = 0, prefix = 1, keep = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ppp|p", const_cast<char**>(kw), &on, &cpu, &prefix, &keep))
    return nullptr;
  g_keep_ids.store(keep != 0);
  g_cpu_time.store(cpu != 0);
  g_prefix.store(prefix != 0);
  g_on.store(on != 0);
  Py_RETURN_NONE;
}

PyObject* py_set_bridge(PyObject*, PyObject* args) {
  PyObject *push_fn, *pop_fn;
  unsigned long long first = 0;
  if (!PyArg_ParseTuple(args, "OOK", &push_fn, &pop_fn, &first)) return nullptr;
  if (first == 0) {
    PyErr_SetString(PyExc_ValueError, "set_bridge: the first id of the reserved range must be above 0");
    return nullptr;
  }
  // The core's scope engine where it was built; else the Python functions do everything.
  const ProtonScopeAPI* api = ProtonScopeAPI_Import(1);
  if (api == nullptr) PyErr_Clear();
  g_api = api;
  g_first_id.store(first);
  if (push_fn == Py_None) push_fn = nullptr;
  if (pop_fn == Py_None) pop_fn = nullptr;
  Py_XINCREF(push_fn);
  Py_XINCREF(pop_fn);
  Py_XSETREF(g_py_push, push_fn);
  Py_XSETREF(g_py_pop, pop_fn);
  Py_RETURN_NONE;
}

PyObject* py_probe(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  g_probe_hits.store(0);
  g_probe.store(on != 0);
  Py_RETURN_NONE;
}

PyObject* py_set_channels(PyObject*, PyObject* arg) {
  PyObject* seq = PySequence_Fast(arg, "set_channels takes a list of capsules");
  if (seq == nullptr) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  g_nchannels.store(0, std::memory_order_release);
  int k = 0;
  for (Py_ssize_t i = 0; i < n && k < kMaxChannels; ++i) {
    PyObject* cap = PySequence_Fast_GET_ITEM(seq, i);
    auto* nc = static_cast<NativeContext*>(PyCapsule_GetPointer(cap, "proton.native_context.v1"));
    if (nc == nullptr) {
      Py_DECREF(seq);
      return nullptr;
    }
    if (nc->version >= 1 && nc->set != nullptr) g_channels[k++] = *nc;
  }
  Py_DECREF(seq);
  g_nchannels.store(k, std::memory_order_release);
  return PyLong_FromLong(k);
}

PyObject* py_resolve(PyObject*, PyObject* arg) {
  uint64_t id = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  std::lock_guard<std::mutex> g(g_intern_mu);
  uint64_t first = g_first_id.load(std::memory_order_relaxed);
  if (id < first || id - first >= g_entries.size()) Py_RETURN_NONE;
  const auto& e = g_entries[id - first];
  return Py_BuildValue("(Ks#)", (unsigned long long)e.first, e.second.data(), Py_ssize_t(e.second.size()));
}

PyObject* py_take(PyObject*, PyObject*) {
  PyObject* metrics = PyList_New(0);
  PyObject* events = PyList_New(0);
  if (!metrics || !events) return nullptr;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> m;
  std::vector<TraceEvent> done;
  {
    std::lock_guard<std::mutex> g(g_metrics_mu);
    m.swap(g_metrics);
  }
  {
    std::lock_guard<std::mutex> g(g_trace_mu);
    done.swap(g_done);
  }
  for (const auto& kv : m) {
    PyObject* t = Py_BuildValue("(KKK)", (unsigned long long)kv.first, (unsigned long long)kv.second.first,
                                (unsigned long long)kv.second.second);
    PyList_Append(metrics, t);
    Py_XDECREF(t);
  }
  for (const auto& e : done) {
    PyObject* t = Py_BuildValue("(Ks#KKK)", (unsigned long long)e.ctx, e.name.data(), Py_ssize_t(e.name.size()),
                                (unsigned long long)e.tid, (unsigned long long)e.start, (unsigned long long)e.end);
    PyList_Append(events, t);
    Py_XDECREF(t);
  }
  return Py_BuildValue("(NN)", metrics, events);
}

PyObject* py_stats(PyObject*, PyObject*) {
  return Py_BuildValue("{s:i,s:K,s:K,s:K,s:K,s:K,s:n}", "injections", g_inits.load(), "probe_hits",
                       (unsigned long long)g_probe_hits.load(), "misnested_pops",
                       (unsigned long long)g_misnested.load(), "unbalanced_pops",
                       (unsigned long long)g_unbalanced.load(), "python_errors",
                       (unsigned long long)g_python_errors.load(), "native_pushes",
                       (unsigned long long)g_native_pushes.load(), "open_ranges_this_thread",
                       Py_ssize_t(t_stack.ranges.size()));
}

PyObject* py_reset_stats(PyObject*, PyObject*) {
  g_unbalanced.store(0);
  g_misnested.store(0);
  g_python_errors.store(0);
  g_native_pushes.store(0);
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"configure", reinterpret_cast<PyCFunction>(py_configure), METH_VARARGS | METH_KEYWORDS,
     "configure(on, cpu_time, domain_prefix, keep_ids=False): what pushes do from now on"},
    {"set_bridge", py_set_bridge, METH_VARARGS,
     "set_bridge(push, pop, first_id): GIL-holding threads' ranges through the core's scope engine (its C API, "
     "else push/pop); native ids from first_id, the range the core reserved"},
    {"probe", py_probe, METH_O, "probe(on): count pushes that reach us while off (stats()['probe_hits'])"},
    {"set_channels", py_set_channels, METH_O,
     "set_channels([capsule, ...]): the running backends' native context setters; returns how many"},
    {"resolve", py_resolve, METH_O, "resolve(id) -> (parent id, name) of one of our context ids, or None"},
    {"take", py_take, METH_NOARGS,
     "take() -> ([(ctx, count, cpu_ns)], [(ctx, name, tid, start, end)]): native ranges' time and trace events"},
    {"stats", py_stats, METH_NOARGS, "counters: injections, unbalanced_pops, python_errors, native_pushes"},
    {"reset_stats", py_reset_stats, METH_NOARGS, "zero the counters (tests)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_inject", "NVTX v3 injection library and its Python side", -1,
                       kMethods};

}  // namespace

extern "C" {

// Called by each NVTX-using library on its first NVTX call when NVTX_INJECTION64_PATH names this file.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(GetExportTable get_export_table) {
  if (get_export_table == nullptr) return 0;
  const auto* cb = static_cast<const ExportTableCallbacks*>(get_export_table(kExportTableCallbacks));
  if (cb == nullptr || cb->GetModuleFunctionTable == nullptr) return 0;
  FunctionTable table = nullptr;
  unsigned size = 0;
  if (cb->GetModuleFunctionTable(kModuleCore, &table, &size) == 0 || table == nullptr) return 0;
  fill(table, size, kMarkEx, MarkEx);
  fill(table, size, kMarkA, MarkA);
  fill(table, size, kMarkW, MarkW);
  fill(table, size, kRangeStartEx, RangeStartEx);
  fill(table, size, kRangeStartA, RangeStartA);
  fill(table, size, kRangeStartW, RangeStartW);
  fill(table, size, kRangeEnd, RangeEnd);
  fill(table, size, kRangePushEx, RangePushEx);
  fill(table, size, kRangePushA, RangePushA);
  fill(table, size, kRangePushW, RangePushW);
  fill(table, size, kRangePop, RangePop);
  if (cb->GetModuleFunctionTable(kModuleCore2, &table, &size) != 0 && table != nullptr) {
    fill(table, size, kDomainMarkEx, DomainMarkEx);
    fill(table, size, kDomainRangeStartEx, DomainRangeStartEx);
    fill(table, size, kDomainRangeEnd, DomainRangeEnd);
    fill(table, size, kDomainRangePushEx, DomainRangePushEx);
    fill(table, size, kDomainRangePop, DomainRangePop);
    fill(table, size, kDomainRegisterStringA, DomainRegisterStringA);
    fill(table, size, kDomainRegisterStringW, DomainRegisterStringW);
    fill(table, size, kDomainCreateA, DomainCreateA);
    fill(table, size, kDomainCreateW, DomainCreateW);
    fill(table, size, kDomainDestroy, DomainDestroy);
  }
  g_inits.fetch_add(1);
  return 1;
}

PyMODINIT_FUNC PyInit__inject(void) { return PyModule_Create(&kModule); }

}  // extern "C"
