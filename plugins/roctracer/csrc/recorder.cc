// Launch bookkeeping, the call-path trie and dispatch aggregation (see recorder.h).
#include "recorder.h"

#include <frameobject.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace proton_roc {

namespace {

// The calling thread's core context id: scopes set it on every enter/exit.  Default TLS model, not
// initial-exec: the static TLS block that dlopen'ed modules share is small, and the cupti extension
// already takes part of it ("cannot allocate memory in static TLS block" when both load).
thread_local uint64_t tls_ctx = 0;
// Whether the core ever set this thread's context, and whether it is the process's main thread (-1: not looked
// up yet).  A thread whose context was never set (HIP's or autograd's worker threads) launches under the main
// thread's context of the moment, as with CUPTI (decision 0245).
thread_local bool tls_own = false;
thread_local int8_t tls_main = -1;
std::atomic<uint64_t> g_main_ctx{0};
std::atomic<Recorder::ContextProvider> g_provider{nullptr};

inline bool is_main_thread() {
  if (tls_main < 0) tls_main = syscall(SYS_gettid) == getpid() ? 1 : 0;
  return tls_main == 1;
}

inline uint64_t thread_context() { return tls_own ? tls_ctx : g_main_ctx.load(std::memory_order_relaxed); }

// The last few contexts this thread launched under and their trie nodes: no lock on a repeat.
struct CachedContext {
  uint64_t ctx = 0;
  uint32_t node = 0, gen = 0;  // gen 0: empty
};
constexpr unsigned kCacheBits = 5;
struct ThreadState {
  CachedContext cache[1u << kCacheBits];
  uint32_t tid = 0;
  // Inside hipGraphLaunch: the graph's captured paths and the next dispatch's ordinal.
  std::shared_ptr<const std::vector<uint32_t>> graph;
  uint32_t ordinal = 0;
  uint32_t graph_gen = 0;
};
thread_local ThreadState tls;

uint32_t thread_id() {
  if (tls.tid == 0) tls.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tls.tid;
}

std::string str_attr(PyObject* obj, const char* name) {
  std::string out;
  PyObject* v = PyObject_GetAttrString(obj, name);
  if (v != nullptr && PyUnicode_Check(v)) {
    const char* s = PyUnicode_AsUTF8(v);
    if (s != nullptr) out = s;
  }
  Py_XDECREF(v);
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

constexpr int kMaxFrames = 256;

}  // namespace

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: the SDK may call back during exit
  return *r;
}

Recorder::Recorder() : slots_(new Slot[kSlots]) {}

void Recorder::set_context(uint64_t ctx) {
  tls_ctx = ctx;
  tls_own = true;
  if (is_main_thread()) g_main_ctx.store(ctx, std::memory_order_relaxed);
}
uint64_t Recorder::context() { return thread_context(); }
void Recorder::set_provider(ContextProvider p) { g_provider.store(p, std::memory_order_release); }

void Recorder::reset() {
  std::lock_guard<std::mutex> gr(graph_mu_);
  std::lock_guard<std::mutex> t(trie_mu_);
  std::lock_guard<std::mutex> a(agg_mu_);
  nodes_.clear();
  node_index_.clear();
  nodes_exported_ = 0;
  // Captured paths name nodes of the old trie: graphs captured before this session lose them.
  captures_.clear();
  capturing_.store(0);
  graphs_.clear();
  execs_.clear();
  reroot_cache_.clear();
  agg_.clear();
  events_.clear();
  devices_seen_.clear();
  dropped_.store(0);
  sdk_dropped_.store(0);
  switch_every_.store(0);
  launches_.store(0);
  records_.store(0);
  unsessioned_.store(0);
  unmatched_.store(0);
  zero_time_.store(0);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void Recorder::configure(bool python_frames, bool trace, std::vector<std::string> dirs, std::vector<std::string> files) {
  {
    std::lock_guard<std::mutex> t(trie_mu_);
    internal_dirs_ = std::move(dirs);
    internal_files_ = std::move(files);
    for (size_t i = 0; i < codes_.size(); ++i) code_internal_[i] = is_internal(str_attr(codes_[i], "co_filename"));
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  trace_.store(trace, std::memory_order_release);
  python_frames_.store(python_frames, std::memory_order_release);
}

void Recorder::set_epoch(uint32_t epoch) {
  switch_every_.store(0, std::memory_order_relaxed);
  epoch_.store(epoch, std::memory_order_release);
}

void Recorder::switch_epochs(uint32_t every, uint32_t last) {
  switch_left_.store(every, std::memory_order_relaxed);
  switch_last_.store(last, std::memory_order_relaxed);
  switch_every_.store(last > epoch_.load(std::memory_order_relaxed) ? every : 0, std::memory_order_release);
}

// The launch that completes a count of `every` stays in its epoch; later ones go to the next one.
void Recorder::count_for_switch(uint32_t every) {
  if (switch_left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  uint32_t e = epoch_.load(std::memory_order_acquire);
  if (e + 1 > switch_last_.load(std::memory_order_relaxed)) {
    switch_every_.store(0, std::memory_order_relaxed);
    return;
  }
  uint32_t expected = e;
  if (epoch_.compare_exchange_strong(expected, e + 1, std::memory_order_acq_rel))
    switch_left_.fetch_add(every, std::memory_order_acq_rel);
}

bool Recorder::is_internal(const std::string& filename) const {
  for (const auto& f : internal_files_)
    if (filename == f) return true;
  for (const auto& d : internal_dirs_)
    if (filename.compare(0, d.size(), d) == 0) return true;
  return false;
}

// ------------------------------------------------------------ launches ----
void Recorder::on_launch(uint64_t corr) {
  Slot& s = slots_[corr & (kSlots - 1)];
  uint32_t e = epoch_.load(std::memory_order_acquire);
  launches_.fetch_add(1, std::memory_order_relaxed);
  uint32_t node = e == 0 ? 0 : current_node();
  ThreadState& t = tls;
  if (t.graph) {  // the n-th dispatch of a graph launch: under the path its kernel was captured at
    uint32_t ordinal = t.ordinal++;
    if (e != 0 && t.graph_gen == generation_.load(std::memory_order_relaxed) && ordinal < t.graph->size() &&
        (*t.graph)[ordinal] != 0)
      node = reroot(node, (*t.graph)[ordinal]);
  }
  s.corr.store(0, std::memory_order_relaxed);  // invalidate, write, publish: the reader re-checks corr
  std::atomic_thread_fence(std::memory_order_release);
  s.epoch.store(e, std::memory_order_relaxed);
  s.node.store(node, std::memory_order_relaxed);
  if (e != 0 && trace_.load(std::memory_order_relaxed)) {
    s.tid.store(thread_id(), std::memory_order_relaxed);
    s.launch_ns.store(monotonic_ns(), std::memory_order_relaxed);
  }
  s.corr.store(corr, std::memory_order_release);
  if (e != 0) {
    uint32_t every = switch_every_.load(std::memory_order_relaxed);
    if (every != 0) count_for_switch(every);
  }
}

uint32_t Recorder::intern_locked(uint32_t parent, uint32_t kind, uint64_t value) {
  NodeKey key{parent, kind, value};
  auto it = node_index_.find(key);
  if (it != node_index_.end()) return it->second;
  nodes_.push_back(key);
  uint32_t id = uint32_t(nodes_.size());
  node_index_.emplace(key, id);
  return id;
}

uint32_t Recorder::current_node() {
  Recorder::ContextProvider provider = g_provider.load(std::memory_order_acquire);
  uint64_t own = thread_context();
  uint64_t ctx = provider != nullptr ? provider(own) : own;
  if (python_frames_.load(std::memory_order_relaxed)) return frames_node(ctx);
  uint32_t gen = generation_.load(std::memory_order_acquire);
  CachedContext& c = tls.cache[(ctx * 0x9E3779B97F4A7C15ull) >> (64 - kCacheBits)];
  if (c.gen == gen && c.ctx == ctx) return c.node;
  std::lock_guard<std::mutex> g(trie_mu_);
  c.node = intern_locked(0, kNodeContext, ctx);
  c.ctx = ctx;
  c.gen = gen;
  return c.node;
}

uint32_t Recorder::code_index_locked(PyObject* code) {
  auto it = code_index_.find(code);
  if (it != code_index_.end()) return it->second;
  Py_INCREF(code);  // keeps its address from being reused by another code object
  uint32_t idx = uint32_t(codes_.size());
  codes_.push_back(code);
  code_internal_.push_back(is_internal(str_attr(code, "co_filename")));
  code_index_.emplace(code, idx);
  return idx;
}

// The python context: the launching thread's frames, read with the GIL (taken back if the thread
// released it; a thread Python never saw has no frames and launches under its context alone).
uint32_t Recorder::frames_node(uint64_t ctx) {
  PyObject* codes[kMaxFrames];
  int lines[kMaxFrames];
  int n = 0;
  bool held = Py_IsInitialized() && PyGILState_Check();
  bool python_thread = held || (Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr);
  PyGILState_STATE gil{};
  if (python_thread && !held) gil = PyGILState_Ensure();
  if (python_thread) {
    PyThreadState* ts = PyThreadState_Get();
    PyFrameObject* f = ts ? PyThreadState_GetFrame(ts) : nullptr;
    while (f != nullptr && n < kMaxFrames) {
      codes[n] = reinterpret_cast<PyObject*>(PyFrame_GetCode(f));
      lines[n] = PyFrame_GetLineNumber(f);
      ++n;
      PyFrameObject* back = PyFrame_GetBack(f);
      Py_DECREF(f);
      f = back;
    }
    Py_XDECREF(f);
  }
  uint32_t parent = 0;
  {
    std::lock_guard<std::mutex> g(trie_mu_);
    for (int i = n - 1; i >= 0; --i) {
      uint32_t idx = code_index_locked(codes[i]);
      if (!code_internal_[idx]) parent = intern_locked(parent, kNodeFrame, (uint64_t(idx) << 32) | uint32_t(lines[i]));
    }
    parent = intern_locked(parent, kNodeContext, ctx);
  }
  for (int i = 0; i < n; ++i) Py_DECREF(codes[i]);
  if (python_thread && !held) PyGILState_Release(gil);
  return parent;
}

// ----------------------------------------------------------- HIP graphs ----
void Recorder::on_capture_begin(uint64_t stream) {
  std::lock_guard<std::mutex> g(graph_mu_);
  if (captures_.emplace(stream, std::vector<uint32_t>{}).second) capturing_.fetch_add(1, std::memory_order_release);
}

void Recorder::on_capture_launch(uint64_t stream) {
  if (capturing_.load(std::memory_order_acquire) == 0) return;  // every launch outside a capture: one load
  {
    std::lock_guard<std::mutex> g(graph_mu_);
    if (captures_.find(stream) == captures_.end()) return;
  }
  uint32_t node = current_node();  // takes the trie lock (and the GIL for python frames): not under graph_mu_
  std::lock_guard<std::mutex> g(graph_mu_);
  auto it = captures_.find(stream);
  if (it != captures_.end()) it->second.push_back(node);
}

void Recorder::on_capture_end(uint64_t stream, uint64_t graph) {
  std::lock_guard<std::mutex> g(graph_mu_);
  auto it = captures_.find(stream);
  if (it == captures_.end()) return;
  if (graph != 0) graphs_[graph] = std::make_shared<const std::vector<uint32_t>>(std::move(it->second));
  captures_.erase(it);
  capturing_.fetch_sub(1, std::memory_order_release);
}

void Recorder::on_instantiate(uint64_t graph, uint64_t exec) {
  std::lock_guard<std::mutex> g(graph_mu_);
  auto it = graphs_.find(graph);
  if (it != graphs_.end() && exec != 0) execs_[exec] = it->second;
}

void Recorder::on_graph_launch(uint64_t exec, bool enter) {
  ThreadState& t = tls;
  t.graph.reset();
  t.ordinal = 0;
  if (!enter) return;
  std::lock_guard<std::mutex> g(graph_mu_);
  auto it = execs_.find(exec);
  if (it != execs_.end()) {
    t.graph = it->second;
    t.graph_gen = generation_.load(std::memory_order_relaxed);
  }
}

uint32_t Recorder::reroot(uint32_t launch_node, uint32_t captured_node) {
  uint64_t key = (uint64_t(launch_node) << 32) | captured_node;
  {
    std::lock_guard<std::mutex> g(graph_mu_);
    auto it = reroot_cache_.find(key);
    if (it != reroot_cache_.end()) return it->second;
  }
  uint32_t node;
  {
    std::lock_guard<std::mutex> t(trie_mu_);
    std::vector<NodeKey> chain;
    for (uint32_t id = captured_node; id != 0 && id <= nodes_.size(); id = nodes_[id - 1].parent) chain.push_back(nodes_[id - 1]);
    node = intern_locked(launch_node, kNodeCapturedAt, 0);
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) node = intern_locked(node, c->kind, c->value);
  }
  std::lock_guard<std::mutex> g(graph_mu_);
  reroot_cache_.emplace(key, node);
  return node;
}

// ------------------------------------------------------------- records ----
void Recorder::on_kernel_symbol(uint64_t kernel_id, const char* name) {
  std::lock_guard<std::mutex> a(agg_mu_);
  symbols_[kernel_id] = name != nullptr ? name : "";
  kernel_name_id_.erase(kernel_id);
}

uint32_t Recorder::name_id_locked(uint64_t kernel_id) {
  auto it = kernel_name_id_.find(kernel_id);
  if (it != kernel_name_id_.end()) return it->second;
  auto sym = symbols_.find(kernel_id);
  std::string name = sym != symbols_.end() && !sym->second.empty() ? sym->second
                                                                   : "<kernel " + std::to_string(kernel_id) + ">";
  uint32_t id = uint32_t(std::find(names_.begin(), names_.end(), name) - names_.begin());
  if (id == names_.size()) names_.push_back(name);
  if (sym != symbols_.end()) kernel_name_id_.emplace(kernel_id, id);  // unnamed ids are looked up again
  return id;
}

void Recorder::on_dispatch(uint64_t corr, uint64_t kernel_id, uint32_t device, uint64_t queue, uint64_t start,
                           uint64_t end) {
  records_.fetch_add(1, std::memory_order_relaxed);
  if (end <= start) zero_time_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[corr & (kSlots - 1)];
  if (s.corr.load(std::memory_order_acquire) != corr) {  // launch never seen, or its slot reused since
    unmatched_.fetch_add(1, std::memory_order_relaxed);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint32_t epoch = s.epoch.load(std::memory_order_relaxed);
  uint32_t node = s.node.load(std::memory_order_relaxed);
  uint32_t tid = s.tid.load(std::memory_order_relaxed);
  uint64_t launch = s.launch_ns.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.corr.load(std::memory_order_relaxed) != corr) {
    unmatched_.fetch_add(1, std::memory_order_relaxed);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (epoch == 0) {
    unsessioned_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t duration = end > start ? end - start : 0;
  std::lock_guard<std::mutex> a(agg_mu_);
  uint32_t name = name_id_locked(kernel_id);
  AggVal& v = agg_[AggKey{epoch, node, name, device}];
  v.time_ns += duration;
  v.count += 1;
  if (trace_.load(std::memory_order_relaxed)) events_.push_back(Event{epoch, node, name, device, tid, queue, start, end, launch});
  if (std::find(devices_seen_.begin(), devices_seen_.end(), device) == devices_seen_.end()) devices_seen_.push_back(device);
}

Recorder::Stats Recorder::stats() const {
  return Stats{launches_.load(), records_.load(), unsessioned_.load(), unmatched_.load(), zero_time_.load(),
               sdk_dropped_.load()};
}

// --------------------------------------------------------------- flush ----
Recorder::FlushOut Recorder::flush() {
  FlushOut out;
  {
    std::unordered_map<AggKey, AggVal, AggKeyHash> agg;
    std::vector<Event> events;
    std::lock_guard<std::mutex> a(agg_mu_);
    agg.swap(agg_);
    events.swap(events_);
    out.devices = devices_seen_;
    for (const auto& kv : agg)
      out.records.push_back(RecordOut{kv.first.epoch, kv.first.node, names_[kv.first.name], kv.first.device,
                                      kv.second.time_ns, kv.second.count});
    for (const auto& e : events)
      out.events.push_back(EventOut{e.epoch, e.node, names_[e.name], e.device, e.queue, e.start, e.end, e.launch, e.tid});
  }
  out.dropped = dropped_.exchange(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> t(trie_mu_);
  for (size_t i = nodes_exported_; i < nodes_.size(); ++i) {
    const NodeKey& k = nodes_[i];
    NodeOut n{uint32_t(i + 1), k.parent, k.kind, 0, {}};
    if (k.kind == kNodeContext) {
      n.ctx = k.value;
    } else if (k.kind == kNodeFrame) {
      PyObject* code = codes_[k.value >> 32];
      n.frame = str_attr(code, "co_filename") + ":" + std::to_string(uint32_t(k.value)) + "@" + str_attr(code, "co_name");
    }
    out.nodes.push_back(std::move(n));
  }
  nodes_exported_ = nodes_.size();
  return out;
}

}  // namespace proton_roc
