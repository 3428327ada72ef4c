#include "nvrtc_loader.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_options.h"

/* The NVRTC functions compiling a source needs: X(name). */
#define ST_NVRTC_FUNCS(X)                                                                                       \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcDestroyProgram)  \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)

struct st_nvrtc {
#define ST_NVRTC_FIELD(name) __typeof__(name) *name; // NOLINT(bugprone-macro-parentheses): a declarator
  ST_NVRTC_FUNCS(ST_NVRTC_FIELD)
#undef ST_NVRTC_FIELD
  char name[32];
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static st_nvrtc g_nvrtc;
static st_status g_status = ST_ERR_NO_VARIANT;
static st_err g_err;

static const char *const g_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

static void *open_in(const char *dir, char *tried, size_t cap) {
  for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++) {
    char path[4096];
    if (dir)
      snprintf(path, sizeof path, "%s/%s", dir, g_names[i]);
    else
      snprintf(path, sizeof path, "%s", g_names[i]);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    size_t used = strlen(tried);
    if (used + 1 < cap) snprintf(tried + used, cap - used, "%s%s", used ? ", " : "", path);
  }
  return NULL;
}

static void *open_library(char *tried, size_t cap) {
  const char *explicit_path = getenv("SPARSETUNE_NVRTC");
  if (explicit_path && explicit_path[0]) {
    void *lib = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) snprintf(tried, cap, "%s (SPARSETUNE_NVRTC)", explicit_path);
    return lib;
  }
  void *lib = open_in(NULL, tried, cap);
  const char *cuda_home = getenv("CUDA_HOME");
  char dir[4096];
  if (!lib && cuda_home && cuda_home[0]) {
    snprintf(dir, sizeof dir, "%s/lib64", cuda_home);
    lib = open_in(dir, tried, cap);
  }
  if (!lib) lib = open_in("/usr/local/cuda/lib64", tried, cap);
  return lib;
}

static void load_once(void) {
  char tried[1024] = "";
  void *lib = open_library(tried, sizeof tried);
  if (!lib) {
    g_status = st_fail(&g_err, ST_ERR_NO_VARIANT,
                       "NVRTC, which compiles built-in variants at first use, is not on this machine (tried %s): "
                       "install the CUDA toolkit's NVRTC, set SPARSETUNE_NVRTC to libnvrtc.so, or use a database "
                       "that holds the binaries (sparsetune tune or compile on this GPU)",
                       tried);
    return;
  }
#define ST_NVRTC_RESOLVE(fn)                                                                               \
  {                                                                                                        \
    void *p = dlsym(lib, #fn);                                                                             \
    if (!p) {                                                                                              \
      g_status = st_fail(&g_err, ST_ERR_NO_VARIANT, "the NVRTC library loaded lacks %s: it is too old", #fn); \
      dlclose(lib);                                                                                        \
      return;                                                                                              \
    }                                                                                                      \
    memcpy(&g_nvrtc.fn, &p, sizeof p);                                                                     \
  }
  ST_NVRTC_FUNCS(ST_NVRTC_RESOLVE)
#undef ST_NVRTC_RESOLVE
  int major = 0, minor = 0;
  if (g_nvrtc.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    g_status = st_fail(&g_err, ST_ERR_NO_VARIANT, "the NVRTC library loaded does not report its version");
    dlclose(lib);
    return;
  }
  snprintf(g_nvrtc.name, sizeof g_nvrtc.name, "nvrtc %d.%d", major, minor);
  g_status = ST_OK; /* stays loaded for the life of the process: the table points into it */
}

st_status st_nvrtc_load(const st_nvrtc **out, st_err *err) {
  pthread_once(&g_once, load_once);
  if (g_status != ST_OK) {
    if (err) *err = g_err;
    return g_status;
  }
  *out = &g_nvrtc;
  return ST_OK;
}

const char *st_nvrtc_name(const st_nvrtc *n) { return n->name; }

/* The first lines of a compiler log, on one line, for a message. */
static void log_excerpt(const char *log, char *buf, size_t cap) {
  size_t j = 0;
  for (size_t i = 0; log && log[i] && j + 1 < cap; i++) buf[j++] = log[i] == '\n' ? ' ' : log[i];
  buf[j] = '\0';
  if (j == 0) snprintf(buf, cap, "no log");
}

st_status st_nvrtc_compile(const st_nvrtc *n, const char *source, const char *name, const char *arch, void **cubin,
                           size_t *size, st_err *err) {
  *cubin = NULL;
  *size = 0;
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  const char *const opts[] = {arch_opt, ST_NVRTC_OPTIONS};
  nvrtcProgram prog = NULL;
  nvrtcResult r = n->nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return st_fail(err, ST_ERR_CUDA, "nvrtcCreateProgram(%s): %s", name, n->nvrtcGetErrorString(r));
  st_status st = ST_OK;
  r = n->nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    char *log = NULL;
    if (n->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0 && (log = malloc(log_size)) &&
        n->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
      log[0] = '\0';
    char excerpt[400];
    log_excerpt(log, excerpt, sizeof excerpt);
    free(log);
    st = st_fail(err, r == NVRTC_ERROR_COMPILATION ? ST_ERR_NO_VARIANT : ST_ERR_CUDA,
                 "%s does not compile for %s with %s: %s: %s", name, arch, g_nvrtc.name, n->nvrtcGetErrorString(r),
                 excerpt);
  } else if ((r = n->nvrtcGetCUBINSize(prog, size)) != NVRTC_SUCCESS || *size == 0) {
    st = st_fail(err, ST_ERR_CUDA, "nvrtcGetCUBINSize(%s): %s", name, n->nvrtcGetErrorString(r));
  } else if (!(*cubin = malloc(*size))) {
    st = st_fail(err, ST_ERR_NOMEM, "out of host memory for a %zu-byte binary", *size);
  } else if ((r = n->nvrtcGetCUBIN(prog, *cubin)) != NVRTC_SUCCESS) {
    st = st_fail(err, ST_ERR_CUDA, "nvrtcGetCUBIN(%s): %s", name, n->nvrtcGetErrorString(r));
  }
  (void)n->nvrtcDestroyProgram(&prog);
  if (st != ST_OK) {
    free(*cubin);
    *cubin = NULL;
    *size = 0;
  }
  return st;
}
