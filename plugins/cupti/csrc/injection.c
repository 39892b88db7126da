/* The injection entry points: any CUDA program, Python or not, profiled through
 * CUDA_INJECTION64_PATH (InitializeInjection) and NVTX_INJECTION64_PATH
 * (InitializeInjectionNvtx2).
 *
 * Decision 0300: a program without Python gets the same profiler a Python program
 * has, not a second one.  This library, plain C with no Python at build time,
 * starts the interpreter proton-profile runs on (PROTON_INJECT_PYTHON_LIB, loaded
 * RTLD_GLOBAL so the extension modules resolve against it), and its Python half
 * (proton_cupti.injected) starts the session of PROTON_FOLLOW with the cupti
 * backend.  Launch callbacks stay native: the program's threads never take the GIL.
 * The profile is written at exit(), return from main, SIGTERM, SIGINT and SIGHUP.
 *
 * In a Python process (the interpreter is already running) the process profiles
 * itself through proton-profile's start-up hook: InitializeInjection does
 * nothing, InitializeInjectionNvtx2 hands NVTX to the NVTX plugin's library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The few CPython functions used, found with dlsym: no Python headers, one build for every version. */
struct python_api {
  int (*is_initialized)(void);
  void (*initialize_ex)(int);
  int (*run_string)(const char*, void*); /* PyRun_SimpleStringFlags(code, NULL) */
  void* (*save_thread)(void);
  int (*gil_ensure)(void);
  void (*gil_release)(int);
};

enum boot_state { NOT_BOOTED = 0, BOOTED, IN_PYTHON, FAILED, SKIPPED };

static struct python_api py;
static pthread_mutex_t boot_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile enum boot_state state = NOT_BOOTED;
static pid_t boot_pid;
static volatile sig_atomic_t writing;    /* the exit write is under way */
static volatile sig_atomic_t written;    /* the exit write is done: nothing more to do */
static int signal_pipe[2] = {-1, -1};
#define NSIGNALS 3
static struct sigaction previous[NSIGNALS]; /* as they were before us */
static const int handled[NSIGNALS] = {SIGTERM, SIGINT, SIGHUP};

static void say(const char* fmt, const char* a, const char* b) {
  char line[1024];
  int n = snprintf(line, sizeof line, fmt, a ? a : "", b ? b : "");
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w;
}

static void* python_symbol(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  if (p == NULL) say("proton: %s has no %s; this process runs unprofiled\n", getenv("PROTON_INJECT_PYTHON_LIB"), name);
  return p;
}

static int load_python(void) {
  const char* lib = getenv("PROTON_INJECT_PYTHON_LIB");
  if (lib == NULL || *lib == '\0') {
    say("proton: PROTON_INJECT_PYTHON_LIB is not set: run the program under proton-profile; it runs unprofiled\n",
        NULL, NULL);
    return 0;
  }
  void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    say("proton: cannot load Python (%s): %s; this process runs unprofiled\n", lib, dlerror());
    return 0;
  }
  py.is_initialized = (int (*)(void))python_symbol(h, "Py_IsInitialized");
  py.initialize_ex = (void (*)(int))python_symbol(h, "Py_InitializeEx");
  py.run_string = (int (*)(const char*, void*))python_symbol(h, "PyRun_SimpleStringFlags");
  py.save_thread = (void* (*)(void))python_symbol(h, "PyEval_SaveThread");
  py.gil_ensure = (int (*)(void))python_symbol(h, "PyGILState_Ensure");
  py.gil_release = (void (*)(int))python_symbol(h, "PyGILState_Release");
  return py.is_initialized && py.initialize_ex && py.run_string && py.save_thread && py.gil_ensure &&
         py.gil_release;
}

/* Runs `code` in the interpreter, holding the GIL; 0 when it raised (Python printed the error). */
static int run_python(const char* code) {
  int gil = py.gil_ensure();
  int rc = py.run_string(code, NULL);
  py.gil_release(gil);
  return rc == 0;
}

/* Sets or clears one variable for the interpreter's start only; the program and its children keep theirs. */
struct saved_var {
  const char* name;
  char* value; /* strdup'ed, NULL when unset */
};
static void swap_var(struct saved_var* s, const char* name, const char* value) {
  const char* old = getenv(name);
  s->name = name;
  s->value = old ? strdup(old) : NULL;
  if (value && *value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}
static void restore_var(struct saved_var* s) {
  if (s->value) {
    setenv(s->name, s->value, 1);
    free(s->value);
  } else {
    unsetenv(s->name);
  }
}

/* Writes the profile once, from the process that booted: `code` is the Python half's call (at_exit, before_exec). */
static void write_once(const char* code) {
  if (state != BOOTED || written || getpid() != boot_pid) return;
  writing = 1;
  run_python(code);
  written = 1;
}

static void write_profile(void) {
  write_once("import proton_cupti.injected as _proton_injected\n_proton_injected.at_exit()\n");
}

static void at_exit(void) {
  if (state == BOOTED && getpid() != boot_pid) {
    char pid[32], parent[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(parent, sizeof parent, "%d", (int)boot_pid);
    say("proton: process %s, forked by the profiled process %s without exec, is not profiled\n", pid, parent);
    return;
  }
  write_profile();
}

static void on_signal(int sig) {
  if (writing) { /* a second Ctrl-C while the profile is written: the default action now */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  unsigned char b = (unsigned char)sig;
  ssize_t w = write(signal_pipe[1], &b, 1);
  (void)w;
}

/* Writes the profile for a signal outside the handler (which may not take locks), then lets the signal
 * do what it did before us: the program dies of it, with its exit status. */
static void* signal_watcher(void* arg) {
  (void)arg;
  for (;;) {
    unsigned char b = 0;
    ssize_t n = read(signal_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NULL;
    int sig = b;
    write_profile();
    for (int i = 0; i < NSIGNALS; ++i)
      if (handled[i] == sig) sigaction(sig, &previous[i], NULL);
    kill(getpid(), sig);
    return NULL;
  }
}

/* The program's dispositions before Python starts (Python's signal module takes SIGINT for itself, and a
 * Python handler never runs in a program whose threads do not run Python). */
static int program_default[NSIGNALS];
static void note_program_signals(void) {
  for (int i = 0; i < NSIGNALS; ++i)
    program_default[i] = sigaction(handled[i], NULL, &previous[i]) == 0 && previous[i].sa_handler == SIG_DFL &&
                         !(previous[i].sa_flags & SA_SIGINFO);
}

static void install_signal_handlers(void) {
  if (pipe(signal_pipe) != 0) return;
  for (int i = 0; i < NSIGNALS; ++i) {
    struct sigaction now;
    if (!program_default[i]) continue; /* the program's own, or ignored: left as they are */
    memset(&now, 0, sizeof now);
    now.sa_handler = on_signal;
    sigemptyset(&now.sa_mask);
    now.sa_flags = SA_RESTART;
    sigaction(handled[i], &now, NULL);
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, signal_watcher, NULL) != 0)
    for (int i = 0; i < NSIGNALS; ++i) sigaction(handled[i], &previous[i], NULL);
  pthread_attr_destroy(&attr);
}

/* Whether this process already runs Python (then its own start-up hook profiles it). */
static int python_in_process(void) {
  int (*is_init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  if (is_init == NULL) return 0;
  if (is_init()) return 1;
  return -1; /* linked in, not started: a program that embeds Python and starts it itself */
}

static enum boot_state boot_locked(void) {
  if (getenv("PROTON_FOLLOW") == NULL || *getenv("PROTON_FOLLOW") == '\0') return SKIPPED; /* not followed */
  int in_python = python_in_process();
  if (in_python > 0) return IN_PYTHON;
  if (in_python < 0) {
    say("proton: this program embeds Python and has not started it yet; it is not profiled through injection "
        "(start proton from its Python code instead)\n", NULL, NULL);
    return SKIPPED;
  }
  if (!load_python()) return FAILED;
  struct saved_var home, booting;
  swap_var(&home, "PYTHONHOME", getenv("PROTON_INJECT_PYTHONHOME"));
  swap_var(&booting, "PROTON_INJECT_BOOTING", "1"); /* proton-profile's start-up hook stands aside */
  note_program_signals();
  py.initialize_ex(0); /* 0: the program keeps its signal handlers */
  restore_var(&home);
  restore_var(&booting);
  int ok = py.run_string("import proton_cupti.injected as _proton_injected\n_proton_injected.boot()\n", NULL) == 0;
  py.save_thread(); /* the GIL is free from now on: the program's threads never need it */
  if (!ok) return FAILED;
  boot_pid = getpid();
  atexit(at_exit);
  install_signal_handlers();
  return BOOTED;
}

static enum boot_state boot(void) {
  pthread_mutex_lock(&boot_mu);
  if (state == NOT_BOOTED) state = boot_locked();
  enum boot_state s = state;
  pthread_mutex_unlock(&boot_mu);
  return s;
}

/* ---- exec: the process becomes another program and runs no exit handlers ----
 * proton-profile also preloads this library (LD_PRELOAD), so these definitions come before libc's: the
 * profile so far is written first, its files kept for the program that replaces this one (same pid: it
 * writes beside them).  Loaded only by the driver (not preloaded), they interpose nothing. */
typedef int (*execve_fn)(const char*, char* const[], char* const[]);
typedef int (*execv_fn)(const char*, char* const[]);
typedef int (*fexecve_fn)(int, char* const[], char* const[]);

static void before_exec(void) {
  write_once("import proton_cupti.injected as _proton_injected\n_proton_injected.before_exec()\n");
}

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  before_exec();
  return NEXT(execve_fn, "execve")(path, argv, envp);
}
EXPORT int execv(const char* path, char* const argv[]) {
  before_exec();
  return NEXT(execv_fn, "execv")(path, argv);
}
EXPORT int execvp(const char* file, char* const argv[]) {
  before_exec();
  return NEXT(execv_fn, "execvp")(file, argv);
}
EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  before_exec();
  return NEXT(execve_fn, "execvpe")(file, argv, envp);
}
EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  before_exec();
  return NEXT(fexecve_fn, "fexecve")(fd, argv, envp);
}

/* execl, execlp, execle: their arguments as an array, then the calls above. */
static char** collect(const char* first, va_list ap, char*** envp) {
  size_t n = 1, cap = 16;
  char** argv = malloc(cap * sizeof(char*));
  if (argv == NULL) return NULL;
  argv[0] = (char*)first;
  for (;;) {
    char* a = first ? va_arg(ap, char*) : NULL;
    if (n + 1 >= cap) {
      char** grown = realloc(argv, (cap *= 2) * sizeof(char*));
      if (grown == NULL) {
        free(argv);
        return NULL;
      }
      argv = grown;
    }
    argv[n++] = a;
    if (a == NULL) break;
  }
  if (envp) *envp = va_arg(ap, char**);
  return argv;
}
EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char** argv = collect(arg, ap, NULL);
  va_end(ap);
  if (argv == NULL) return errno = ENOMEM, -1;
  int rc = execv(path, argv);
  free(argv);
  return rc;
}
EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char** argv = collect(arg, ap, NULL);
  va_end(ap);
  if (argv == NULL) return errno = ENOMEM, -1;
  int rc = execvp(file, argv);
  free(argv);
  return rc;
}
EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  char** envp = NULL;
  va_start(ap, arg);
  char** argv = collect(arg, ap, &envp);
  va_end(ap);
  if (argv == NULL) return errno = ENOMEM, -1;
  int rc = execve(path, argv, envp);
  free(argv);
  return rc;
}

/* CUDA_INJECTION64_PATH: called by the driver in cuInit, once per process. */
EXPORT int InitializeInjection(void) {
  enum boot_state s = boot();
  return s == BOOTED || s == IN_PYTHON || s == SKIPPED;
}

/* NVTX_INJECTION64_PATH: called by each library's NVTX at its first call.  Ranges go to the NVTX plugin's
 * library (PROTON_NVTX_LIB), in this process's one copy of it. */
typedef int (*nvtx_init_fn)(void*);
EXPORT int InitializeInjectionNvtx2(void* get_export_table) {
  enum boot_state s = boot();
  if (s == SKIPPED && python_in_process() > 0) s = IN_PYTHON; /* a Python process not followed: still NVTX */
  if (s != BOOTED && s != IN_PYTHON) return 0;
  const char* lib = getenv("PROTON_NVTX_LIB");
  if (lib == NULL || *lib == '\0') return 0;
  void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    say("proton: cannot load the NVTX plugin's library (%s): %s; NVTX ranges are not recorded\n", lib, dlerror());
    return 0;
  }
  nvtx_init_fn init = (nvtx_init_fn)dlsym(h, "InitializeInjectionNvtx2");
  return init != NULL && init(get_export_table);
}

/* For proton_cupti.injected and the tests: what this library did in this process. */
EXPORT const char* proton_inject_state(void) {
  static const char* names[] = {"not booted", "booted", "python process", "failed", "skipped"};
  return names[state];
}
