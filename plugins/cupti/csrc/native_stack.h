// The calling thread's native call stack at a launch (context="native"): return
// addresses captured on the hot path, classified and symbolized only off it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace proton_cupti {
namespace native_stack {

constexpr int kMaxFrames = 128;

// Return addresses of the calling thread, innermost first (the first is in the
// function that called capture), at most `max`.  glibc's backtrace(): it unwinds
// through libcuda and libcupti, which keep no frame pointers (decision 0316).
int capture(uintptr_t* out, int max);

// Loads the unwinder (glibc's first backtrace() dlopens libgcc_s and allocates)
// so that no launch pays for it; call before native stacks are switched on.
void warm_up();

// What the frame at return address `ret` is to a path (a mask; 0: the user's).  kMachinery: the launch
// machinery (libcuda, libcudart, libcupti, this extension, libraries named by set_extra_excluded), left
// out at the leaf end.  kStart: how the process or thread began (libc's __libc_start_main and
// start_thread, the program's _start), left out at the root end.  Slow (dladdr): callers cache it.
constexpr unsigned kMachinery = 1, kStart = 2;
unsigned classify(uintptr_t ret);

// Further libraries whose frames are launch machinery: file names beginning with
// one of `prefixes` (the tests stand libc in for a driver).  Replaces the last list.
void set_extra_excluded(std::vector<std::string> prefixes);

// How a return address reads in a path: "function (library)" where the dynamic
// symbol table names the function (C++ names demangled), else "library+0xoffset"
// (offset from the library's load address, as addr2line takes it).
std::string symbolize(uintptr_t ret);

}  // namespace native_stack
}  // namespace proton_cupti
