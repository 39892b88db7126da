// A CUDA C++ program with no Python in it, for the GPU verification of issue 43 (tests/native/).
//
//   prog [--iters N] [--replays K] [--bench L] [--exit MODE]
//
// It runs, on a non-default stream unless said:
//   N times, under the NVTX range "step":   np_fill, then under "step/math": np_scale, np_add
//   once, on the legacy default stream:     np_top (no range)
//   under "capture": np_graph_a, np_graph_b captured from the stream into a CUDA graph (stream capture),
//   under "replay":  that graph launched K times
//   with --bench L: np_noop launched 1000 times (warm-up), then L times timed (launch loop + one sync)
// prints one JSON line, {"pid", "kernels": {name: executions}, "bench": {"launches", "ns"}}, and ends as
// MODE says: return (status 0, default), exit:N (exit(N)), sigterm / sigint (the signal sent to itself),
// wait (waits to be killed).
//
// Built with -DNATIVE_PROG_LIBRARY it is a shared library instead, exporting np_bench(L): the same timed
// launch loop, for a Python process to call (benchmarks/injection_cost.py).  Kernels are extern "C" so
// CUPTI names them as written here.  NVTX is v3's header-only loader: nothing to link.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "prog: %s failed: %s\n", #call, cudaGetErrorString(e_));                  \
      exit(2);                                                                                   \
    }                                                                                            \
  } while (0)
#define CHECK_LAUNCH(what) CHECK(cudaGetLastError())

extern "C" __global__ void np_fill(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
extern "C" __global__ void np_scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" __global__ void np_add(float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}
extern "C" __global__ void np_top(float* y) { y[threadIdx.x] += 1.0f; }
extern "C" __global__ void np_graph_a(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * y[i] + 1.0f;
}
extern "C" __global__ void np_graph_b(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] -= 1.0f;
}
extern "C" __global__ void np_noop() {}

static const long long kWarm = 1000;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// kWarm launches of np_noop on `s`, then `n` timed: the ns of the n launches and the sync after them.
static long long bench_loop(cudaStream_t s, long long n) {
  for (long long i = 0; i < kWarm; ++i) np_noop<<<1, 1, 0, s>>>();
  CHECK_LAUNCH("np_noop");
  CHECK(cudaStreamSynchronize(s));
  long long t0 = now_ns();
  for (long long i = 0; i < n; ++i) np_noop<<<1, 1, 0, s>>>();
  CHECK(cudaStreamSynchronize(s));
  long long t1 = now_ns();
  CHECK_LAUNCH("np_noop");
  return t1 - t0;
}

#ifdef NATIVE_PROG_LIBRARY
// The timed loop for a Python caller (ctypes releases the GIL around it): ns of n launches + the sync, after
// kWarm untimed ones, on a stream made at the first call.
extern "C" __attribute__((visibility("default"))) long long np_bench(long long n) {
  static cudaStream_t s = nullptr;
  if (s == nullptr) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return bench_loop(s, n);
}
#else
static void usage(void) {
  fprintf(stderr, "usage: prog [--iters N] [--replays K] [--bench L] [--exit return|exit:N|sigterm|sigint|wait]\n");
  exit(64);
}

static long long number(const char* s) {
  char* end = nullptr;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < 0) usage();
  return v;
}

int main(int argc, char** argv) {
  long long iters = 10, replays = 5, bench = 0;
  const char* how = "return";
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) usage();
    if (strcmp(argv[i], "--iters") == 0) iters = number(argv[++i]);
    else if (strcmp(argv[i], "--replays") == 0) replays = number(argv[++i]);
    else if (strcmp(argv[i], "--bench") == 0) bench = number(argv[++i]);
    else if (strcmp(argv[i], "--exit") == 0) how = argv[++i];
    else usage();
  }
  int exit_status = -1;
  if (strncmp(how, "exit:", 5) == 0) exit_status = (int)number(how + 5);
  else if (strcmp(how, "return") && strcmp(how, "sigterm") && strcmp(how, "sigint") && strcmp(how, "wait")) usage();

  const int n = 1 << 16, threads = 256, blocks = (n + threads - 1) / threads;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *x = nullptr, *y = nullptr, *z = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&z, n * sizeof(float)));
  CHECK(cudaMemset(y, 0, n * sizeof(float)));
  CHECK(cudaMemset(z, 0, n * sizeof(float)));

  for (long long i = 0; i < iters; ++i) {
    nvtxRangePushA("step");
    np_fill<<<blocks, threads, 0, s>>>(x, 1.0f, n);
    nvtxRangePushA("math");
    np_scale<<<blocks, threads, 0, s>>>(x, 3.0f, n);
    np_add<<<blocks, threads, 0, s>>>(x, y, n);
    nvtxRangePop();
    nvtxRangePop();
  }
  CHECK_LAUNCH("step kernels");
  np_top<<<1, 32>>>(z);  // the legacy default stream, outside every range
  CHECK_LAUNCH("np_top");

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  nvtxRangePushA("capture");
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  np_graph_a<<<blocks, threads, 0, s>>>(y, n);
  np_graph_b<<<blocks, threads, 0, s>>>(y, n);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  nvtxRangePop();
  nvtxRangePushA("replay");
  for (long long r = 0; r < replays; ++r) CHECK(cudaGraphLaunch(exec, s));
  nvtxRangePop();
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaDeviceSynchronize());

  long long bench_ns = bench > 0 ? bench_loop(s, bench) : 0;
  long long noop = bench > 0 ? bench + kWarm : 0;

  printf("{\"pid\": %d, \"kernels\": {\"np_fill\": %lld, \"np_scale\": %lld, \"np_add\": %lld, \"np_top\": 1, "
         "\"np_graph_a\": %lld, \"np_graph_b\": %lld, \"np_noop\": %lld}, \"bench\": {\"launches\": %lld, \"ns\": %lld}}\n",
         (int)getpid(), iters, iters, iters, replays, replays, noop, bench, bench_ns);
  fflush(stdout);

  if (exit_status >= 0) exit(exit_status);
  if (strcmp(how, "sigterm") == 0 || strcmp(how, "sigint") == 0) {
    kill(getpid(), strcmp(how, "sigterm") == 0 ? SIGTERM : SIGINT);
    for (;;) pause();  // a profiler's handler may write first; the signal then ends the program
  }
  if (strcmp(how, "wait") == 0)
    for (;;) pause();
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
#endif
