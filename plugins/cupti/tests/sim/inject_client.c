/* A CUDA program without Python, for the injection entry point's CPU tests.
 *
 * It runs against the simulated driver (libcuda_sim.c, linked as libcuda.so.1), whose cuInit loads
 * CUDA_INJECTION64_PATH and calls its InitializeInjection as the real driver does.  It uses NVTX as a
 * library built with NVTX v3's header-only loader would: at its first NVTX call it loads
 * NVTX_INJECTION64_PATH, calls InitializeInjectionNvtx2 with an export table, and from then on pushes and
 * pops ranges through the function table the tool filled (plugins/nvtx/tests/native/nvtx_client.c fakes
 * the same table).
 *
 *   inject_client HOW [FLAG...]
 *
 * plays one workload, then ends as HOW says:
 *   return   main returns 7              exit     exit(3)
 *   sigterm  prints READY, waits to be sent SIGTERM (or SIGINT: sigint)
 *   own-sigterm  the same, with the program's own SIGTERM handler (installed first), which calls exit(5)
 *   exec     execs itself as `inject_client return` (the same process becomes a new program)
 *   thread-exit  a thread calls exit(4) while the main thread waits in pause()
 *   phases   launches "phase_kernel" 10 times a phase, a phase every 20 ms, printing "PHASE n" after each,
 *            until it is killed
 * FLAGs:
 *   nvtx-first  the first NVTX call comes before cuInit (a library's range around the program's start)
 *   on-thread   cuInit and the workload run on a thread of their own, which ends before the program does
 *   fork        after the workload the program forks a child that launches k_child and exits 0, and waits
 *               for it
 *   fork-exec   after the workload the program forks a child that execs `inject_client return`, and waits
 *               for it (status 7)
 *   open-range  after the workload a range "left_open" is pushed, k_open launched in it, and never popped
 *
 * The workload (kernel, device, stream, duration in ns; NVTX ranges as scopes):
 *   outer: k_outer x2 (0, 7, 1000); outer/inner: k_inner x3 (1, 3, 500); top level: k_top (0, 7, 100);
 *   capture: a graph of g_a, g_b captured (0, 7); replay: the graph launched twice (200 each).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* The simulated driver (sim_tool.h and libcuda_sim.c); no CUDA headers needed here. */
extern int cuInit(unsigned flags);
extern uint32_t sim_launch(const char* kernel, uint32_t device, uint32_t stream, uint64_t duration_ns);
extern uint64_t sim_graph_capture(const char* const* kernels, int n, uint32_t device, uint32_t stream);
extern uint64_t sim_graph_instantiate(uint64_t graph);
extern uint32_t sim_graph_launch(uint64_t exec, uint32_t stream, uint64_t duration_ns);
extern int64_t sim_stat(const char* name);

/* ---- NVTX v3's loader, as far as a tool sees it ---- */
typedef void (*fnptr)(void);
enum { CORE_SIZE = 16, CORE2_SIZE = 16 };
static fnptr core[CORE_SIZE], core2[CORE2_SIZE];
static fnptr* core_slots[CORE_SIZE];
static fnptr* core2_slots[CORE2_SIZE];
static int nvtx_ready;

static int get_module_table(int module, fnptr*** out, unsigned* size) {
  if (module == 1) {
    *out = core_slots;
    *size = CORE_SIZE;
    return 1;
  }
  if (module == 5) {
    *out = core2_slots;
    *size = CORE2_SIZE;
    return 1;
  }
  return 0;
}
static struct {
  size_t size;
  int (*get)(int, fnptr***, unsigned*);
} callbacks = {sizeof callbacks, get_module_table};
static const void* export_table(uint32_t id) { return id == 1 ? (const void*)&callbacks : NULL; }

static void nvtx_init(void) {
  if (nvtx_ready) return;
  nvtx_ready = 1;
  for (int i = 0; i < CORE_SIZE; ++i) core_slots[i] = &core[i];
  for (int i = 0; i < CORE2_SIZE; ++i) core2_slots[i] = &core2[i];
  const char* path = getenv("NVTX_INJECTION64_PATH");
  if (path == NULL || !*path) return;
  void* h = dlopen(path, RTLD_LAZY);
  if (h == NULL) {
    fprintf(stderr, "inject_client: cannot load NVTX_INJECTION64_PATH: %s\n", dlerror());
    return;
  }
  int (*init)(const void* (*)(uint32_t)) = (int (*)(const void* (*)(uint32_t)))dlsym(h, "InitializeInjectionNvtx2");
  if (init == NULL || init(export_table) == 0) fprintf(stderr, "inject_client: NVTX injection refused\n");
}

static void push(const char* name) {
  nvtx_init();
  if (core[9]) ((int (*)(const char*))core[9])(name);
}
static void pop(void) {
  if (core[11]) ((int (*)(void))core[11])();
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void on_own_sigterm(int sig) {
  (void)sig;
  exit(5);
}

static void* workload(void* arg) {
  (void)arg;
  cuInit(0); /* the driver loads the injection library here */
  push("outer");
  sim_launch("k_outer", 0, 7, 1000);
  sim_launch("k_outer", 0, 7, 1000);
  push("inner");
  for (int i = 0; i < 3; ++i) sim_launch("k_inner", 1, 3, 500);
  pop();
  pop();
  sim_launch("k_top", 0, 7, 100);
  push("capture");
  const char* nodes[] = {"g_a", "g_b"};
  uint64_t exec = sim_graph_instantiate(sim_graph_capture(nodes, 2, 0, 7));
  pop();
  push("replay");
  sim_graph_launch(exec, 7, 200);
  sim_graph_launch(exec, 7, 200);
  pop();
  printf("injection %lld\n", (long long)sim_stat("injection"));
  fflush(stdout);
  return NULL;
}

static void* exit_from_thread(void* arg) {
  (void)arg;
  sleep_ms(50);
  exit(4);
}

static int has_flag(int argc, char** argv, const char* flag) {
  for (int i = 2; i < argc; ++i)
    if (strcmp(argv[i], flag) == 0) return 1;
  return 0;
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "return";
  if (strcmp(how, "own-sigterm") == 0) signal(SIGTERM, on_own_sigterm);
  if (has_flag(argc, argv, "nvtx-first")) nvtx_init();
  if (has_flag(argc, argv, "on-thread")) {
    pthread_t t;
    if (pthread_create(&t, NULL, workload, NULL) != 0 || pthread_join(t, NULL) != 0) return 90;
  } else {
    workload(NULL);
  }
  if (has_flag(argc, argv, "fork")) {
    pid_t pid = fork();
    if (pid == 0) {
      sim_launch("k_child", 0, 7, 10);
      exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 91;
  }
  if (has_flag(argc, argv, "fork-exec")) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "return", (char*)NULL);
      _exit(92);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 7) return 93;
  }

  if (has_flag(argc, argv, "open-range")) {
    push("left_open");
    sim_launch("k_open", 0, 7, 10);
  }

  if (strcmp(how, "exit") == 0) exit(3);
  if (strcmp(how, "thread-exit") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, exit_from_thread, NULL) != 0) return 94;
    for (;;) pause();
  }
  if (strcmp(how, "exec") == 0) {
    execl("/proc/self/exe", argv[0], "return", (char*)NULL);
    return 92;
  }
  if (strcmp(how, "sigterm") == 0 || strcmp(how, "sigint") == 0 || strcmp(how, "own-sigterm") == 0) {
    printf("READY\n");
    fflush(stdout);
    for (;;) pause();
  }
  if (strcmp(how, "phases") == 0) {
    for (int phase = 1;; ++phase) {
      for (int i = 0; i < 10; ++i) sim_launch("phase_kernel", 0, 7, 10);
      printf("PHASE %d\n", phase);
      fflush(stdout);
      sleep_ms(20);
    }
  }
  return 7;
}
