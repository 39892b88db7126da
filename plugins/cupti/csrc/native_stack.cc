// Native call stacks at launch (see native_stack.h).
#include "native_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <sys/auxv.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "elf_symbols.h"

namespace proton_cupti {
namespace native_stack {

namespace {

// The launch machinery's libraries, by the start of their file name.
const char* const kDriverLibraries[] = {"libcuda.so", "libcudart.so", "libcupti.so"};

std::mutex extra_mu;
std::vector<std::string> extra_excluded;

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The load address of this extension: its frames (the launch callback, the recorder) are never the user's.
void* own_base() {
  static void* base = [] {
    Dl_info info;
    return dladdr(reinterpret_cast<void*>(&own_base), &info) ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool starts_with(const char* s, const std::string& prefix) { return std::strncmp(s, prefix.c_str(), prefix.size()) == 0; }

#ifdef PROTON_CUPTI_TESTING
// testing.cc's stand-ins for a user's code live in this extension but in their own section, which the
// linker brackets with these symbols: their frames count as the user's.
extern "C" char __start_proton_test_user[] __attribute__((weak));
extern "C" char __stop_proton_test_user[] __attribute__((weak));
bool in_test_user_code(uintptr_t pc) {
  return __start_proton_test_user != nullptr && pc >= reinterpret_cast<uintptr_t>(__start_proton_test_user) &&
         pc < reinterpret_cast<uintptr_t>(__stop_proton_test_user);
}
#endif

// The CUDA runtime linked into the program (nvcc links libcudart_static by default) and the launch stubs
// nvcc writes: no library tells them from the user's code, their names do.  Runtime API functions are
// cuda<Capital>... (cudaLaunchKernel, its inline template wrappers too), its internals __cudart... and
// libcudart_static_<hash>...
bool runtime_function(const std::string& mangled, const std::string& name) {
  if (mangled.compare(0, 8, "__cudart") == 0 || mangled.compare(0, 15, "__device_stub__") == 0 ||
      name.compare(0, 15, "__device_stub__") == 0 || mangled.compare(0, 17, "libcudart_static_") == 0)
    return true;  // libcudart_static_<hash>: the static runtime's local functions, seen on an H200 (CUDA 13)
  return name.size() > 4 && name.compare(0, 4, "cuda") == 0 && name[4] >= 'A' && name[4] <= 'Z';
}

// A name as valid UTF-8 (Python makes a str of it at flush; a file name need not be): where it is not,
// each byte outside ASCII becomes '?'.
std::string valid_utf8(std::string s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (!ok) {
      for (char& ch : s)
        if (static_cast<unsigned char>(ch) >= 0x80) ch = '?';
      return s;
    }
    i += len;
  }
  return s;
}

}  // namespace

namespace {

using BacktraceFn = int (*)(void**, int);
std::atomic<BacktraceFn> libunwind_fn{nullptr};
std::once_flag libunwind_once;

BacktraceFn load_libunwind() {
  std::call_once(libunwind_once, [] {
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);  // local: its _Unwind_* stay out of the program's way
    if (h == nullptr) return;
    auto fn = reinterpret_cast<BacktraceFn>(dlsym(h, "unw_backtrace"));
    if (fn == nullptr) fn = reinterpret_cast<BacktraceFn>(dlsym(h, "_ULx86_64_backtrace"));
    libunwind_fn.store(fn, std::memory_order_release);
  });
  return libunwind_fn.load(std::memory_order_acquire);
}

std::atomic<BacktraceFn> chosen{nullptr};  // null: glibc's backtrace()

}  // namespace

int glibc_backtrace(uintptr_t* out, int max) {
  // backtrace() fills void*; uintptr_t has the same size and representation.
  static_assert(sizeof(void*) == sizeof(uintptr_t), "return addresses are pointers");
  return backtrace(reinterpret_cast<void**>(out), max);
}

int libunwind_backtrace(uintptr_t* out, int max) {
  BacktraceFn fn = load_libunwind();
  return fn ? fn(reinterpret_cast<void**>(out), max) : -1;
}

#ifdef PROTON_CUPTI_TESTING
std::atomic<int> test_libunwind_cap{0};
void test_cap_libunwind(int frames) { test_libunwind_cap.store(frames); }
#endif

int capture(uintptr_t* out, int max) {
  BacktraceFn fn = chosen.load(std::memory_order_relaxed);
  if (fn == nullptr) return backtrace(reinterpret_cast<void**>(out), max);
#ifdef PROTON_CUPTI_TESTING
  int cap = test_libunwind_cap.load(std::memory_order_relaxed);
  if (cap > 0) return fn(reinterpret_cast<void**>(out), std::min(cap, max));  // as if it stopped there
#endif
  return fn(reinterpret_cast<void**>(out), max);
}

void warm_up() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* want = std::getenv("PROTON_NATIVE_UNWINDER");
    if (want == nullptr || std::strcmp(want, "backtrace") != 0) chosen.store(load_libunwind(), std::memory_order_relaxed);
  });
  uintptr_t frames[8];
  capture(frames, 8);
  own_base();
}

bool using_libunwind() { return chosen.load(std::memory_order_relaxed) != nullptr; }
const char* unwinder() { return using_libunwind() ? "libunwind" : "backtrace"; }

unsigned classify(uintptr_t ret) {
  Dl_info info;
  // ret - 1: inside the call instruction, so a call that ends its function still maps to that function.
  if (!dladdr(reinterpret_cast<void*>(ret - 1), &info) || info.dli_fname == nullptr) return 0;
  const char* name = base_name(info.dli_fname);
  unsigned mask = 0;
  // _start is where the program was entered (AT_ENTRY), exported or not; it is a few instructions long.
  static const uintptr_t entry = getauxval(AT_ENTRY);
  if (std::strncmp(name, "libc.so", 7) == 0 || (entry != 0 && ret - 1 >= entry && ret - 1 < entry + 64) ||
      (info.dli_sname != nullptr && std::strcmp(info.dli_sname, "_start") == 0))
    mask |= kStart;
#ifdef PROTON_CUPTI_TESTING
  if (in_test_user_code(ret - 1)) return mask;
#endif
  if (info.dli_fbase != nullptr && info.dli_fbase == own_base()) return mask | kMachinery;
  for (const char* lib : kDriverLibraries)
    if (std::strncmp(name, lib, std::strlen(lib)) == 0) return mask | kMachinery;
  std::lock_guard<std::mutex> g(extra_mu);
  for (const auto& prefix : extra_excluded)
    if (starts_with(name, prefix)) return mask | kMachinery;
  return mask;
}

void set_extra_excluded(std::vector<std::string> prefixes) {
  std::lock_guard<std::mutex> g(extra_mu);
  extra_excluded = std::move(prefixes);
}

std::string symbolize(uintptr_t ret) {
  Dl_info info;
  std::memset(&info, 0, sizeof(info));
  link_map* object = nullptr;
  char offset[32];
  uintptr_t pc = ret - 1;  // inside the call instruction: a call that ends its function maps to that function
  if (!dladdr1(reinterpret_cast<void*>(pc), &info, reinterpret_cast<void**>(&object), RTLD_DL_LINKMAP) ||
      info.dli_fname == nullptr) {
    std::snprintf(offset, sizeof(offset), "0x%llx", static_cast<unsigned long long>(ret));
    return std::string("?+") + offset;  // no loaded object holds it (JIT code)
  }
  std::string library = base_name(info.dli_fname);
  bool program = object != nullptr && (object->l_name == nullptr || object->l_name[0] == '\0');
  if (library.empty()) library = program ? "<program>" : "?";
  std::string function;
  if (info.dli_sname != nullptr && info.dli_sname[0] != '\0') {
    function = info.dli_sname;
  } else if (object != nullptr) {  // not exported: the file's full symbol table, where it kept one
    function = elf_symbols::function_at(program ? "/proc/self/exe" : object->l_name, pc - object->l_addr);
  }
  if (!function.empty()) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(function.c_str(), nullptr, nullptr, &status);
    std::string name = status == 0 && demangled != nullptr ? demangled : function;
    std::free(demangled);
    if (runtime_function(function, name)) return "";
    return valid_utf8(name + " (" + library + ")");
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  std::snprintf(offset, sizeof(offset), "0x%llx", static_cast<unsigned long long>(ret - base));
  return valid_utf8(library + "+" + offset);
}

}  // namespace native_stack
}  // namespace proton_cupti
