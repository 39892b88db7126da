// autograd's engine records (autograd_records.h): the forward threads' sequence-number rings, the contexts
// backward passes were called in, the sweeps, and each node's frame.
#include "autograd_records.h"

#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/function.h>

#include <cstring>
#include <unordered_map>

#include "launch_provider.h"
#include "operator_names.h"
#include "record_callbacks.h"

namespace proton_torch {

// ---------------------------------------------------- forward seqNr rings ----
// One writer (the forward thread); readers (autograd threads) use the slot's version as a seqlock.
struct SeqSlot {
  std::atomic<uint64_t> version{0};
  std::atomic<int64_t> seq{-1};
  std::atomic<uint64_t> ctx{0};
};
struct SeqRing {
  SeqSlot slots[kSeqSlots];
};

namespace {

// The map and the free list change under g_rings_mu, and each change bumps g_rings_version. Rings are never
// freed: a thread that ends leaves its ring to the next thread that needs one (cleared first). So a reader may
// keep a ring's address (RingCache) as long as the version it read it under still holds after its read.
std::mutex g_rings_mu;
std::unordered_map<uint64_t, SeqRing*> g_rings;  // RecordFunction thread id -> ring
std::vector<SeqRing*> g_free_rings;
std::atomic<uint64_t> g_rings_version{1};

void ring_write(SeqRing* ring, int64_t seq, uint64_t ctx) {
  SeqSlot& s = ring->slots[size_t(seq) & (kSeqSlots - 1)];
  uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.seq.store(seq, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.version.store(v + 2, std::memory_order_release);
}

uint64_t ring_read(const SeqRing* ring, int64_t seq) {
  const SeqSlot& s = ring->slots[size_t(seq) & (kSeqSlots - 1)];
  uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 & 1) return 0;
  int64_t found = s.seq.load(std::memory_order_relaxed);
  uint64_t ctx = s.ctx.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.version.load(std::memory_order_relaxed) == v1 && found == seq ? ctx : 0;
}

// A new ring for a thread (a freed one, cleared, else a new one), under g_rings_mu.
SeqRing* take_ring() {
  if (g_free_rings.empty()) return new SeqRing();
  SeqRing* ring = g_free_rings.back();
  g_free_rings.pop_back();
  for (SeqSlot& s : ring->slots) {
    s.seq.store(-1, std::memory_order_relaxed);
    s.ctx.store(0, std::memory_order_relaxed);
  }
  return ring;
}

uint64_t forward_context(RingCache& cache, uint64_t forward_thread, int64_t seq) {
  uint64_t version = g_rings_version.load(std::memory_order_acquire);
  if (cache.version == version && cache.thread == forward_thread) {
    uint64_t ctx = cache.ring != nullptr ? ring_read(cache.ring, seq) : 0;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_rings_version.load(std::memory_order_relaxed) == version) return ctx;
  }
  std::lock_guard<std::mutex> g(g_rings_mu);
  auto it = g_rings.find(forward_thread);
  cache = RingCache{forward_thread, it == g_rings.end() ? nullptr : it->second,
                    g_rings_version.load(std::memory_order_relaxed)};
  return cache.ring != nullptr ? ring_read(cache.ring, seq) : 0;
}

// ------------------------------------------- backward calls' contexts ----
// The context each thread called the autograd engine in (Python publishes it around the call), read by
// autograd's device threads, whose own context knows nothing of the caller's scopes. Each change bumps
// g_calls_version, under which a reader keeps its last answer (CallCache).
std::mutex g_calls_mu;
std::unordered_map<uint64_t, uint64_t> g_calls;  // RecordFunction thread id -> context + 1
std::atomic<uint64_t> g_calls_version{1};

uint64_t backward_call_context(CallCache& cache, uint64_t forward_thread, bool* found) {
  uint64_t version = g_calls_version.load(std::memory_order_acquire);
  if (cache.version != version || cache.thread != forward_thread) {
    std::lock_guard<std::mutex> g(g_calls_mu);
    auto it = g_calls.find(forward_thread);
    cache = CallCache{forward_thread, it == g_calls.end() ? 0 : it->second,
                      g_calls_version.load(std::memory_order_relaxed)};
  }
  *found = cache.value != 0;
  return cache.value != 0 ? cache.value - 1 : 0;
}

}  // namespace

ThreadState::~ThreadState() {
  t_fast = nullptr;
  if (ring != nullptr) {
    std::lock_guard<std::mutex> g(g_rings_mu);
    auto it = g_rings.find(rf_tid);
    if (it != g_rings.end() && it->second == ring) g_rings.erase(it);
    g_free_rings.push_back(ring);
    g_rings_version.fetch_add(1, std::memory_order_release);
  }
}

namespace {

// The calling thread's ring, where its operators leave their contexts by sequence number.
SeqRing* own_ring(ThreadState& ts) {
  if (ts.ring == nullptr) {
    std::lock_guard<std::mutex> g(g_rings_mu);
    SeqRing* ring = take_ring();
    g_rings[rf_thread(ts)] = ring;
    g_rings_version.fetch_add(1, std::memory_order_release);
    ts.ring = ring;
  }
  return ts.ring;
}

// Sequence numbers in [from, to) that no frame wrote yet go under ``context()`` (asked once, if needed). At
// most a ring's worth: older ones would be overwritten anyway.
template <typename Context>
void remember_range(ThreadState& ts, int64_t from, int64_t to, Context&& context) {
  SeqRing* ring = own_ring(ts);
  if (to - from > int64_t(kSeqSlots)) from = to - int64_t(kSeqSlots);
  for (int64_t seq = from; seq < to; ++seq) {
    if (ring->slots[size_t(seq) & (kSeqSlots - 1)].seq.load(std::memory_order_relaxed) == seq) continue;
    ring_write(ring, seq, context());
  }
}

}  // namespace

// Sequence numbers taken since the last sweep while no frame of ours was open: nodes that operators left
// unobserved created, where the thread's context was ``ctx``. Swept at the next outermost operator, module
// call or backward call, with the context in force then; a Python scope that opened and closed in between
// is not seen, and the node goes under the context around it.
void sweep(ThreadState& ts, uint64_t ctx) {
  int64_t now = int64_t(at::sequence_number::peek());
  uint64_t epoch = g_sweep_epoch.load(std::memory_order_relaxed);
  if (__builtin_expect(ts.sweep_epoch != epoch, 0)) {  // the thread's first sweep since the session began
    ts.sweep_epoch = epoch;
    ts.swept = now;
    return;
  }
  if (now > ts.swept) remember_range(ts, ts.swept, now, [ctx] { return ctx; });
  ts.swept = now;
}

namespace {

uint64_t lookup_link(ThreadState& ts, uint64_t base, uint64_t forward, bool known) {
  if (!known) return intern(base, "", 0, forward, nullptr, false);
  auto key = std::make_pair(base, forward);
  auto it = ts.links.find(key);
  if (it != ts.links.end()) return it->second;
  uint64_t id = intern(base, "", 0, forward, nullptr, true);
  if (ts.links.size() < 100000) ts.links.emplace(key, id);
  return id;
}

}  // namespace

// The context of an autograd node's frame, L(B, F)/X: under the forward operator F its sequence number ``seq``
// names in ``forward_thread``'s ring, B being where Python called the engine, else ``cur``, the thread's
// context at the node's record (X: ``name``).
uint64_t backward_context(ThreadState& ts, int64_t seq, uint64_t forward_thread, uint64_t cur, const char* name) {
  // The backward pass's own context: where Python called the engine, else this thread's.
  bool called = false;
  uint64_t base = backward_call_context(ts.calls, forward_thread, &called);
  if (!called) base = cur;
  uint64_t forward = seq >= 0 && forward_thread != 0 ? forward_context(ts.rings, forward_thread, seq) : 0;
  uint64_t parent = base;
  if (forward != 0) {
    // Unknown: no engine call published a context for the forward thread and this thread has none of
    // its own (an autograd device thread under a torch without _engine_run_backward).
    parent = lookup_link(ts, base, forward, called || base != 0);
    g_linked.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_unlinked.fetch_add(1, std::memory_order_relaxed);
  }
  size_t len = std::strlen(name);
  return lookup(ts, parent, name, len, uintptr_t(hash_bytes(name, len)), kBackwardEntry);
}

// autograd's record of one node, "autograd::engine::evaluate_function: X" (``name``: X), opens the node's
// frame: under L(B, F) where the node's sequence number names its forward operator F. The engine sets the
// node it evaluates (get_current_node) before it opens this record, and the record spans all the node does:
// its backward function and the gradient sums for the next nodes after it.
//
// Providing without a trace (g_fast), the frame is looked up only when a launch or a record inside first
// needs its context (resolve_to): most nodes of a training step launch nothing (AccumulateGrad with its
// gradient stolen, TBackward0), and the lookup reads the forward thread's ring and two caches, each likely
// out of cache by then. The node's sequence number and thread are read now, while the node is alive.
void enter_backward(ThreadState& ts, const at::RecordFunction& rf, const char* name) {
  PROTON_TIMED(kTimedEngineRecord);
  int64_t seq = -1;
  uint64_t forward_thread = 0;
  if (auto node = torch::autograd::get_current_node()) {
    seq = static_cast<int64_t>(node->sequence_nr());  // AccumulateGrad's UINT64_MAX reads -1: none
    forward_thread = node->thread_id();
  }
  if (g_fast.load(std::memory_order_relaxed)) {
    // The outermost frame (as on autograd's device threads): its context at entry is the one last set,
    // which opening it reads (open_outermost) and keeps in ts.base.
    bool outermost = ts.frames.empty();
    uint64_t cur = outermost ? 0 : effective(ts);
    Frame& f = push_frame(ts, &rf, -1);
    f.name = name;
    f.kind = kBackwardOpen;
    f.ctx = uint64_t(seq);
    f.forward_thread = forward_thread;
    f.prev = outermost ? ts.base : cur;
    return;
  }
  uint64_t cur = effective(ts);
  uint64_t ctx = backward_context(ts, seq, forward_thread, cur, name);
  if (!ts.frames.empty() && unresolved(ts.frames.back().kind)) resolve_to(ts, ts.frames.size() - 1);
  Frame& f = push_frame(ts, &rf, -1);
  f.name = name;
  f.kind = kBackward;
  f.ctx = ctx;
  set_top(ts, cur, true);
}

// A frame autograd saw (its sequence number: an operator, or a module called inside one) is closing: the
// numbers nodes took while it ran (from its own up to the thread's next) that no frame inside it wrote go
// under its context: the operator's own, or the enclosing one's for a view. Those are the node of the
// operator itself and those of unobserved operators inside it.
void remember_sequence(ThreadState& ts, size_t i) {
  int64_t seq = ts.frames[i].seq;
  int64_t next = int64_t(at::sequence_number::peek());
  if (next <= seq) return;
  uint64_t ctx = 0;
  remember_range(ts, seq, next, [&] { return ctx != 0 ? ctx : (ctx = resolve_to(ts, i)); });
}

// Around the autograd engine's call (Python): the calling thread's context, for autograd's own threads.
PyObject* py_backward_enter(PyObject*, PyObject*) {
  PROTON_TIMED(kTimedBackwardCall);
  ThreadState& ts = state();
  uint64_t tid = rf_thread(ts);
  sweep_outside_frames(ts);  // the nodes backward is about to run, first
  uint64_t value = effective(ts) + 1;
  uint64_t prev = 0;
  {
    std::lock_guard<std::mutex> g(g_calls_mu);
    auto it = g_calls.find(tid);
    if (it != g_calls.end()) {
      prev = it->second;
      it->second = value;
    } else {
      g_calls.emplace(tid, value);
    }
    g_calls_version.fetch_add(1, std::memory_order_release);
  }
  return PyLong_FromUnsignedLongLong(prev);
}

PyObject* py_backward_exit(PyObject*, PyObject* arg) {
  PROTON_TIMED(kTimedBackwardCall);
  uint64_t prev = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  ThreadState& ts = state();
  uint64_t tid = rf_thread(ts);
  std::lock_guard<std::mutex> g(g_calls_mu);
  auto it = g_calls.find(tid);
  if (it == g_calls.end()) Py_RETURN_NONE;
  if (prev != 0) {
    it->second = prev;
  } else {
    g_calls.erase(it);
  }
  g_calls_version.fetch_add(1, std::memory_order_release);
  Py_RETURN_NONE;
}

}  // namespace proton_torch

