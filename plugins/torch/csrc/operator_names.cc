// Operator frames named (operator_names.h): context ids, the thread's caches, input shapes, classify.
#include "operator_names.h"

#include <ATen/core/ivalue.h>

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "autograd_records.h"
#include "unobserved.h"

namespace proton_torch {

namespace {

const char* const kEntryKinds[] = {"op", "module", "backward", "name"};

struct Key {
  uint64_t parent;
  uint64_t link;
  bool known;
  std::string name;
  bool operator==(const Key& o) const {
    return parent == o.parent && link == o.link && known == o.known && name == o.name;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<std::string>()(k.name) ^ (k.parent * 0x9E3779B97F4A7C15ull) ^
           (k.link * 0xC2B2AE3D27D4EB4Full) ^ size_t(k.known);
  }
};

}  // namespace

std::mutex g_intern_mu;
std::deque<Entry> g_entries;  // a deque: an entry's name stays where it is (caches point at it)
namespace {
std::unordered_map<Key, uint64_t, KeyHash> g_index;
}  // namespace

// The id of (parent, name) or of the link (parent=B, link=F); *stable_name gets the entry's own copy.
// Out of the callers' hot lines: a thread's caches answer nearly every lookup.
__attribute__((noinline, cold)) uint64_t intern(uint64_t parent, const char* name, size_t len, uint64_t link,
                                                const char** stable_name, bool known,
                                                EntryKind kind) {
  Key key{parent, link, known, std::string(name, len)};
  std::lock_guard<std::mutex> g(g_intern_mu);
  auto it = g_index.find(key);
  uint64_t id;
  if (it != g_index.end()) {
    id = it->second;
  } else {
    id = g_first_id.load(std::memory_order_relaxed) + g_entries.size();
    g_entries.push_back(Entry{parent, link, known, kind, key.name});
    g_index.emplace(std::move(key), id);
  }
  if (stable_name != nullptr) *stable_name = g_entries[id - g_first_id.load(std::memory_order_relaxed)].name.c_str();
  return id;
}

namespace {

// Equal C strings; inline: the names compared are short and usually differ within a few bytes.
inline bool streq(const char* a, const char* b) {
  while (*a == *b) {
    if (*a == '\0') return true;
    ++a;
    ++b;
  }
  return false;
}

// The first ``n`` bytes of ``a`` (a C string) and ``b`` (``n`` bytes, none of them NUL) are equal: a shorter ``a``
// differs at its terminator, so nothing past it is read. Inline, where libc's strncmp is a vector routine of many
// cache lines that a GPU host's launches evict between two calls.
inline bool same_bytes(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace

// The id of (parent, name): the thread's cache (no lock, no allocation), else the shared table.
// ``key`` is the name's address for names that outlive the call (operator schemas), else a hash of it:
// either way a hit is checked against the entry's own copy of the name.
uint64_t lookup(ThreadState& ts, uint64_t parent, const char* name, size_t len, uintptr_t key,
                EntryKind kind) {
  if (!ts.cache) ts.cache.reset(new CacheSlot[kCacheSlots]());
  CacheSlot& slot = ts.cache[mix(parent, key) & (kCacheSlots - 1)];
  if (slot.id != 0 && slot.parent == parent && slot.key == key && same_bytes(slot.name, name, len) &&
      slot.name[len] == '\0')
    return slot.id;
  const char* stable = nullptr;
  uint64_t id = intern(parent, name, len, 0, &stable, true, kind);
  slot = CacheSlot{parent, key, stable, id};
  return id;
}

namespace {

// lookup() for an operator's own name, keyed by its address: a hit costs one comparison of the name
// with the entry's copy (the address may be reused for another name once a record's storage is freed).
inline uint64_t lookup_operator(ThreadState& ts, uint64_t parent, const char* name) {
  if (ts.cache) {
    const CacheSlot& slot = ts.cache[mix(parent, uintptr_t(name)) & (kCacheSlots - 1)];
    if (slot.id != 0 && slot.parent == parent && slot.key == uintptr_t(name) && streq(slot.name, name)) return slot.id;
  }
  return lookup(ts, parent, name, std::strlen(name), uintptr_t(name));
}

// ----------------------------------------------------------------- shapes ----
void append_int(std::string& out, int64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%lld", static_cast<long long>(v));
  out.append(tmp, size_t(n));
}

void append_tensor(std::string& out, const at::Tensor& t) {
  if (t.is_nested()) {
    out += "nested";
    return;
  }
  c10::SymIntArrayRef sizes = t.sym_sizes();
  if (sizes.empty()) {
    out += "()";
    return;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += 'x';
    auto v = sizes[i].maybe_as_int();
    if (v.has_value()) {
      append_int(out, *v);
    } else {
      out += '?';  // a symbolic size (tracing under torch.compile)
    }
  }
}

// "[5x8,8x16]": the operator's tensor inputs in order (a list of tensors as "(4x8;4x8)"); others left out.
void append_shapes(std::string& out, const at::RecordFunction& rf) {
  out += '[';
  bool first = true;
  for (const c10::IValue& v : rf.inputs()) {
    if (out.size() > kMaxNameBytes) break;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (!first) out += ',';
      first = false;
      append_tensor(out, t);
    } else if (v.isList()) {
      auto items = v.toListRef();
      bool tensors = false;
      for (const c10::IValue& item : items) tensors = tensors || item.isTensor();
      if (!tensors) continue;
      if (!first) out += ',';
      first = false;
      out += '(';
      for (size_t i = 0; i < items.size() && out.size() <= kMaxNameBytes; ++i) {
        if (i) out += ';';
        if (items[i].isTensor() && items[i].toTensor().defined()) {
          append_tensor(out, items[i].toTensor());
        } else {
          out += '-';
        }
      }
      out += ')';
    }
  }
  out += ']';
  if (out.size() > kMaxNameBytes) {
    out.resize(kMaxNameBytes);
    out += "...";
  }
}

// "aten::detach" directly inside "aten::detach", or "detach" (autograd's own record of it) inside it.
bool same_operator(const char* outer, const char* inner) {
  if (outer == inner || streq(outer, inner)) return true;
  return outer[0] == 'a' && outer[1] == 't' && outer[2] == 'e' && outer[3] == 'n' && outer[4] == ':' &&
         outer[5] == ':' && streq(outer + 6, inner);
}

// Records that only wrap the operator inside them: not shown.
bool transparent(const char* name) {
  switch (name[0]) {
    case 'P':
      return std::strcmp(name, "PythonDispatchMode") == 0 || std::strcmp(name, "PythonTLSSnapshot") == 0;
    case 'r':
      return std::strcmp(name, "record_param_comms") == 0;
    default:
      return false;
  }
}

const char* record_name(const at::RecordFunction& rf) {
  const char* name = rf.name();
  return name == nullptr || name[0] == '\0' ? "<unnamed>" : name;
}

}  // namespace

// What frame ``i`` stands for, under ``parent``: its kind, name and context. ``inputs``: the record whose
// inputs name its shapes (only at its entry).
void classify(ThreadState& ts, size_t i, uint64_t parent, const at::RecordFunction* inputs) {
  auto& frames = ts.frames;
  Frame& f = frames[i];
  const char* name;
  {
    PROTON_TIMED(kTimedClassifyName);
    name = record_name(*f.rf);
    f.name = name;
    f.ctx = parent;
    f.kind = kPass;
    if ((!g_tracing.load(std::memory_order_relaxed) && launches_nothing(name)) || transparent(name)) return;
  }
  // The same operator again, directly inside itself (a Python dispatch mode or a tensor subclass
  // calling it once more): one node.
  for (size_t j = i; j > 0; --j) {
    const Frame& g = frames[j - 1];
    if (g.kind == kPass) continue;
    if (g.kind == kOp && g.ctx == parent && same_operator(g.name, name)) return;
    break;
  }
  f.kind = kOp;
  if (inputs != nullptr && g_shapes.load(std::memory_order_relaxed) && inputs->needsInputs()) {
    std::string& buf = ts.buf;
    buf.assign(name);
    append_shapes(buf, *inputs);
    f.ctx = lookup(ts, parent, buf.data(), buf.size(), uintptr_t(hash_bytes(buf.data(), buf.size())));
  } else {
    PROTON_TIMED(kTimedClassifyLookup);
    f.ctx = lookup_operator(ts, parent, name);
  }
}

// The context of frame ``top``, resolving the open frames up to it (providing).
uint64_t resolve_to(ThreadState& ts, size_t top) {
  auto& frames = ts.frames;
  size_t i = top + 1;
  while (i > 0 && unresolved(frames[i - 1].kind)) --i;
  uint64_t parent = i == 0 ? ts.base : frames[i - 1].ctx;
  for (; i <= top; ++i) {
    if (frames[i].kind == kBackwardOpen) {
      resolve_backward(ts, frames[i]);
    } else {
      classify(ts, i, parent, nullptr);
    }
    parent = frames[i].ctx;
  }
  return frames[top].ctx;
}

PyObject* py_entry(PyObject*, PyObject* arg) {
  uint64_t id = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  std::lock_guard<std::mutex> g(g_intern_mu);
  uint64_t first = g_first_id.load(std::memory_order_relaxed);
  if (id < first || id - first >= g_entries.size()) Py_RETURN_NONE;
  const Entry& e = g_entries[id - first];
  if (e.link != 0)
    return Py_BuildValue("(sKKO)", "link", (unsigned long long)e.parent, (unsigned long long)e.link,
                         e.known ? Py_True : Py_False);
  return Py_BuildValue("(sKs#s)", "name", (unsigned long long)e.parent, e.name.data(), Py_ssize_t(e.name.size()),
                       kEntryKinds[e.kind]);
}

PyObject* py_intern(PyObject*, PyObject* args) {
  unsigned long long parent;
  const char* name;
  Py_ssize_t len;
  if (!PyArg_ParseTuple(args, "Ks#", &parent, &name, &len)) return nullptr;
  return PyLong_FromUnsignedLongLong(intern(parent, name, size_t(len), 0, nullptr, true, kNamedEntry));
}

}  // namespace proton_torch

