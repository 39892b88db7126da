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
// function that called capture), at most `max`.  Unwinds with the CFI tables, not
// frame pointers: libcuda and libcupti keep none (decision 0316).  libunwind's
// unw_backtrace where libunwind.so.8 can be loaded (some 10 ns a frame, cached per
// address), else glibc's backtrace() (some 300 ns a frame).
int capture(uintptr_t* out, int max);

// Picks the unwinder (PROTON_NATIVE_UNWINDER=backtrace: glibc's, never libunwind) and
// runs it once: the first unwind loads libraries and allocates, which no launch
// should pay for.  Call before native stacks are switched on; cheap after the first.
void warm_up();

// The unwinder capture uses: "libunwind" or "backtrace" (after warm_up).
const char* unwinder();
bool using_libunwind();

#ifdef PROTON_CUPTI_TESTING
// libunwind gives at most `frames` frames from now on (0: all), as where it cannot step over a frame.
void test_cap_libunwind(int frames);
#endif

// Each unwinder alone, for the cost comparison (-1: libunwind cannot be loaded).
int glibc_backtrace(uintptr_t* out, int max);
int libunwind_backtrace(uintptr_t* out, int max);

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
// symbol table, or else the file's full one (.symtab), names the function (C++
// names demangled), else "library+0xoffset" (the return address less the
// library's load address, as addr2line takes it for a shared library or PIE).
// "" for the CUDA runtime's functions linked into a program (cuda<Capital>...,
// __cudart..., nvcc's __device_stub__...): frames to leave out of paths.
std::string symbolize(uintptr_t ret);

}  // namespace native_stack
}  // namespace proton_cupti
