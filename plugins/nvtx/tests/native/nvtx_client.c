/* A stand-in for a native library that uses NVTX (NCCL, cuDNN, user C++), for CPU tests.
 *
 * It does what NVTX v3's header-only loader does on a library's first NVTX call:
 * dlopen NVTX_INJECTION64_PATH, call its InitializeInjectionNvtx2 with an export
 * table, and from then on call through the function table the tool filled.
 * Ranges can be pushed from a pthread that never holds the GIL.  A native
 * context setter (the capsule struct backends offer) records what it is told.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

typedef void (*fnptr)(void);
enum { CORE_SIZE = 16, CORE2_SIZE = 16 };
static fnptr core[CORE_SIZE], core2[CORE2_SIZE];
static fnptr* core_slots[CORE_SIZE];
static fnptr* core2_slots[CORE2_SIZE];

static int get_module_table(int module, fnptr*** out, unsigned* size) {
  if (module == 1) { *out = core_slots; *size = CORE_SIZE; return 1; }
  if (module == 5) { *out = core2_slots; *size = CORE2_SIZE; return 1; }
  return 0;
}
static struct { size_t size; int (*get)(int, fnptr***, unsigned*); } callbacks = {sizeof callbacks, get_module_table};
static const void* export_table(uint32_t id) { return id == 1 ? (const void*)&callbacks : NULL; }

int client_init(void) {
  for (int i = 0; i < CORE_SIZE; ++i) core_slots[i] = &core[i];
  for (int i = 0; i < CORE2_SIZE; ++i) core2_slots[i] = &core2[i];
  const char* path = getenv("NVTX_INJECTION64_PATH");
  if (!path) return 0;
  void* h = dlopen(path, RTLD_LAZY);
  if (!h) return -1;
  int (*init)(const void* (*)(uint32_t)) = (int (*)(const void* (*)(uint32_t)))dlsym(h, "InitializeInjectionNvtx2");
  return init ? init(export_table) : -2;
}

/* nvtxEventAttributes_v2 with an ASCII message */
typedef struct { uint16_t version, size; uint32_t category; int32_t ct; uint32_t color; int32_t pt, r0;
                 uint64_t payload; int32_t message_type; const void* message; } attrs_t;

int client_push(const char* s) { return core[9] ? ((int (*)(const char*))core[9])(s) : -9; }
int client_push_w(const wchar_t* s) { return core[10] ? ((int (*)(const wchar_t*))core[10])(s) : -9; }
int client_pop(void) { return core[11] ? ((int (*)(void))core[11])() : -9; }
void* client_domain(const char* name) { return core2[12] ? ((void* (*)(const char*))core2[12])(name) : NULL; }
int client_domain_push(void* d, const char* s) {
  attrs_t a = {2, sizeof(attrs_t), 0, 0, 0, 0, 0, 0, 1, s};
  return core2[4] ? ((int (*)(void*, const attrs_t*))core2[4])(d, &a) : -9;
}
int client_domain_pop(void* d) { return core2[5] ? ((int (*)(void*))core2[5])(d) : -9; }
uint64_t client_start(const char* s) { return core[5] ? ((uint64_t (*)(const char*))core[5])(s) : 0; }
void client_end(uint64_t id) { if (core[7]) ((void (*)(uint64_t))core[7])(id); }
void client_mark(const char* s) { if (core[2]) ((void (*)(const char*))core[2])(s); }

/* The native context setter a backend would offer: remembers the context per thread. */
static __thread uint64_t thread_ctx;
static uint64_t innermost_seen;
static void ctx_set(uint64_t c) { thread_ctx = c; }
static uint64_t ctx_get(void) { return thread_ctx; }
struct { uint32_t version; void (*set)(uint64_t); uint64_t (*get)(void); } client_native_context = {1, ctx_set, ctx_get};
uint64_t client_innermost_seen(void) { return innermost_seen; }

struct job { const char** names; int depth, iterations, extra_pops; uint64_t start_ctx; };
static void* run(void* p) {
  struct job* j = (struct job*)p;
  thread_ctx = j->start_ctx;
  for (int it = 0; it < j->iterations; ++it) {
    for (int d = 0; d < j->depth; ++d) client_push(j->names[d]);
    innermost_seen = thread_ctx; /* what a kernel launched here would be tagged with */
    for (int d = 0; d < j->depth; ++d) client_pop();
  }
  for (int k = 0; k < j->extra_pops; ++k) client_pop();
  return NULL;
}

/* Push `depth` nested ranges `iterations` times on a new pthread (no GIL), then `extra_pops` pops. */
int client_run_thread(const char** names, int depth, int iterations, int extra_pops, uint64_t start_ctx) {
  struct job j = {names, depth, iterations, extra_pops, start_ctx};
  pthread_t t;
  if (pthread_create(&t, NULL, run, &j) != 0) return -1;
  pthread_join(t, NULL);
  return 0;
}

/* n push+pop pairs on the calling thread; returns the nanoseconds they took (benchmarks). */
#include <time.h>
uint64_t client_loop(const char* name, int n) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; ++i) {
    client_push(name);
    client_pop();
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  return (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)(b.tv_nsec - a.tv_nsec);
}
