// Operator frames named: the context ids of ours (interned (parent, name) entries and links), a thread's
// caches in front of them, and what a record's frame stands for (classify).
#pragma once

#include <deque>
#include <string>

#include "thread_state.h"

#pragma GCC visibility push(hidden)  // this library's own: no GOT
namespace proton_torch {

// ------------------------------------------------------------ context ids ----
// Entries are never removed: an id names one (parent, name) or one link for the process.
// What a name entry stands for (the kind it was first interned with).
enum EntryKind : uint8_t { kOperatorEntry, kModuleEntry, kBackwardEntry, kNamedEntry };

struct Entry {
  uint64_t parent;  // name entries: the parent context; links: B
  uint64_t link;    // links: the forward operator's context F; 0 for name entries
  bool known;       // links: whether B is the backward pass's context (else the running thread's root)
  EntryKind kind;   // name entries
  std::string name;
};

extern std::mutex g_intern_mu;
extern std::deque<Entry> g_entries;  // a deque: an entry's name stays where it is (caches point at it)

// The id of (parent, name) or of the link (parent=B, link=F); *stable_name gets the entry's own copy.
uint64_t intern(uint64_t parent, const char* name, size_t len, uint64_t link, const char** stable_name,
                bool known = true, EntryKind kind = kOperatorEntry);

// The id of (parent, name) through the thread's cache.
uint64_t lookup(ThreadState& ts, uint64_t parent, const char* name, size_t len, uintptr_t key,
                EntryKind kind = kOperatorEntry);

// What frame ``i`` stands for, under ``parent``.
void classify(ThreadState& ts, size_t i, uint64_t parent, const at::RecordFunction* inputs);

// The context of frame ``top``, resolving the open frames up to it (providing).
uint64_t resolve_to(ThreadState& ts, size_t top);

// classify() for an operator's frame entered on the fast path, keyed by its schema's address: that names one
// operator for as long as the operator is registered (g_schema_generation changes when any is removed), so a
// hit reads neither the schema nor a name (each a cache miss on a GPU host, where the driver's launches evict
// them between steps). What classify decides for a frame depends only on its parent and its name (tracing,
// which also counts, never takes this path), so it is kept per (parent, schema).
__attribute__((always_inline)) inline void classify_operator(ThreadState& ts, size_t i, uint64_t parent) {
  Frame& f = ts.frames[i];
  uint32_t generation = g_schema_generation.load(std::memory_order_relaxed);
  if (!ts.operators) ts.operators.reset(new OperatorSlot[kCacheSlots]());
  OperatorSlot& slot = ts.operators[mix(parent, uintptr_t(f.schema)) & (kCacheSlots - 1)];
  if (slot.generation == generation && slot.parent == parent && slot.schema == f.schema) {
    f.name = slot.name;
    f.kind = slot.kind;
    f.ctx = slot.kind == kOp ? slot.id : parent;
    return;
  }
  classify(ts, i, parent, nullptr);
  slot = OperatorSlot{parent, f.schema, f.name, f.ctx, generation, f.kind};
}

PyObject* py_entry(PyObject*, PyObject* arg);
PyObject* py_intern(PyObject*, PyObject* args);

}  // namespace proton_torch
#pragma GCC visibility pop

