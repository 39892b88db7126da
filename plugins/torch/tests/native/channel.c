/* A stand-in for a backend's native context setter (capsule "proton.native_context.v1"), for CPU tests:
 * the synthetic backend keeps its per-thread context here, so the core's scopes (Python) and the
 * operator callbacks (native) read and write one value per thread, as they do with the CUPTI backend. */
#include <stdint.h>

static __thread uint64_t t_ctx;

static void ctx_set(uint64_t ctx) { t_ctx = ctx; }
static uint64_t ctx_get(void) { return t_ctx; }

struct {
  uint32_t version;
  void (*set)(uint64_t);
  uint64_t (*get)(void);
} channel_native_context = {1, ctx_set, ctx_get};

void channel_set(uint64_t ctx) { t_ctx = ctx; }
uint64_t channel_get(void) { return t_ctx; }
