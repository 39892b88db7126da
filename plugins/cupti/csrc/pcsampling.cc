// PC sampling: the sample store, line mapping and CUPTI's PC Sampling API per
// context (see pcsampling.h for the design).
#include "pcsampling.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_set>

#include "profiler.h"

namespace proton_cupti {
namespace pcs {

// ============================================================ pure helpers ====
namespace {

const char kStalledPrefix[] = "smsp__pcsamp_warps_issue_stalled_";
const char kPcsampPrefix[] = "smsp__pcsamp_";
const char kNotIssued[] = "_not_issued";

bool starts_with(const std::string& s, const char* prefix) { return s.compare(0, std::strlen(prefix), prefix) == 0; }

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

template <typename T>
T read_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // cubins are little-endian, as every host CUDA runs on
  return v;
}

void add_count(Counts& into, uint32_t slot, uint64_t n) {
  auto it = std::lower_bound(into.begin(), into.end(), slot,
                             [](const std::pair<uint32_t, uint64_t>& a, uint32_t s) { return a.first < s; });
  if (it != into.end() && it->first == slot)
    it->second += n;
  else
    into.insert(it, {slot, n});
}

void add_counts(Counts& into, const Counts& from) {
  for (const auto& kv : from) add_count(into, kv.first, kv.second);
}

}  // namespace

std::string stall_metric_name(const std::string& cupti_name) {
  if (starts_with(cupti_name, kStalledPrefix)) return "stall_" + cupti_name.substr(std::strlen(kStalledPrefix));
  if (starts_with(cupti_name, kPcsampPrefix)) return "stall_" + cupti_name.substr(std::strlen(kPcsampPrefix));
  return "stall_" + cupti_name;
}

bool stall_not_issued(const std::string& cupti_name) {
  size_t n = std::strlen(kNotIssued);
  return cupti_name.size() >= n && cupti_name.compare(cupti_name.size() - n, n, kNotIssued) == 0;
}

// "<dir>/<file>:<line>@<function>", upstream's spelling (and our Python frames'); without a function, no "@".
std::string source_line_name(uint32_t line, const char* file, const char* dir, const char* function) {
  if (line == 0 || file == nullptr || file[0] == '\0') return "";
  std::string path = file;
  if (dir != nullptr && dir[0] != '\0' && file[0] != '/') {
    path = dir;
    if (path.back() != '/') path += '/';
    path += file;
  }
  path += ":" + std::to_string(line);
  if (function != nullptr && function[0] != '\0') path += std::string("@") + function;
  return path;
}

std::string sass_name(uint64_t pc_offset) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "sass+0x%llx", static_cast<unsigned long long>(pc_offset));
  return buf;
}

bool cubin_has_line_info(const void* data, size_t size) {
  const uint8_t* b = static_cast<const uint8_t*>(data);
  if (b == nullptr || size < 64 || std::memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2 /* ELFCLASS64 */ ||
      b[5] != 1 /* little-endian */)
    return false;
  uint64_t shoff = read_le<uint64_t>(b + 0x28);
  uint16_t shentsize = read_le<uint16_t>(b + 0x3A);
  uint16_t shnum = read_le<uint16_t>(b + 0x3C);
  uint16_t shstrndx = read_le<uint16_t>(b + 0x3E);
  if (shentsize < 0x40 || shnum == 0 || shstrndx >= shnum || shoff > size ||
      uint64_t(shnum) * shentsize > size - shoff)
    return false;
  const uint8_t* strhdr = b + shoff + uint64_t(shstrndx) * shentsize;
  uint64_t stroff = read_le<uint64_t>(strhdr + 0x18), strsize = read_le<uint64_t>(strhdr + 0x20);
  if (stroff > size || strsize > size - stroff) return false;
  const char* strtab = reinterpret_cast<const char*>(b + stroff);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = b + shoff + uint64_t(i) * shentsize;
    uint32_t name = read_le<uint32_t>(sh);
    uint64_t sec_size = read_le<uint64_t>(sh + 0x20);
    if (name >= strsize || sec_size == 0) continue;
    size_t len = strnlen(strtab + name, strsize - name);
    std::string section(strtab + name, len);
    if (section == ".debug_line" || section == ".nv_debug_line_sass") return true;
  }
  return false;
}

std::vector<uint64_t> split_count(uint64_t count, const std::vector<uint64_t>& weights) {
  size_t n = weights.size();
  std::vector<uint64_t> shares(n, 0);
  if (n == 0) return shares;
  std::vector<uint64_t> w = weights;
  unsigned __int128 total = 0;
  for (uint64_t x : w) total += x;
  if (total == 0) {
    std::fill(w.begin(), w.end(), 1);
    total = n;
  }
  std::vector<unsigned __int128> rem(n);
  uint64_t given = 0;
  for (size_t j = 0; j < n; ++j) {
    unsigned __int128 p = static_cast<unsigned __int128>(count) * w[j];
    shares[j] = static_cast<uint64_t>(p / total);
    rem[j] = p % total;
    given += shares[j];
  }
  std::vector<size_t> order(n);
  for (size_t j = 0; j < n; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t k = 0; given < count && k < n; ++k, ++given) shares[order[k]] += 1;
  return shares;
}

// ============================================================ LineMapper ====
size_t LineMapper::KeyHash::operator()(const Key& k) const {
  return size_t(mix(mix(k.crc, k.pc), k.fn));
}

bool LineMapper::add_cubin(uint64_t crc, const void* data, size_t size) {
  if (!cubin_has_line_info(data, size)) return false;
  std::lock_guard<std::mutex> g(mu_);
  auto it = cubins_.find(crc);
  if (it == cubins_.end()) cubins_.emplace(crc, std::string(static_cast<const char*>(data), size));
  return true;
}

std::string LineMapper::resolve(uint64_t crc, uint32_t fn, const std::string& function, uint64_t pc,
                                Correlate correlate) {
  std::lock_guard<std::mutex> g(mu_);
  Key key{crc, pc, fn};
  auto hit = cache_.find(key);
  if (hit != cache_.end()) return hit->second;
  auto cubin = cubins_.find(crc);
  if (cubin == cubins_.end() || correlate == nullptr) return sass_name(pc);  // not cached: a cubin may come later
  CUpti_GetSassToSourceCorrelationParams p;
  std::memset(&p, 0, sizeof(p));
  p.size = CUpti_GetSassToSourceCorrelationParamsSize;
  p.cubin = cubin->second.data();
  p.cubinSize = cubin->second.size();
  p.functionName = function.c_str();
  p.pcOffset = pc;
  std::string name;
  if (correlate(&p) == CUPTI_SUCCESS) name = source_line_name(p.lineNumber, p.fileName, p.dirName, function.c_str());
  std::free(p.fileName);  // CUPTI allocates both with malloc; the caller frees them
  std::free(p.dirName);
  if (name.empty()) name = sass_name(pc);
  cache_.emplace(key, name);
  return name;
}

void LineMapper::clear_cache() {
  std::lock_guard<std::mutex> g(mu_);
  cache_.clear();
}

size_t LineMapper::cubins() {
  std::lock_guard<std::mutex> g(mu_);
  return cubins_.size();
}

size_t LineMapper::cubin_bytes() {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const auto& kv : cubins_) n += kv.second.size();
  return n;
}

size_t LineMapper::cached() {
  std::lock_guard<std::mutex> g(mu_);
  return cache_.size();
}

// ================================================================= Store ====
size_t Store::Hash::operator()(const PcKey& k) const {
  return size_t(mix(mix(mix(mix(k.scope, k.crc), k.pc), k.device), k.fn));
}
size_t Store::Hash::operator()(const GroupKey& k) const { return size_t(mix(k.scope, k.fn)); }
size_t Store::Hash::operator()(const OutKey& k) const {
  return size_t(mix(mix(mix(uint64_t(k.epoch) << 32 | k.node, k.fn), k.device), k.line));
}

void Store::reset(int collection) {
  std::lock_guard<std::mutex> a(attr_mu_);
  std::lock_guard<std::mutex> g(mu_);
  names_.clear();
  name_index_.clear();
  name_by_ptr_.clear();
  lines_.clear();
  line_index_.clear();
  pending_.clear();
  window_.clear();
  last_.clear();
  out_.clear();
  retired_below_ = 0;
  stats_ = Stats{};  // metric slots stay: contexts configured earlier keep their index -> slot maps
  collection_.store(collection, std::memory_order_relaxed);
  lines().clear_cache();
}

uint32_t Store::slot(const std::string& cupti_name) {
  std::lock_guard<std::mutex> g(mu_);
  std::string metric = stall_metric_name(cupti_name);
  auto it = metric_index_.find(metric);
  if (it != metric_index_.end()) return it->second;
  uint32_t id = uint32_t(metrics_.size());
  metrics_.push_back(metric);
  base_.push_back(!stall_not_issued(cupti_name));
  metric_index_.emplace(metric, id);
  return id;
}

uint32_t Store::fn_locked(const char* name) {
  if (name == nullptr) name = "<unknown kernel>";  // the Recorder's spelling for a nameless record
  // CUPTI hands the same string for a function again and again: try its address first (checked,
  // since another string may live there later).
  auto p = name_by_ptr_.find(name);
  if (p != name_by_ptr_.end() && std::strcmp(names_[p->second].c_str(), name) == 0) return p->second;
  uint32_t id;
  auto it = name_index_.find(name);
  if (it != name_index_.end()) {
    id = it->second;
  } else {
    id = uint32_t(names_.size());
    names_.emplace_back(name);
    name_index_.emplace(names_.back(), id);
  }
  if (name_by_ptr_.size() < (1u << 16)) name_by_ptr_[name] = id;
  return id;
}

uint32_t Store::line_locked(const std::string& name) {
  auto it = line_index_.find(name);
  if (it != line_index_.end()) return it->second;
  uint32_t id = uint32_t(lines_.size());
  lines_.push_back(name);
  line_index_.emplace(name, id);
  return id;
}

uint64_t Store::base_sum(const Counts& c) const {
  uint64_t n = 0;
  for (const auto& kv : c)
    if (kv.first < base_.size() && base_[kv.first]) n += kv.second;
  return n;
}

void Store::ingest(const CUpti_PCSamplingData& data, uint32_t device,
                   const std::unordered_map<uint32_t, uint32_t>& slots) {
  int collection = collection_.load(std::memory_order_relaxed);
  size_t n = std::min(data.totalNumPcs, data.collectNumPcs);
  // Unknown stall indexes (none expected) get a slot of their own, named by index.
  std::vector<std::pair<uint32_t, uint32_t>> extra;
  for (size_t i = 0; i < n && data.pPcData != nullptr; ++i) {
    const CUpti_PCSamplingPCData& p = data.pPcData[i];
    for (size_t j = 0; j < p.stallReasonCount && p.stallReason != nullptr; ++j) {
      uint32_t idx = p.stallReason[j].pcSamplingStallReasonIndex;
      if (slots.find(idx) == slots.end() &&
          std::find_if(extra.begin(), extra.end(), [&](const auto& e) { return e.first == idx; }) == extra.end())
        extra.push_back({idx, slot("unknown_" + std::to_string(idx))});
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  stats_.buffers += 1;
  stats_.total_samples += data.totalSamples;
  stats_.dropped_samples += data.droppedSamples;
  stats_.non_user_samples += data.nonUsrKernelsTotalSamples;
  for (size_t i = 0; i < n && data.pPcData != nullptr; ++i) {
    const CUpti_PCSamplingPCData& p = data.pPcData[i];
    Counts counts;
    for (size_t j = 0; j < p.stallReasonCount && p.stallReason != nullptr; ++j) {
      const CUpti_PCSamplingStallReason& r = p.stallReason[j];
      if (r.samples == 0) continue;
      auto it = slots.find(r.pcSamplingStallReasonIndex);
      uint32_t s = 0;
      if (it != slots.end()) {
        s = it->second;
      } else {
        s = std::find_if(extra.begin(), extra.end(),
                         [&](const auto& e) { return e.first == r.pcSamplingStallReasonIndex; })->second;
      }
      add_count(counts, s, r.samples);
    }
    stats_.pc_records += 1;
    if (counts.empty()) continue;
    uint32_t fn = fn_locked(p.functionName);
    uint64_t scope = collection == kSerialized ? uint64_t(p.correlationId) : uint64_t(device);
    stats_.samples_in += base_sum(counts);
    add_counts(pending_[PcKey{scope, p.cubinCrc, p.pcOffset, device, fn}], counts);
  }
}

void Store::note_kernel(uint32_t corr, const char* name, uint32_t device, uint32_t epoch, uint32_t node,
                        uint64_t time_ns) {
  int collection = collection_.load(std::memory_order_relaxed);
  if (collection == kOff) return;
  std::lock_guard<std::mutex> g(mu_);
  uint32_t fn = fn_locked(name);
  uint64_t scope = collection == kSerialized ? uint64_t(corr) : uint64_t(device);
  Weight& w = window_[GroupKey{scope, fn}][uint64_t(epoch) << 32 | node];
  w.time_ns += time_ns;
  w.count += 1;
  w.device = device;
}

void Store::attribute(LineMapper& lines, Correlate correlate, bool final) {
  std::lock_guard<std::mutex> serial(attr_mu_);
  int collection = collection_.load(std::memory_order_relaxed);
  std::unordered_map<PcKey, Counts, Hash> pending;
  std::unordered_map<GroupKey, Weights, Hash> window;
  {
    std::lock_guard<std::mutex> g(mu_);
    pending.swap(pending_);
    window.swap(window_);
  }
  // Group the PCs by (scope, function): one split per group.
  std::unordered_map<GroupKey, std::vector<const std::pair<const PcKey, Counts>*>, Hash> groups;
  for (const auto& kv : pending) groups[GroupKey{kv.first.scope, kv.first.fn}].push_back(&kv);

  std::unordered_map<OutKey, Counts, Hash> out;
  std::unordered_map<PcKey, Counts, Hash> carry;
  uint64_t attributed = 0, unsessioned = 0, unattributed = 0, late = 0, max_scope = 0;
  uint32_t retired_below = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    retired_below = retired_below_;
  }
  for (const auto& kv : window) max_scope = std::max(max_scope, kv.first.scope);
  for (const auto& kv : pending) max_scope = std::max(max_scope, kv.first.scope);
  // Serialized collection keys by correlation id: ids far behind the newest belong to launches
  // whose records (or samples) will not come any more.  Records lag samples by at most an activity
  // buffer (8 MiB, ~40 000 records) between complete flushes, so 2^17 ids keep every live one and
  // bound the window to ~2^17 launches.
  const uint64_t horizon = uint64_t(1) << 17;
  auto stale = [&](uint64_t scope) {
    return collection == kSerialized && max_scope > horizon && scope < max_scope - horizon;
  };

  for (auto& group : groups) {
    const Weights* weights = nullptr;
    auto w = window.find(group.first);
    if (w != window.end() && !w->second.empty()) weights = &w->second;
    if (weights == nullptr && collection == kContinuous) {
      auto l = last_.find(group.first);
      if (l != last_.end()) weights = &l->second;
    }
    if (weights == nullptr) {
      std::lock_guard<std::mutex> g(mu_);
      for (const auto* pc : group.second) {
        if (final || stale(pc->first.scope))
          unattributed += base_sum(pc->second);
        else
          add_counts(carry[pc->first], pc->second);
      }
      continue;
    }
    std::vector<std::pair<uint64_t, Weight>> entries(weights->begin(), weights->end());
    std::vector<uint64_t> by_time, by_count;
    uint64_t total_time = 0;
    for (const auto& e : entries) {
      by_time.push_back(e.second.time_ns);
      by_count.push_back(e.second.count);
      total_time += e.second.time_ns;
    }
    const std::vector<uint64_t>& shares_of = total_time > 0 ? by_time : by_count;
    std::string function;
    {
      std::lock_guard<std::mutex> g(mu_);
      function = names_[group.first.fn];
    }
    for (const auto* pc : group.second) {
      std::string line = lines.resolve(pc->first.crc, pc->first.fn, function, pc->first.pc, correlate);
      std::lock_guard<std::mutex> g(mu_);
      uint32_t line_id = line_locked(line);
      for (const auto& sc : pc->second) {
        bool base = sc.first < base_.size() && base_[sc.first];
        std::vector<uint64_t> shares = split_count(sc.second, shares_of);
        for (size_t j = 0; j < entries.size(); ++j) {
          if (shares[j] == 0) continue;
          uint32_t epoch = uint32_t(entries[j].first >> 32), node = uint32_t(entries[j].first);
          if (epoch == 0) {  // launched while no session listened
            if (base) unsessioned += shares[j];
            continue;
          }
          if (epoch < retired_below) {  // the core has closed that epoch's books
            if (base) late += shares[j];
            continue;
          }
          if (base) attributed += shares[j];
          add_count(out[OutKey{epoch, node, group.first.fn, entries[j].second.device, line_id}], sc.first, shares[j]);
        }
      }
    }
    if (collection == kContinuous && w != window.end() && !w->second.empty()) {
      last_[group.first] = std::move(w->second);  // F's next samples without records of their own split like these
      window.erase(w);
    }
  }

  if (final) {
    window.clear();
  } else if (collection == kSerialized) {
    for (auto it = window.begin(); it != window.end();) it = stale(it->first.scope) ? window.erase(it) : std::next(it);
  }
  std::lock_guard<std::mutex> g(mu_);
  for (auto& kv : out) add_counts(out_[kv.first], kv.second);
  uint64_t pending_samples = 0;
  for (auto& kv : carry) {
    pending_samples += base_sum(kv.second);
    add_counts(pending_[kv.first], kv.second);
  }
  for (auto& kv : window) {
    Weights& into = window_[kv.first];
    for (auto& e : kv.second) {
      Weight& x = into[e.first];
      x.time_ns += e.second.time_ns;
      x.count += e.second.count;
      x.device = e.second.device;
    }
  }
  stats_.attributed += attributed;
  stats_.unsessioned += unsessioned;
  stats_.unattributed += unattributed;
  stats_.late += late;
  stats_.pending_samples = pending_samples;
}

void Store::retire_below(uint32_t epoch) {
  std::lock_guard<std::mutex> serial(attr_mu_);
  std::lock_guard<std::mutex> g(mu_);
  if (epoch <= retired_below_) return;
  retired_below_ = epoch;
  // Splits that only name retired epochs can place nothing any more.
  for (auto it = last_.begin(); it != last_.end();) {
    Weights& w = it->second;
    for (auto e = w.begin(); e != w.end();) {
      uint32_t ep = uint32_t(e->first >> 32);
      e = (ep != 0 && ep < epoch) ? w.erase(e) : std::next(e);
    }
    it = w.empty() ? last_.erase(it) : std::next(it);
  }
}

std::vector<Store::Out> Store::take() {
  std::unordered_map<OutKey, Counts, Hash> out;
  std::lock_guard<std::mutex> g(mu_);
  out.swap(out_);
  std::vector<Out> result;
  result.reserve(out.size());
  for (const auto& kv : out) {
    Out o{kv.first.epoch, kv.first.node, names_[kv.first.fn], kv.first.device, lines_[kv.first.line], {}};
    o.metrics.emplace_back("samples", base_sum(kv.second));
    for (const auto& sc : kv.second) o.metrics.emplace_back(metrics_[sc.first], sc.second);
    result.push_back(std::move(o));
  }
  return result;
}

Store::Stats Store::stats() {
  std::lock_guard<std::mutex> g(mu_);
  Stats s = stats_;
  s.pending_keys = pending_.size();
  s.window_keys = window_.size();
  s.last_keys = last_.size();
  s.out_keys = out_.size();
  s.functions = names_.size();
  s.lines = lines_.size();
  s.metrics = metrics_;
  return s;
}

Store& store() {
  static Store* instance = new Store();  // never destroyed: CUPTI's threads may still call in at exit
  return *instance;
}

LineMapper& lines() {
  static LineMapper* instance = new LineMapper();
  return *instance;
}

// =============================================================== sampler ====
std::atomic<bool> g_on{false};

namespace {

#define PCS_FUNCS(X)                          \
  X(cuptiPCSamplingEnable)                    \
  X(cuptiPCSamplingDisable)                   \
  X(cuptiPCSamplingStart)                     \
  X(cuptiPCSamplingStop)                      \
  X(cuptiPCSamplingGetData)                   \
  X(cuptiPCSamplingSetConfigurationAttribute) \
  X(cuptiPCSamplingGetNumStallReasons)        \
  X(cuptiPCSamplingGetStallReasons)           \
  X(cuptiGetCubinCrc)                         \
  X(cuptiGetSassToSourceCorrelation)          \
  X(cuptiGetDeviceId)                         \
  X(cuptiEnableCallback)

struct Api {
  bool resolved = false;
  std::string missing;
#define DECLARE(name) decltype(&::name) name = nullptr;
  PCS_FUNCS(DECLARE)
#undef DECLARE
};
Api api;
std::mutex api_mu;

// Resolves the PC sampling entry points from the libcupti the profiler loaded.
Api& pcs_api() {
  std::lock_guard<std::mutex> g(api_mu);
  if (!api.resolved) {
    Api a;
    a.resolved = true;
#define RESOLVE(name)                                                    \
  a.name = reinterpret_cast<decltype(a.name)>(cupti_symbol(#name));      \
  if (a.name == nullptr && a.missing.empty()) a.missing = #name;
    PCS_FUNCS(RESOLVE)
#undef RESOLVE
    if (cupti_symbol("cuptiSubscribe") == nullptr) {
      a.resolved = false;  // libcupti not loaded yet: try again later
      a.missing = "libcupti";
    }
    api = a;
  }
  return api;
}

Correlate correlate_fn() {
  Api& a = pcs_api();
  return a.cuptiGetSassToSourceCorrelation;
}

// One CUDA context with PC sampling enabled.  The struct itself is never freed
// while the process runs (callbacks may hold a pointer); its buffers are.
struct Ctx {
  CUcontext ctx = nullptr;
  uint32_t device = 0;
  bool started = false;  // continuous: inside a cuptiPCSamplingStart range
  bool dead = false;     // disabled (stop, context destroyed)
  std::mutex m;          // GetData and everything below
  std::vector<uint32_t> stall_index;
  std::vector<std::string> stall_names;
  std::unordered_map<uint32_t, uint32_t> slots;
  // Two buffers, as NVIDIA's pc_sampling_continuous sample uses them: `staging` is the one
  // configured (SAMPLING_DATA_BUFFER), where CUPTI puts a range's records when the range ends
  // and which GetData empties; `get` receives GetData.  staging is read directly only after
  // cuptiPCSamplingDisable, which leaves the last records there.
  std::vector<CUpti_PCSamplingPCData> staging_pcs, get_pcs;
  std::vector<CUpti_PCSamplingStallReason> staging_reasons, get_reasons;
  CUpti_PCSamplingData staging, get;
  std::vector<CUpti_PCSamplingConfigurationInfo> config;  // kept alive while enabled
};

struct State {
  Options options;
  Host host;
  std::mutex ctx_mu;  // ctxs and graveyard
  std::vector<Ctx*> ctxs;
  std::vector<std::unique_ptr<Ctx>> owned;
  std::unordered_set<CUcontext> failed;  // enabling failed: callbacks do not try again per launch
  std::mutex enable_mu;    // one enable at a time
  std::mutex collect_mu;   // one collect at a time
  std::atomic<uint64_t> generation{1};
  bool kernels_serial = false;
  bool callbacks_on = false;
  // drain thread
  std::thread drainer;
  std::mutex drain_mu;
  std::condition_variable drain_cv;
  bool drain_stop = false;
  // diagnostics
  std::mutex diag_mu;
  uint64_t enable_failures = 0, get_errors = 0, hardware_full = 0, restarts = 0, drains = 0, staging_reads = 0;
  std::string last_error;
  std::vector<std::string> first_stall_names;
  // CUPTI's function name strings, freed after cuptiFinalize (they may be shared with activity records)
  std::mutex names_mu;
  std::unordered_set<char*> function_names;
};
State st;

thread_local uint64_t tls_generation = 0;
thread_local CUcontext tls_ctx = nullptr;
thread_local Ctx* tls_state = nullptr;

void note_error(const std::string& what) {
  std::lock_guard<std::mutex> g(st.diag_mu);
  st.last_error = what;
}

std::string text(CUptiResult r) { return cupti_error_text(r); }

const char* attribute_name(CUpti_PCSamplingConfigurationAttributeType t) {
  switch (t) {
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD: return "the sampling period";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON: return "the stall reasons";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE: return "the scratch buffer size";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE: return "the hardware buffer size";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE: return "the collection mode";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL: return "start/stop control";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER: return "the sampling data buffer";
    default: return "an attribute";
  }
}

// Makes ctx current on this thread for the calls in scope, when it is not.
struct CurrentContext {
  bool pushed = false;
  explicit CurrentContext(CUcontext ctx) {
    if (ctx != nullptr && current_context() != ctx) pushed = push_context(ctx);
  }
  ~CurrentContext() {
    if (pushed) pop_context();
  }
};

void free_buffers(Ctx& c) {
  for (auto* v : {&c.staging_pcs, &c.get_pcs}) {
    v->clear();
    v->shrink_to_fit();
  }
  for (auto* v : {&c.staging_reasons, &c.get_reasons}) {
    v->clear();
    v->shrink_to_fit();
  }
  c.config.clear();
  std::memset(&c.staging, 0, sizeof(c.staging));
  std::memset(&c.get, 0, sizeof(c.get));
}

void alloc_buffer(CUpti_PCSamplingData& d, std::vector<CUpti_PCSamplingPCData>& pcs,
                  std::vector<CUpti_PCSamplingStallReason>& reasons, size_t num_pcs, size_t num_reasons) {
  pcs.assign(num_pcs, CUpti_PCSamplingPCData{});
  reasons.assign(num_pcs * num_reasons, CUpti_PCSamplingStallReason{});
  for (size_t i = 0; i < num_pcs; ++i) {
    pcs[i].size = sizeof(CUpti_PCSamplingPCData);
    pcs[i].stallReason = &reasons[i * num_reasons];
  }
  std::memset(&d, 0, sizeof(d));
  d.size = sizeof(CUpti_PCSamplingData);
  d.collectNumPcs = num_pcs;
  d.pPcData = pcs.data();
}

// Folds what a buffer holds into the store and empties it (c.m held).
void ingest_buffer(Ctx& c, CUpti_PCSamplingData& d) {
  size_t n = std::min(d.totalNumPcs, d.collectNumPcs);
  if (n > 0 || d.totalSamples > 0) {
    store().ingest(d, c.device, c.slots);
    std::lock_guard<std::mutex> g(st.names_mu);
    for (size_t i = 0; i < n; ++i)
      if (d.pPcData[i].functionName != nullptr) st.function_names.insert(d.pPcData[i].functionName);
  }
  d.totalNumPcs = 0;
  d.remainingNumPcs = 0;
  d.totalSamples = 0;
  d.droppedSamples = 0;
  d.nonUsrKernelsTotalSamples = 0;
  d.hardwareBufferFull = 0;
}

// Everything CUPTI holds for a context: GetData until neither the get buffer
// nor the staging buffer reports more (c.m held).
void drain_ctx(Ctx& c) {
  if (c.dead || c.get_pcs.empty()) return;
  Api& a = pcs_api();
  CurrentContext current(c.ctx);
  for (int round = 0; round < 4096; ++round) {
    CUpti_PCSamplingGetDataParams p;
    std::memset(&p, 0, sizeof(p));
    p.size = CUpti_PCSamplingGetDataParamsSize;
    p.ctx = c.ctx;
    p.pcSamplingData = &c.get;
    CUptiResult r = a.cuptiPCSamplingGetData(&p);
    size_t got = std::min(c.get.totalNumPcs, c.get.collectNumPcs), remaining = c.get.remainingNumPcs;
    if (r != CUPTI_SUCCESS) {
      {
        std::lock_guard<std::mutex> g(st.diag_mu);
        if (r == CUPTI_ERROR_OUT_OF_MEMORY && c.get.hardwareBufferFull) {
          st.hardware_full += 1;  // what overflowed is lost; the data after it comes on
        } else {
          st.get_errors += 1;
          st.last_error = "cuptiPCSamplingGetData failed: " + text(r);
        }
      }
      ingest_buffer(c, c.get);
      break;
    }
    ingest_buffer(c, c.get);
    bool staged = c.staging.totalNumPcs > 0 || c.staging.remainingNumPcs > 0;
    if (remaining == 0 && !staged) break;
    if (got == 0 && remaining == 0) {
      // The staging buffer reports records GetData does not hand over: this CUPTI leaves a
      // range's records there for the client to read.  Take them and stop asking.
      ingest_buffer(c, c.staging);
      std::lock_guard<std::mutex> g(st.diag_mu);
      st.staging_reads += 1;
      break;
    }
  }
  std::lock_guard<std::mutex> g(st.diag_mu);
  st.drains += 1;
}

StartError fail(int code, const Ctx* c, const std::string& what, const std::string& detail) {
  StartError e;
  e.code = code;
  e.device = c ? int(c->device) : -1;
  e.what = what;
  e.detail = detail;
  return e;
}

// Enables and configures PC sampling on one context; on failure nothing stays
// enabled on it.  enable_mu held.
StartError enable_ctx(Ctx& c) {
  Api& a = pcs_api();
  const Options& o = st.options;
  CurrentContext current(c.ctx);
  uint32_t device = 0;
  if (a.cuptiGetDeviceId(c.ctx, &device) == CUPTI_SUCCESS) c.device = device;
  CUpti_PCSamplingEnableParams en;
  std::memset(&en, 0, sizeof(en));
  en.size = CUpti_PCSamplingEnableParamsSize;
  en.ctx = c.ctx;
  CUptiResult r = a.cuptiPCSamplingEnable(&en);
  if (r != CUPTI_SUCCESS) return fail(r, &c, "cuptiPCSamplingEnable", text(r));
  auto disable = [&] {
    CUpti_PCSamplingDisableParams d;
    std::memset(&d, 0, sizeof(d));
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = c.ctx;
    a.cuptiPCSamplingDisable(&d);
  };
  size_t num = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np;
  std::memset(&np, 0, sizeof(np));
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
  np.ctx = c.ctx;
  np.numStallReasons = &num;
  r = a.cuptiPCSamplingGetNumStallReasons(&np);
  if (r != CUPTI_SUCCESS || num == 0) {
    disable();
    return fail(r ? r : CUPTI_ERROR_UNKNOWN, &c, "cuptiPCSamplingGetNumStallReasons", r ? text(r) : "no stall reasons");
  }
  std::vector<std::vector<char>> name_bufs(num, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE, 0));
  std::vector<char*> name_ptrs(num);
  for (size_t i = 0; i < num; ++i) name_ptrs[i] = name_bufs[i].data();
  c.stall_index.assign(num, 0);
  CUpti_PCSamplingGetStallReasonsParams sp;
  std::memset(&sp, 0, sizeof(sp));
  sp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
  sp.ctx = c.ctx;
  sp.numStallReasons = num;
  sp.stallReasonIndex = c.stall_index.data();
  sp.stallReasons = name_ptrs.data();
  r = a.cuptiPCSamplingGetStallReasons(&sp);
  if (r != CUPTI_SUCCESS) {
    disable();
    return fail(r, &c, "cuptiPCSamplingGetStallReasons", text(r));
  }
  c.stall_names.clear();
  c.slots.clear();
  for (size_t i = 0; i < num; ++i) {
    name_bufs[i].back() = '\0';
    c.stall_names.emplace_back(name_bufs[i].data());
    c.slots[c.stall_index[i]] = store().slot(c.stall_names.back());
  }
  // The buffers CUPTI fills: PC records, each with room for every stall reason.
  alloc_buffer(c.staging, c.staging_pcs, c.staging_reasons, o.pcs_per_get, num);
  alloc_buffer(c.get, c.get_pcs, c.get_reasons, o.pcs_per_get, num);

  c.config.clear();
  auto attr = [&](CUpti_PCSamplingConfigurationAttributeType t) -> CUpti_PCSamplingConfigurationInfo& {
    CUpti_PCSamplingConfigurationInfo info;
    std::memset(&info, 0, sizeof(info));
    info.attributeType = t;
    c.config.push_back(info);
    return c.config.back();
  };
  c.config.reserve(8);
  auto& stall = attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON);
  stall.attributeData.stallReasonData.stallReasonCount = num;
  stall.attributeData.stallReasonData.pStallReasonIndex = c.stall_index.data();
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD).attributeData.samplingPeriodData.samplingPeriod =
      o.period;
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE)
      .attributeData.scratchBufferSizeData.scratchBufferSize = o.scratch_bytes;
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE)
      .attributeData.hardwareBufferSizeData.hardwareBufferSize = o.hardware_bytes;
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE).attributeData.collectionModeData.collectionMode =
      o.collection == kSerialized ? CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
                                  : CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL)
      .attributeData.enableStartStopControlData.enableStartStopControl = o.collection == kContinuous ? 1 : 0;
  attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER)
      .attributeData.samplingDataBufferData.samplingDataBuffer = &c.staging;
  CUpti_PCSamplingConfigurationInfoParams cp;
  std::memset(&cp, 0, sizeof(cp));
  cp.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  cp.ctx = c.ctx;
  cp.numAttributes = c.config.size();
  cp.pPCSamplingConfigurationInfo = c.config.data();
  r = a.cuptiPCSamplingSetConfigurationAttribute(&cp);
  if (r != CUPTI_SUCCESS) {
    std::string which = "cuptiPCSamplingSetConfigurationAttribute";
    for (const auto& info : c.config)
      if (info.attributeStatus != CUPTI_SUCCESS) {
        which = std::string("configuring ") + attribute_name(info.attributeType);
        break;
      }
    disable();
    free_buffers(c);
    return fail(r, &c, which, text(r));
  }
  if (o.collection == kContinuous) {
    CUpti_PCSamplingStartParams s;
    std::memset(&s, 0, sizeof(s));
    s.size = CUpti_PCSamplingStartParamsSize;
    s.ctx = c.ctx;
    r = a.cuptiPCSamplingStart(&s);
    if (r != CUPTI_SUCCESS) {
      disable();
      free_buffers(c);
      return fail(r, &c, "cuptiPCSamplingStart", text(r));
    }
    c.started = true;
  }
  {
    std::lock_guard<std::mutex> g(st.diag_mu);
    if (st.first_stall_names.empty()) st.first_stall_names = c.stall_names;
  }
  return StartError{};
}

bool stop_range(Ctx& c) {
  if (!c.started) return true;
  CUpti_PCSamplingStopParams s;
  std::memset(&s, 0, sizeof(s));
  s.size = CUpti_PCSamplingStopParamsSize;
  s.ctx = c.ctx;
  CurrentContext current(c.ctx);
  CUptiResult r = pcs_api().cuptiPCSamplingStop(&s);
  if (r != CUPTI_SUCCESS) {
    note_error("cuptiPCSamplingStop failed: " + text(r));
    return false;
  }
  c.started = false;
  return true;
}

bool start_range(Ctx& c) {
  CUpti_PCSamplingStartParams s;
  std::memset(&s, 0, sizeof(s));
  s.size = CUpti_PCSamplingStartParamsSize;
  s.ctx = c.ctx;
  CurrentContext current(c.ctx);
  CUptiResult r = pcs_api().cuptiPCSamplingStart(&s);
  if (r != CUPTI_SUCCESS) {
    note_error("cuptiPCSamplingStart failed: " + text(r));
    return false;
  }
  c.started = true;
  return true;
}

// Stops, drains and disables one context, for good (c.m held).
void disable_ctx(Ctx& c) {
  if (c.dead) return;
  stop_range(c);
  drain_ctx(c);
  CUpti_PCSamplingDisableParams d;
  std::memset(&d, 0, sizeof(d));
  d.size = CUpti_PCSamplingDisableParamsSize;
  d.ctx = c.ctx;
  {
    CurrentContext current(c.ctx);
    pcs_api().cuptiPCSamplingDisable(&d);
  }
  ingest_buffer(c, c.staging);  // disabling leaves the last records in the configured buffer
  c.dead = true;
  free_buffers(c);
}

Ctx* find_ctx_locked(CUcontext ctx) {
  for (Ctx* c : st.ctxs)
    if (c->ctx == ctx && !c->dead) return c;
  return nullptr;
}

// The context's state, enabling sampling on it the first time it is seen.  A
// context whose enabling failed is tried again only with `retry` (start does).
Ctx* ensure_ctx(CUcontext ctx, StartError* error, bool retry) {
  {
    std::lock_guard<std::mutex> g(st.ctx_mu);
    if (Ctx* c = find_ctx_locked(ctx)) return c;
    if (!retry && st.failed.count(ctx)) return nullptr;
  }
  std::lock_guard<std::mutex> e(st.enable_mu);
  {
    std::lock_guard<std::mutex> g(st.ctx_mu);
    if (Ctx* c = find_ctx_locked(ctx)) return c;
  }
  auto owned = std::make_unique<Ctx>();
  owned->ctx = ctx;
  StartError err;
  {
    std::lock_guard<std::mutex> l(owned->m);
    err = enable_ctx(*owned);
  }
  if (err.code != 0) {
    {
      std::lock_guard<std::mutex> g(st.diag_mu);
      st.enable_failures += 1;
      st.last_error = err.what + " failed on device " + std::to_string(err.device) + ": " + err.detail;
    }
    if (error) *error = err;
    std::lock_guard<std::mutex> g(st.ctx_mu);
    st.failed.insert(ctx);
    return nullptr;
  }
  std::lock_guard<std::mutex> g(st.ctx_mu);
  st.failed.erase(ctx);
  Ctx* c = owned.get();
  st.owned.push_back(std::move(owned));
  st.ctxs.push_back(c);
  return c;
}

std::vector<Ctx*> snapshot() {
  std::lock_guard<std::mutex> g(st.ctx_mu);
  return st.ctxs;
}

void collect_locked(bool complete) {  // collect_mu held
  for (Ctx* c : snapshot()) {
    std::lock_guard<std::mutex> l(c->m);
    if (c->dead) continue;
    bool restart = complete ? st.options.restart : st.options.restart_each_drain;
    if (restart && st.options.collection == kContinuous && c->started) {
      // Ending the range makes CUPTI hand over everything it sampled so far,
      // decoded or not: the flush then holds every sample of every earlier launch.
      bool stopped = stop_range(*c);
      drain_ctx(*c);
      if (stopped) {
        start_range(*c);
        std::lock_guard<std::mutex> g(st.diag_mu);
        st.restarts += 1;
      }
    } else {
      drain_ctx(*c);
    }
  }
  store().attribute(lines(), correlate_fn(), complete);
}

void drain_loop() {
  std::unique_lock<std::mutex> lock(st.drain_mu);
  while (!st.drain_stop) {
    st.drain_cv.wait_for(lock, std::chrono::milliseconds(st.options.drain_ms));
    if (st.drain_stop) break;
    lock.unlock();
    if (sampling_on()) {
      std::lock_guard<std::mutex> g(st.collect_mu);
      collect_locked(false);
    }
    lock.lock();
  }
}

const CUpti_CallbackId kResourceCbids[] = {
    CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
    CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_MODULE_LOADED,
};

void set_resource_callbacks(CUpti_SubscriberHandle subscriber, bool on) {
  Api& a = pcs_api();
  if (subscriber == nullptr || a.cuptiEnableCallback == nullptr) return;
  for (CUpti_CallbackId cbid : kResourceCbids)
    a.cuptiEnableCallback(on ? 1 : 0, subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid);
}

// Disables every context, newest first (collect_mu held).
void disable_all() {
  std::vector<Ctx*> ctxs = snapshot();
  for (auto it = ctxs.rbegin(); it != ctxs.rend(); ++it) {
    std::lock_guard<std::mutex> l((*it)->m);
    disable_ctx(**it);
  }
  std::lock_guard<std::mutex> g(st.ctx_mu);
  st.ctxs.clear();  // the structs stay in st.owned: a callback may still hold one
  st.failed.clear();
}

}  // namespace

StartError start(const Options& options, const Host& host) {
  Api& a = pcs_api();
  if (!a.resolved) return fail(-2, nullptr, "loading the PC Sampling API", "libcupti is not loaded");
  if (!a.missing.empty()) return fail(-2, nullptr, "loading the PC Sampling API", a.missing);
  uint32_t version = cupti_version();
  // CUPTI 12.4 (API version 22) added correlationId to CUpti_PCSamplingPCData, which this build's
  // records have: an older libcupti would write records of another size.
  if (version != 0 && version < 22)
    return fail(-1, nullptr, "checking the libcupti version", std::to_string(version));
  if (g_on.load()) return fail(CUPTI_ERROR_INVALID_OPERATION, nullptr, "starting", "already sampling");
  if (options.period < 5 || options.period > 31)
    return fail(CUPTI_ERROR_INVALID_PARAMETER, nullptr, "configuring the sampling period",
                "interval " + std::to_string(options.period) + " is outside 5..31");
  std::lock_guard<std::mutex> g(st.collect_mu);
  st.options = options;
  st.host = host;
  st.generation.fetch_add(1);
  {
    std::lock_guard<std::mutex> d(st.diag_mu);
    st.enable_failures = st.get_errors = st.hardware_full = st.restarts = st.drains = st.staging_reads = 0;
    st.last_error.clear();
    st.first_stall_names.clear();
  }
  store().reset(options.collection);
  st.kernels_serial = false;
  auto unwind = [&](StartError e) {
    g_on.store(false);
    disable_all();
    set_resource_callbacks(host.subscriber, false);
    st.callbacks_on = false;
    if (st.kernels_serial && host.use_serial_kernels) host.use_serial_kernels(false);
    st.kernels_serial = false;
    store().reset(kOff);
    st.generation.fetch_add(1);
    return e;
  };
  if (options.kernels == kKernelsSerial) {
    if (!host.use_serial_kernels || !host.use_serial_kernels(true))
      return unwind(fail(CUPTI_ERROR_UNKNOWN, nullptr, "enabling serial kernel activity", "refused"));
    st.kernels_serial = true;
  }
  set_resource_callbacks(host.subscriber, true);
  st.callbacks_on = true;
  g_on.store(true);  // from here contexts created or first launched elsewhere are enabled by the callbacks

  std::vector<CUcontext> contexts = live_contexts();
  int probe_device = -1;
  if (contexts.empty() && device_count() > 0) {
    // No context yet: try device 0's primary context now, so that a refusal
    // (privileges, unsupported GPU) is this start's error and not a later
    // launch's silence.  Released again right away (the program creates its own).
    CUcontext primary = retain_primary(0);
    if (primary != nullptr) {
      contexts.push_back(primary);
      probe_device = 0;
    }
  }
  StartError error;
  for (CUcontext ctx : contexts) {
    StartError e;
    if (ensure_ctx(ctx, &e, true) != nullptr) continue;
    bool incompatible = e.code == CUPTI_ERROR_NOT_COMPATIBLE || e.code == CUPTI_ERROR_INVALID_OPERATION;
    if (options.kernels == kKernelsAuto && incompatible && !st.kernels_serial && host.use_serial_kernels &&
        host.use_serial_kernels(true)) {
      st.kernels_serial = true;  // CUPTI refused sampling next to concurrent kernel activity: serial records
      if (ensure_ctx(ctx, &e, true) != nullptr) continue;
    }
    error = e;
    break;
  }
  if (probe_device >= 0) {
    // Leave the probe context's sampling to the context callbacks: if releasing
    // it destroys the context, DESTROY_STARTING disables it; if the program
    // holds it, sampling stays on.
    release_primary(probe_device);
  }
  if (error.code != 0) return unwind(error);
  {
    std::lock_guard<std::mutex> d(st.drain_mu);
    st.drain_stop = false;
  }
  st.drainer = std::thread(drain_loop);
  return StartError{};
}

void stop(CUpti_SubscriberHandle subscriber) {
  if (!g_on.exchange(false)) return;
  {
    std::lock_guard<std::mutex> d(st.drain_mu);
    st.drain_stop = true;
  }
  st.drain_cv.notify_all();
  if (st.drainer.joinable()) st.drainer.join();
  std::lock_guard<std::mutex> g(st.collect_mu);
  disable_all();
  store().attribute(lines(), correlate_fn(), true);
  if (st.callbacks_on) set_resource_callbacks(subscriber, false);
  st.callbacks_on = false;
  st.generation.fetch_add(1);
  // The kernel activity kind goes back to CONCURRENT_KERNEL at the next attach.
  st.kernels_serial = false;
  store().reset(kOff);
}

void collect(bool complete, uint32_t epoch_at_start) {
  if (!sampling_on()) return;
  std::lock_guard<std::mutex> g(st.collect_mu);
  collect_locked(complete);
  if (complete) store().retire_below(epoch_at_start);
}

bool register_cubin(const void* data, size_t size) {
  if (!cubin_has_line_info(data, size)) return false;
  Api& a = pcs_api();
  if (a.cuptiGetCubinCrc == nullptr) return false;
  CUpti_GetCubinCrcParams p;
  std::memset(&p, 0, sizeof(p));
  p.size = CUpti_GetCubinCrcParamsSize;
  p.cubin = data;
  p.cubinSize = size;
  if (a.cuptiGetCubinCrc(&p) != CUPTI_SUCCESS) return false;
  return lines().add_cubin(p.cubinCrc, data, size);
}

void release_function_names() {
  std::lock_guard<std::mutex> g(st.names_mu);
  for (char* p : st.function_names) std::free(p);
  st.function_names.clear();
}

bool kernels_serial() { return st.kernels_serial; }

Correlate correlate_function() { return correlate_fn(); }

void on_launch_enter(CUcontext ctx) {
  uint64_t gen = st.generation.load(std::memory_order_relaxed);
  if (tls_generation == gen && tls_ctx == ctx) return;  // a context this thread saw (enabled, or refused)
  tls_state = ensure_ctx(ctx, nullptr, false);
  tls_generation = gen;
  tls_ctx = ctx;
}

void on_launch_exit(CUcontext ctx) {
  if (st.options.collection != kSerialized) return;
  // Serialized collection: each kernel is a range of its own; hand its samples
  // over now, while they still carry that kernel alone (the next launch's
  // callback finds the previous kernel finished: CUPTI serializes them).
  uint64_t gen = st.generation.load(std::memory_order_relaxed);
  Ctx* c = (tls_generation == gen && tls_ctx == ctx) ? tls_state : nullptr;
  if (c == nullptr) return;
  std::unique_lock<std::mutex> l(c->m, std::try_to_lock);
  if (!l.owns_lock()) return;  // the drain thread is at it
  drain_ctx(*c);
}

void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  if (data == nullptr) return;
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    ensure_ctx(data->context, nullptr, false);
  } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    Ctx* c = nullptr;
    {
      std::lock_guard<std::mutex> g(st.ctx_mu);
      c = find_ctx_locked(data->context);
    }
    if (c == nullptr) return;
    {
      std::lock_guard<std::mutex> l(c->m);
      disable_ctx(*c);
    }
    std::lock_guard<std::mutex> g(st.ctx_mu);
    st.ctxs.erase(std::remove(st.ctxs.begin(), st.ctxs.end(), c), st.ctxs.end());
    st.generation.fetch_add(1);  // threads' cached pointers to it go stale
  } else if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    auto* module = static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor);
    if (module != nullptr && module->pCubin != nullptr && module->cubinSize > 0)
      register_cubin(module->pCubin, module->cubinSize);  // copied: the data lives only during the callback
    // A load after an unload ends CUPTI's range: what it sampled before is
    // now in the configured buffer and must be taken before the next range.
    Ctx* c = nullptr;
    {
      std::lock_guard<std::mutex> g(st.ctx_mu);
      c = find_ctx_locked(data->context);
    }
    if (c != nullptr) {
      std::lock_guard<std::mutex> l(c->m);
      drain_ctx(*c);
    }
  }
}

SamplerStats sampler_stats() {
  SamplerStats s;
  s.on = sampling_on();
  s.kernels_serial = st.kernels_serial;
  s.collection = st.options.collection;
  s.period = st.options.period;
  {
    std::lock_guard<std::mutex> g(st.ctx_mu);
    s.contexts = st.ctxs.size();
  }
  {
    std::lock_guard<std::mutex> g(st.names_mu);
    s.function_names = st.function_names.size();
  }
  std::lock_guard<std::mutex> g(st.diag_mu);
  s.enable_failures = st.enable_failures;
  s.get_errors = st.get_errors;
  s.hardware_full = st.hardware_full;
  s.restarts = st.restarts;
  s.drains = st.drains;
  s.staging_reads = st.staging_reads;
  s.last_error = st.last_error;
  s.stall_reasons = st.first_stall_names;
  return s;
}

}  // namespace pcs
}  // namespace proton_cupti
