// Launch bookkeeping, the call-path trie and kernel aggregation (see recorder.h).
#include "recorder.h"

#include "native_stack.h"
#include "pcsampling.h"
#include "pyframes.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace proton_cupti {

namespace {

// One frame of the previous launch's stack and the trie node it led to.
struct FrameMemo {
  void* code;
  int lasti;
  uint32_t node;
};

// What the hot path needs about the calling thread, without any lookup.
// The calling thread's core context id (set_context), alone in initial-exec TLS: the torch and nvtx
// plugins set and read it around every operator and range, and a plain %fs load is all that costs.
thread_local uint64_t tls_ctx __attribute__((tls_model("initial-exec"))) = 0;
// Whether the core ever set this thread's context, and whether this is the process's main thread (-1: not
// looked up yet; a fork's child looks again).
thread_local bool tls_own __attribute__((tls_model("initial-exec"))) = false;
thread_local int8_t tls_main __attribute__((tls_model("initial-exec"))) = -1;
// The main thread's context as last set.  A thread whose context the core never set (autograd's device
// threads, which run the backward pass; a pool thread that opened no scope) launches under it, as
// upstream's shadow source starts a new thread on the main thread's stack: the backward pass's kernels
// land under the scope it was called in, not at the root.  Decision 0245.
std::atomic<uint64_t> g_main_ctx{0};
std::atomic<Recorder::ContextProvider> g_provider{nullptr};

inline bool is_main_thread() {
  if (tls_main < 0) tls_main = syscall(SYS_gettid) == getpid() ? 1 : 0;
  return tls_main == 1;
}

// The calling thread's context: its own as last set, else the main thread's of the moment.
inline uint64_t thread_context() { return tls_own ? tls_ctx : g_main_ctx.load(std::memory_order_relaxed); }

// The context a launch on this thread goes under: the thread's, or as the provider names it.
inline uint64_t launch_context() {
  Recorder::ContextProvider provider = g_provider.load(std::memory_order_acquire);
  uint64_t ctx = thread_context();
  return provider != nullptr ? provider(ctx) : ctx;
}

// A context's trie node (python frames off), remembered per thread for the last 64 contexts: launches
// under a context seen before take no lock (a native scope source, the torch plugin's operators,
// changes the context at most launches).
struct ContextSlot {
  uint64_t ctx = 0;
  uint32_t node = 0;
  uint32_t gen = 0;  // 0: empty (generations start at 1)
};
constexpr unsigned kContextBits = 6;
constexpr size_t kContextSlots = size_t(1) << kContextBits;

// Native frames on: the paths of a thread's last stacks, direct-mapped by a hash of the stack and the
// node it hangs under, so launches from a handful of call sites in turn (a model's layers) find theirs
// without a lock.
struct NativeSlot {
  uint32_t gen = 0;  // 0: empty (generations start at 1)
  uint32_t base = 0;
  uint64_t hash = 0;
  uint32_t leaf = 0;
  std::vector<uintptr_t> pcs;  // as captured, innermost first
};
constexpr unsigned kNativeSlotBits = 6;
struct NativeCache {
  NativeSlot slots[size_t(1) << kNativeSlotBits];
};

struct ThreadState {
  ContextSlot contexts[kContextSlots];
  uint32_t tid = 0;
  // Python frames on: the previous launch's stack, outermost first.
  std::vector<FrameMemo> stack;
  uint32_t stack_gen = 0;
  uint64_t leaf_ctx = ~0ull;  // context of leaf_node; ~0: none yet in this generation
  uint32_t leaf_node = 0;
  // Native frames on: paths of recent stacks; the frames kept in the previous new path (outermost
  // first) with the trie node after each, and the node they hang under, so that a new stack interns
  // only what follows its first difference from the last one.
  std::unique_ptr<NativeCache> native_cache;
  std::vector<uintptr_t> native_kept;
  std::vector<uint32_t> native_nodes;
  uint32_t native_gen = 0;
  uint32_t native_base = 0;
};
thread_local ThreadState tls;

uint32_t thread_id() {
  if (tls.tid == 0) tls.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tls.tid;
}

constexpr int kMaxFrames = 512;

std::string attr_utf8(PyObject* obj, const char* attr) {
  std::string out;
  PyObject* value = PyObject_GetAttrString(obj, attr);
  if (value != nullptr && PyUnicode_Check(value)) {
    const char* s = PyUnicode_AsUTF8(value);
    if (s != nullptr) out = s;
  }
  Py_XDECREF(value);
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

}  // namespace

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Recorder& recorder() {
  static Recorder* instance = new Recorder();  // never destroyed: CUPTI may call back at exit
  return *instance;
}

Recorder::Recorder() : slots_(new Slot[kSlots]) {
  // Touch the table now so that its pages count before profiling, not during it.
  for (uint32_t i = 0; i < kSlots; ++i) slots_[i].corr.store(0, std::memory_order_relaxed);
  pthread_atfork(nullptr, nullptr, [] { tls_main = -1; });  // a fork's only thread is its main thread
}

void Recorder::set_context(uint64_t ctx) {
  tls_ctx = ctx;
  tls_own = true;
  if (is_main_thread()) g_main_ctx.store(ctx, std::memory_order_relaxed);
}
uint64_t Recorder::context() { return thread_context(); }
void Recorder::set_provider(ContextProvider provider) { g_provider.store(provider, std::memory_order_release); }

void Recorder::reset() {
  std::lock_guard<std::mutex> t(trie_mu_);
  std::lock_guard<std::mutex> g(graph_mu_);
  std::lock_guard<std::mutex> a(agg_mu_);
  nodes_.clear();
  node_index_.clear();
  nodes_exported_ = 0;
  reroot_cache_.clear();
  graph_nodes_.clear();
  agg_.clear();
  events_.clear();
  devices_seen_.clear();
  dropped_.store(0);
  forget_native_addresses();
  max_epoch_.store(epoch_.load());
  switch_every_.store(0);
  records_.store(0);
  unsessioned_.store(0);
  uncaptured_graph_.store(0);
  unmatched_.store(0);
  zero_time_.store(0);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // invalidates every thread's cache
  // Code objects stay referenced (releasing them needs the GIL; they are few).
}

void Recorder::configure(bool python_frames, bool trace, std::vector<std::string> internal_dirs,
                         std::vector<std::string> internal_files) {
  {
    std::lock_guard<std::mutex> t(trie_mu_);
    internal_dirs_ = std::move(internal_dirs);
    internal_files_ = std::move(internal_files);
    for (auto& c : codes_) c.internal = is_internal(attr_utf8(c.code, "co_filename"));
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);  // cached paths may hold frames now internal
  if (trace && !slot_times_) {
    slot_times_.reset(new SlotTime[kSlots]);
    std::atomic_thread_fence(std::memory_order_release);
  }
  trace_.store(trace, std::memory_order_release);
  python_frames_.store(python_frames, std::memory_order_release);
}

void Recorder::set_native_frames(bool on) {
  if (on) native_stack::warm_up();  // the unwinder's first call loads libgcc_s: not in a launch
  if (native_frames_.exchange(on, std::memory_order_acq_rel) != on)
    generation_.fetch_add(1, std::memory_order_acq_rel);  // every thread's cached path is stale now
}

bool Recorder::is_internal(const std::string& filename) const {
  for (const auto& f : internal_files_)
    if (filename == f) return true;
  for (const auto& d : internal_dirs_)
    if (filename.compare(0, d.size(), d) == 0) return true;
  return false;
}

// ------------------------------------------------------------- launches ----
void Recorder::record_launch(Slot& s, uint32_t corr, uint32_t epoch) {
  uint32_t node = current_node();
  // Seqlock-style: invalidate, write, publish; the reader re-checks corr.
  s.corr.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.epoch.store(epoch, std::memory_order_relaxed);
  s.node.store(node, std::memory_order_relaxed);
  if (trace_.load(std::memory_order_relaxed)) {
    s.tid.store(thread_id(), std::memory_order_relaxed);
    slot_times_[corr & (kSlots - 1)].launch_ns.store(monotonic_ns(), std::memory_order_relaxed);
  }
  s.corr.store(corr, std::memory_order_release);
  uint32_t every = switch_every_.load(std::memory_order_relaxed);
  if (every != 0) count_for_switch(every);
}

// The launch that makes the count stays in its epoch; the next ones get the next.  Launches racing on
// other threads across the switch may land one epoch early or late (they still count once each): a
// phase holds N launches give or take the number of launching threads.
void Recorder::count_for_switch(uint32_t every) {
  if (switch_left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  uint32_t epoch = epoch_.load(std::memory_order_acquire);  // not the launch's: a racing one may be older
  uint32_t next = epoch + 1;
  if (next > switch_last_.load(std::memory_order_relaxed)) {
    switch_every_.store(0, std::memory_order_relaxed);  // the reserved epochs are spent: the core's poll goes on
    return;
  }
  uint32_t expected = epoch;
  if (!epoch_.compare_exchange_strong(expected, next, std::memory_order_acq_rel)) return;  // set_epoch won
  if (next > max_epoch_.load(std::memory_order_relaxed)) max_epoch_.store(next, std::memory_order_relaxed);
  switch_left_.fetch_add(every, std::memory_order_acq_rel);  // keeps decrements made since the count hit 0
}

uint32_t Recorder::intern_locked(uint32_t parent, uint32_t kind, uint64_t value) {
  NodeKey key{parent, kind, value};
  auto it = node_index_.find(key);
  if (it != node_index_.end()) return it->second;
  nodes_.push_back(key);
  uint32_t id = static_cast<uint32_t>(nodes_.size());
  node_index_.emplace(key, id);
  return id;
}

uint32_t Recorder::code_index_locked(PyObject* code) {
  auto it = code_index_.find(code);
  if (it != code_index_.end()) return it->second;
  Py_INCREF(code);
  uint32_t idx = static_cast<uint32_t>(codes_.size());
  codes_.push_back(CodeInfo{code, is_internal(attr_utf8(code, "co_filename"))});
  code_index_.emplace(code, idx);
  return idx;
}

uint32_t Recorder::current_node() {
  ThreadState& t = tls;
  uint32_t gen = generation_.load(std::memory_order_acquire);
  uint64_t ctx = launch_context();
  uint32_t node;
  if (!python_frames_.load(std::memory_order_relaxed)) {
    ContextSlot& slot = t.contexts[(ctx * 0x9E3779B97F4A7C15ull) >> (64 - kContextBits)];
    if (slot.gen != gen || slot.ctx != ctx) {
      std::lock_guard<std::mutex> g(trie_mu_);
      slot.node = intern_locked(0, kNodeContext, ctx);
      slot.ctx = ctx;
      slot.gen = gen;
    }
    node = slot.node;
  } else if (proton_raw_frames_supported()) {
    node = raw_frames_node(gen, ctx);
  } else {
    node = locked_frames_node(ctx);
  }
  if (native_frames_.load(std::memory_order_relaxed)) return native_frames_node(gen, node);
  return node;
}

// context="native": the launching thread's return addresses, outermost first, below `base` (the
// context's node).  The innermost frames of the launch machinery (this extension, libcupti, libcuda,
// libcudart) are left out, so a path ends at the user's call, and so are the outermost ones of how the
// process or thread began (libc), so it begins at main or the thread's function.  As with Python
// frames, each thread keeps the paths of its recent stacks: a stack seen lately takes no lock, and of a
// new one only the frames past its first difference from the last new one are interned.  Addresses are only classified here (once each); names come at flush.
// Where libunwind gives nothing but launch machinery (a frame it could not step over), glibc's unwinder
// is asked again.
uint32_t Recorder::native_frames_node(uint32_t gen, uint32_t base) {
  ThreadState& t = tls;
  uintptr_t pcs[native_stack::kMaxFrames];
  int n = native_stack::capture(pcs, native_stack::kMaxFrames);
  uint64_t hash = uint64_t(base) * 0xC2B2AE3D27D4EB4Full ^ uint64_t(n);
  for (int i = 0; i < n; ++i) {
    hash = (hash ^ pcs[i]) * 0x9E3779B97F4A7C15ull;
    hash ^= hash >> 29;
  }
  if (!t.native_cache) t.native_cache.reset(new NativeCache());
  NativeSlot& slot = t.native_cache->slots[hash >> (64 - kNativeSlotBits)];
  if (slot.gen == gen && slot.hash == hash && slot.base == base && slot.pcs.size() == size_t(n) &&
      std::equal(pcs, pcs + n, slot.pcs.begin()))
    return slot.leaf;
  if (t.native_gen != gen || t.native_base != base) {
    t.native_kept.clear();
    t.native_nodes.clear();
    t.native_gen = gen;
    t.native_base = base;
  }
  const uintptr_t* f = pcs;  // the frames classified and kept: pcs, or glibc's where libunwind fell short
  int m = n;
  int top = 0;
  while (top < m && (native_class(f[top]) & native_stack::kMachinery)) ++top;
  uintptr_t again[native_stack::kMaxFrames];
  if (top == m && native_stack::using_libunwind()) {  // libunwind stopped inside the launch machinery
    m = native_stack::glibc_backtrace(again, native_stack::kMaxFrames);
    f = again;
    top = 0;
    while (top < m && (native_class(f[top]) & native_stack::kMachinery)) ++top;
  }
  int bottom = m;  // f[top, bottom) are kept
  while (bottom > top && (native_class(f[bottom - 1]) & native_stack::kStart)) --bottom;
  size_t kept = size_t(bottom - top), same = 0;
  size_t limit = std::min(kept, t.native_kept.size());
  while (same < limit && t.native_kept[same] == f[bottom - 1 - same]) ++same;
  t.native_kept.resize(same);
  t.native_nodes.resize(same);
  uint32_t parent = same ? t.native_nodes.back() : base;
  if (same < kept) {
    std::lock_guard<std::mutex> g(trie_mu_);
    for (size_t i = same; i < kept; ++i) {
      uintptr_t pc = f[bottom - 1 - i];
      parent = intern_locked(parent, kNodeNativeFrame, uint64_t(pc));
      t.native_kept.push_back(pc);
      t.native_nodes.push_back(parent);
    }
  }
  slot.gen = gen;  // what capture gave: the same again is this path again
  slot.base = base;
  slot.hash = hash;
  slot.pcs.assign(pcs, pcs + n);
  slot.leaf = parent;
  return parent;
}

// dladdr takes the loader's lock: called with no lock of ours held, so a library constructor that
// launches while another thread classifies cannot deadlock with it.
unsigned Recorder::native_class(uintptr_t ret) {
  {
    std::lock_guard<std::mutex> g(native_mu_);
    auto it = native_classes_.find(ret);
    if (it != native_classes_.end()) return it->second;
  }
  unsigned mask = native_stack::classify(ret);
  std::lock_guard<std::mutex> g(native_mu_);
  native_classes_.emplace(ret, mask);
  return mask;
}

void Recorder::forget_native_addresses() {
  {
    std::lock_guard<std::mutex> g(native_mu_);
    native_classes_.clear();
    native_names_.clear();
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);  // paths cached per thread were made from them
}

std::string Recorder::native_name(uintptr_t ret) {
  {
    std::lock_guard<std::mutex> g(native_mu_);
    auto it = native_names_.find(ret);
    if (it != native_names_.end()) return it->second;
  }
  std::string name = native_stack::symbolize(ret);
  std::lock_guard<std::mutex> g(native_mu_);
  native_names_.emplace(ret, name);
  return name;
}

// The python-context path of a launch, from the interpreter's frames read
// without the GIL (pyframes.c).  Consecutive launches share most of their
// stack, so each thread keeps the previous stack with the trie node after
// every frame: only frames past the first difference are interned, and a
// launch from the same place as the last one takes no lock at all.
uint32_t Recorder::raw_frames_node(uint32_t gen, uint64_t ctx) {
  ThreadState& t = tls;
  proton_frame frames[kMaxFrames];
  int n = proton_raw_frames(frames, kMaxFrames);
  if (t.stack_gen != gen) {
    t.stack.clear();
    t.stack_gen = gen;
    t.leaf_ctx = ~0ull;
  }
  size_t same = 0, limit = std::min<size_t>(size_t(n), t.stack.size());
  while (same < limit && t.stack[same].code == frames[n - 1 - same].code &&
         t.stack[same].lasti == frames[n - 1 - same].lasti)
    ++same;
  if (same == size_t(n) && same == t.stack.size() && t.leaf_ctx == ctx) return t.leaf_node;

  std::unique_lock<std::mutex> lock(trie_mu_);
  // Code objects seen for the first time are referenced and classified, which
  // needs the GIL.  Lock order is GIL, then trie: only in that rare case is the
  // trie lock let go to take the GIL first.
  bool need_gil = false;
  for (int i = n - 1 - int(same); i >= 0 && !need_gil; --i)
    need_gil = code_index_.find(static_cast<PyObject*>(frames[i].code)) == code_index_.end();
  bool take = need_gil && Py_IsInitialized() && !PyGILState_Check();
  PyGILState_STATE gil{};
  if (take) {
    lock.unlock();
    gil = PyGILState_Ensure();
    lock.lock();
  }
  t.stack.resize(same);
  uint32_t parent = same ? t.stack.back().node : 0;
  for (int i = n - 1 - int(same); i >= 0; --i) {
    PyObject* code = static_cast<PyObject*>(frames[i].code);
    uint32_t idx = code_index_locked(code);
    if (!codes_[idx].internal)
      parent = intern_locked(parent, kNodeFrame, (uint64_t(idx) << 32) | kLastiBit | uint32_t(frames[i].lasti));
    t.stack.push_back(FrameMemo{frames[i].code, frames[i].lasti, parent});
  }
  t.leaf_node = intern_locked(parent, kNodeContext, ctx);
  lock.unlock();
  if (take) PyGILState_Release(gil);
  t.leaf_ctx = ctx;
  return t.leaf_node;
}

// Interpreters whose frame layout pyframes.c does not know: the public frame
// API, with the GIL taken back when the launching thread had released it.
uint32_t Recorder::locked_frames_node(uint64_t ctx) {
  ThreadState& t = tls;
  PyObject* codes[kMaxFrames];
  int lines[kMaxFrames];
  int n = 0;
  bool held = Py_IsInitialized() && PyGILState_Check();
  bool python_thread = held || (Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr);
  PyGILState_STATE gil{};
  if (python_thread && !held) gil = PyGILState_Ensure();
  if (python_thread) {
    PyThreadState* ts = PyGILState_GetThisThreadState();
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
    for (int i = n - 1; i >= 0; --i) {  // outermost first
      uint32_t idx = code_index_locked(codes[i]);
      if (codes_[idx].internal) continue;
      parent = intern_locked(parent, kNodeFrame, (uint64_t(idx) << 32) | uint32_t(lines[i]));
    }
    parent = intern_locked(parent, kNodeContext, ctx);
  }
  for (int i = 0; i < n; ++i) Py_DECREF(codes[i]);
  if (python_thread && !held) PyGILState_Release(gil);
  return parent;
}

// ----------------------------------------------------------- CUDA graphs ----
void Recorder::on_graph_node_created(uint64_t node_id) {
  if (epoch_.load(std::memory_order_acquire) == 0) return;  // captured while nobody profiled
  uint32_t node = current_node();
  std::lock_guard<std::mutex> g(graph_mu_);
  graph_nodes_[node_id] = node;
}

void Recorder::on_graph_node_cloned(uint64_t node_id, uint64_t original_id) {
  std::lock_guard<std::mutex> g(graph_mu_);
  auto it = graph_nodes_.find(original_id);
  if (it != graph_nodes_.end()) graph_nodes_[node_id] = it->second;
}

uint32_t Recorder::reroot(uint32_t launch_node, uint32_t captured_node) {
  std::lock_guard<std::mutex> g(trie_mu_);
  uint64_t key = (uint64_t(launch_node) << 32) | captured_node;
  auto it = reroot_cache_.find(key);
  if (it != reroot_cache_.end()) return it->second;
  std::vector<NodeKey> chain;
  for (uint32_t id = captured_node; id != 0; id = nodes_[id - 1].parent) chain.push_back(nodes_[id - 1]);
  uint32_t node = intern_locked(launch_node, kNodeCapturedAt, 0);
  for (auto it2 = chain.rbegin(); it2 != chain.rend(); ++it2) node = intern_locked(node, it2->kind, it2->value);
  reroot_cache_.emplace(key, node);
  return node;
}

// -------------------------------------------------------------- records ----
uint32_t Recorder::name_id_locked(const char* name) {
  if (name == nullptr) name = "<unknown kernel>";
  auto it = name_index_.find(name);
  if (it != name_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_index_.emplace(names_.back(), id);
  return id;
}

void Recorder::on_kernel(uint32_t corr, const char* name, uint32_t device, uint32_t stream, uint64_t start,
                         uint64_t end, uint64_t graph_node_id) {
  records_.fetch_add(1, std::memory_order_relaxed);
  if (end <= start) zero_time_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[corr & (kSlots - 1)];
  if (s.corr.load(std::memory_order_acquire) != corr) {  // launch never seen, or its slot reused
    dropped_.fetch_add(1, std::memory_order_relaxed);
    unmatched_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint32_t epoch = s.epoch.load(std::memory_order_relaxed);
  uint32_t node = s.node.load(std::memory_order_relaxed);
  uint32_t tid = s.tid.load(std::memory_order_relaxed);
  bool trace = trace_.load(std::memory_order_acquire) && slot_times_;
  uint64_t launch = trace ? slot_times_[corr & (kSlots - 1)].launch_ns.load(std::memory_order_relaxed) : 0;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.corr.load(std::memory_order_relaxed) != corr) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    unmatched_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t duration = end > start ? end - start : 0;
  pcs::Store& samples = pcs::store();
  if (epoch == 0) {  // launched while no session was active
    unsessioned_.fetch_add(1, std::memory_order_relaxed);
    if (samples.collection() != pcs::kOff) samples.note_kernel(corr, name, device, 0, 0, duration);  // its samples go
    return;
  }
  if (graph_node_id != 0) {
    uint32_t captured = 0;
    {
      std::lock_guard<std::mutex> g(graph_mu_);
      auto it = graph_nodes_.find(graph_node_id);
      if (it != graph_nodes_.end()) captured = it->second;
    }
    if (captured != 0)
      node = reroot(node, captured);
    else
      uncaptured_graph_.fetch_add(1, std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> a(agg_mu_);
    uint32_t name_id = name_id_locked(name);
    AggVal& v = agg_[AggKey{epoch, node, name_id, device}];
    v.time_ns += duration;
    v.count += 1;
    if (trace) events_.push_back(Event{epoch, node, name_id, device, stream, tid, start, end, launch});
    if (std::find(devices_seen_.begin(), devices_seen_.end(), device) == devices_seen_.end())
      devices_seen_.push_back(device);
  }
  // PC sampling: the samples of this kernel are attributed to the key it was filed under.
  if (samples.collection() != pcs::kOff) samples.note_kernel(corr, name, device, epoch, node, duration);
}

// ---------------------------------------------------------------- flush ----
Recorder::FlushOut Recorder::flush() {
  FlushOut out;
  std::unordered_map<AggKey, AggVal, AggKeyHash> agg;
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> a(agg_mu_);
    agg.swap(agg_);
    events.swap(events_);
    out.devices = devices_seen_;
    out.records.reserve(agg.size());
    for (const auto& kv : agg)
      out.records.push_back(RecordOut{kv.first.epoch, kv.first.node, names_[kv.first.name], kv.first.device,
                                      kv.second.time_ns, kv.second.count});
    out.events.reserve(events.size());
    for (const auto& e : events)
      out.events.push_back(
          EventOut{e.epoch, e.node, names_[e.name], e.device, e.stream, e.start, e.end, e.launch, e.tid});
  }
  out.dropped = dropped_.exchange(0, std::memory_order_relaxed);
  std::vector<std::pair<size_t, uintptr_t>> native;  // (index in out.nodes, return address): named below
  std::unique_lock<std::mutex> t(trie_mu_);
  for (size_t i = nodes_exported_; i < nodes_.size(); ++i) {
    const NodeKey& k = nodes_[i];
    NodeOut n{uint32_t(i + 1), k.parent, k.kind, 0, {}};
    if (k.kind == kNodeNativeFrame) {
      n.kind = kNodeFrame;  // the core knows frames; how they are spelled is the base context's business
      native.emplace_back(out.nodes.size(), uintptr_t(k.value));
    } else if (k.kind == kNodeContext) {
      n.ctx = k.value;
    } else if (k.kind == kNodeFrame) {
      PyObject* code = codes_[k.value >> 32].code;
      uint32_t pos = uint32_t(k.value & 0xffffffffu);
      int line = (pos & kLastiBit) ? PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(code), int(pos & ~kLastiBit))
                                   : int(pos);
      // Upstream's spelling: file:line@function.
      n.frame = attr_utf8(code, "co_filename") + ":" + std::to_string(line) + "@" + attr_utf8(code, "co_name");
    }
    out.nodes.push_back(std::move(n));
  }
  nodes_exported_ = nodes_.size();
  t.unlock();
  for (const auto& item : native) out.nodes[item.first].frame = native_name(item.second);  // dladdr: no lock held
  return out;
}

#ifdef PROTON_CUPTI_TESTING
size_t Recorder::node_count() {
  std::lock_guard<std::mutex> t(trie_mu_);
  return nodes_.size();
}
#endif

}  // namespace proton_cupti
