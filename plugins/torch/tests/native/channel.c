/* A stand-in for a backend's native context setter (capsule "proton.native_context.v1"), for CPU tests:
 * the synthetic backend keeps its per-thread context here, so the core's scopes (Python) and the
 * operator callbacks (native) read and write one value per thread, as they do with the CUPTI backend.
 * channel_get() is what a launch reads: like the CUPTI backend, it asks the provider (version 2) when
 * one is set. channel_v1_native_context offers no provider (a backend of the first version). */
#include <stdint.h>

typedef uint64_t (*provider_fn)(uint64_t);

static __thread uint64_t t_ctx;
static provider_fn g_provider;

static void ctx_set(uint64_t ctx) { t_ctx = ctx; }
static uint64_t ctx_get(void) { return t_ctx; }
static void ctx_set_provider(provider_fn provider) { __atomic_store_n(&g_provider, provider, __ATOMIC_RELEASE); }

struct {
  uint32_t version;
  void (*set)(uint64_t);
  uint64_t (*get)(void);
  void (*set_provider)(provider_fn);
} channel_native_context = {2, ctx_set, ctx_get, ctx_set_provider};

struct {
  uint32_t version;
  void (*set)(uint64_t);
  uint64_t (*get)(void);
} channel_v1_native_context = {1, ctx_set, ctx_get};

void channel_set(uint64_t ctx) { t_ctx = ctx; }
uint64_t channel_get(void) {
  provider_fn provider = __atomic_load_n(&g_provider, __ATOMIC_ACQUIRE);
  return provider ? provider(t_ctx) : t_ctx;
}
int channel_has_provider(void) { return __atomic_load_n(&g_provider, __ATOMIC_ACQUIRE) != 0; }
