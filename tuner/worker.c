#include "worker.h"

#include <errno.h>
#include <execinfo.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cold.h"
#include "cuda_driver.h"
#include "fork_child.h"

enum { MSG_READY = 1, MSG_RESULT = 2, MSG_SETUP_FAILED = 3 };

/* Exit code of a worker whose context is no longer usable after a fault. */
#define WORKER_EXIT_POISONED 3

typedef struct msg {
  int kind;
  int index;
  st_job_outcome out;
} msg;

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads exactly n bytes within timeout_s: 1 done, 0 end of file, -1 timeout
 * or error, -2 stopped. */
static int read_all(int fd, void *buf, size_t n, int timeout_s, volatile sig_atomic_t *stop) {
  char *p = buf;
  const time_t deadline = time(NULL) + timeout_s;
  while (n > 0) {
    if (stop && *stop) return -2;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int rc = poll(&pf, 1, 200);
    if (rc < 0 && errno != EINTR) return -1;
    if (rc <= 0) {
      if (time(NULL) > deadline) return -1;
      continue;
    }
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

/* ---- the worker (child) side ---- */

typedef struct module_slot {
  const char *hash;
  CUmodule mod;
} module_slot;

typedef struct child {
  const st_cu *cu;
  st_device_info dev;
  CUcontext ctx;
  CUstream stream;
  void *kase;
  st_timing_opts timing; /* o->timing, with the case's input sets where cold */
  module_slot *mods;
  int nmods;
} child;

static CUmodule module_for(child *c, const st_job *job, st_err *err, st_status *status) {
  for (int i = 0; i < c->nmods; i++)
    if (strcmp(c->mods[i].hash, job->variant->source_hash) == 0) return c->mods[i].mod;
  CUmodule mod = NULL;
  CUresult rc = c->cu->cuModuleLoadData(&mod, job->cubin);
  if (rc != CUDA_SUCCESS) {
    *status = st_cu_fail(c->cu, rc, "cuModuleLoadData", err);
    return NULL;
  }
  c->mods[c->nmods].hash = job->variant->source_hash;
  c->mods[c->nmods].mod = mod;
  c->nmods++;
  return mod;
}

/* One job. Returns 1 if the CUDA context is no longer usable. */
static int run_job(child *c, const st_op_harness *h, const st_job *job, const st_worker_opts *o, double *best,
                   st_job_outcome *out) {
  memset(out, 0, sizeof *out);
  st_err err = {{0}};
  st_status s = ST_OK;
  if (!job->cubin) {
    snprintf(out->status, sizeof out->status, "failed");
    snprintf(out->error, sizeof out->error, "no binary for this device");
    return 0;
  }
  CUmodule mod = module_for(c, job, &err, &s);
  void *bound = NULL;
  if (mod) s = h->bind(c->kase, &job->variant->kernel, &job->variant->launch, mod, &bound, &err);
  if (s != ST_OK) {
    snprintf(out->status, sizeof out->status, "failed");
    snprintf(out->error, sizeof out->error, "%s", err.msg);
    return s == ST_ERR_CUDA;
  }
  int ok = 0;
  s = h->verify(bound, c->stream, &ok, &out->max_err, out->error, sizeof out->error, &err);
  if (s == ST_OK && ok) {
    st_timing_opts t = c->timing;
    t.prune_us = o->prune_factor > 0 && *best > 0 ? o->prune_factor * *best : 0;
    /* The case's CPU reference may have left the GPU idle long enough to
     * clock down: the first variant timed on it warms the GPU back up. */
    if (*best <= 0 && t.warmup_ms < 100.0) t.warmup_ms = 100.0;
    s = st_time_graph(c->cu, c->stream, h->launch, bound, &t, &out->timing, &err);
  }
  h->unbind(bound);
  if (s != ST_OK) {
    snprintf(out->status, sizeof out->status, "failed");
    snprintf(out->error, sizeof out->error, "%s", err.msg);
    return s == ST_ERR_CUDA;
  }
  if (!ok) {
    snprintf(out->status, sizeof out->status, "wrong");
    return 0;
  }
  snprintf(out->status, sizeof out->status, "%s", out->timing.pruned ? "pruned" : "ok");
  if (!out->timing.pruned && (*best <= 0 || out->timing.median_us < *best)) *best = out->timing.median_us;
  return 0;
}

static st_status child_setup(child *c, const st_op_harness *h, const st_params *shape, const st_worker_opts *o,
                             int njobs, st_err *err) {
  st_status s = st_cu_load(&c->cu, err);
  if (s != ST_OK) return s;
  if ((s = st_cu_device_info(c->cu, o->device, &c->dev, err)) != ST_OK) return s;
  CUdevice dev;
  ST_CU_TRY(c->cu, c->cu->cuDeviceGet(&dev, o->device), err);
  ST_CU_TRY(c->cu, c->cu->cuDevicePrimaryCtxRetain(&c->ctx, dev), err);
  ST_CU_TRY(c->cu, c->cu->cuCtxSetCurrent(c->ctx), err);
  ST_CU_TRY(c->cu, c->cu->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), err);
  c->mods = calloc((size_t)njobs + 1, sizeof *c->mods);
  if (!c->mods) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_case_opts co = {.seed = o->seed, .threads = o->ref_threads, .cold = o->cold};
  if ((s = h->case_create(c->cu, &c->dev, shape, &co, &c->kase, err)) != ST_OK) return s;
  c->timing = o->timing;
  c->timing.flush_bytes = ST_TIMING_FLUSH_L2 * c->dev.l2_bytes;
  return o->cold ? st_cold_prepare(h, c->kase, &c->dev, &c->timing, err) : ST_OK;
}

/* A worker that crashes on the host side says where, on stderr, so the
 * failure recorded for the job can be traced. */
static void crash_handler(int sig) {
  static const char head[] = "sparsetune worker: fatal signal; backtrace:\n";
  if (write(2, head, sizeof head - 1) < 0) _exit(128 + sig);
  void *frames[48];
  /* Neither is async-signal-safe by POSIX; in glibc the one unsafe part,
   * loading the unwinder on first use, was done before the handler was
   * installed (child_main), and backtrace_symbols_fd does not allocate. */
  const int n = backtrace(frames, 48); // NOLINT(bugprone-signal-handler)
  backtrace_symbols_fd(frames, n, 2);  // NOLINT(bugprone-signal-handler)
  signal(sig, SIG_DFL);
  raise(sig);
}

static void child_main(int fd, const st_op_harness *h, const st_params *shape, const st_job *jobs, int n, int first,
                       const st_worker_opts *o) {
  void *first_frame[1];
  (void)backtrace(first_frame, 1); /* loads the unwinder now, not in crash_handler */
  signal(SIGSEGV, crash_handler);
  signal(SIGBUS, crash_handler);
  signal(SIGABRT, crash_handler);
  signal(SIGFPE, crash_handler);
  child c;
  memset(&c, 0, sizeof c);
  static msg m; /* large: keep it off the stack */
  st_err err = {{0}};
  if (child_setup(&c, h, shape, o, n, &err) != ST_OK) {
    memset(&m, 0, sizeof m);
    m.kind = MSG_SETUP_FAILED;
    snprintf(m.out.error, sizeof m.out.error, "%s", err.msg);
    write_all(fd, &m, sizeof m);
    _exit(1);
  }
  memset(&m, 0, sizeof m);
  m.kind = MSG_READY;
  if (write_all(fd, &m, sizeof m)) _exit(1);
  double best = o->best_us;
  for (int i = first; i < n; i++) {
    memset(&m, 0, sizeof m);
    m.kind = MSG_RESULT;
    m.index = i;
    const int poisoned = run_job(&c, h, &jobs[i], o, &best, &m.out);
    if (write_all(fd, &m, sizeof m)) _exit(1);
    if (poisoned) _exit(WORKER_EXIT_POISONED);
  }
  /* Exit without tearing down: the process is ending and the driver frees
   * everything; the case buffers are large and freeing them costs time. */
  _exit(0);
}

/* ---- the tuner (parent) side ---- */

static void describe_exit(int status, char *buf, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(buf, cap, "the worker died of signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (WIFEXITED(status) && WEXITSTATUS(status) == WORKER_EXIT_POISONED)
    snprintf(buf, cap, "the CUDA context was lost");
  else if (WIFEXITED(status))
    snprintf(buf, cap, "the worker exited with code %d", WEXITSTATUS(status));
  else
    snprintf(buf, cap, "the worker stopped");
}

st_status st_run_jobs(const st_op_harness *h, const st_params *shape, const st_job *jobs, int n,
                      const st_worker_opts *o, st_outcome_fn on_result, void *ctx, volatile sig_atomic_t *stop,
                      st_err *err) {
  static msg m;
  int next = 0;
  double best = o->best_us;
  while (next < n) {
    if (stop && *stop) return ST_OK;
    int fds[2];
    if (pipe(fds) != 0) return st_fail(err, ST_ERR_NOMEM, "pipe: %s", strerror(errno));
    pid_t pid = -1;
    const st_status forked = st_fork_child(o->db, &pid, err);
    if (forked != ST_OK) {
      close(fds[0]);
      close(fds[1]);
      return forked;
    }
    if (pid == 0) {
      close(fds[0]);
      st_worker_opts child_opts = *o;
      child_opts.best_us = best;
      child_main(fds[1], h, shape, jobs, n, next, &child_opts);
    }
    close(fds[1]);
    int rc = read_all(fds[0], &m, sizeof m, o->setup_timeout_s, stop);
    if (rc == 1 && m.kind == MSG_SETUP_FAILED) {
      close(fds[0]);
      waitpid(pid, NULL, 0);
      return st_fail(err, ST_ERR_CUDA, "%s", m.out.error);
    }
    if (rc != 1 || m.kind != MSG_READY) {
      kill(pid, SIGKILL);
      close(fds[0]);
      int status = 0;
      waitpid(pid, &status, 0);
      if (rc == -2) return ST_OK;
      char why[200];
      describe_exit(status, why, sizeof why);
      return st_fail(err, ST_ERR_CUDA, "building the inputs of the shape failed: %s",
                     rc == -1 ? "no answer in time" : why);
    }
    int died = 0;
    while (next < n) {
      rc = read_all(fds[0], &m, sizeof m, o->job_timeout_s, stop);
      if (rc == 1 && m.kind == MSG_RESULT && m.index == next) {
        if (!strcmp(m.out.status, "ok") && (best <= 0 || m.out.timing.median_us < best)) best = m.out.timing.median_us;
        on_result(ctx, next++, &m.out);
        continue;
      }
      died = 1;
      break;
    }
    if (rc == -2) {
      kill(pid, SIGKILL);
      close(fds[0]);
      waitpid(pid, NULL, 0);
      return ST_OK;
    }
    if (rc == -1) kill(pid, SIGKILL);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (died && next < n) {
      st_job_outcome out;
      memset(&out, 0, sizeof out);
      snprintf(out.status, sizeof out.status, "failed");
      if (rc == -1) snprintf(out.error, sizeof out.error, "hung: no result within %d s; the worker was killed", o->job_timeout_s);
      else describe_exit(status, out.error, sizeof out.error);
      on_result(ctx, next++, &out);
    }
  }
  return ST_OK;
}

st_status st_probe_device(int ordinal, st_device_info *info, st_err *err) {
  typedef struct probe_msg {
    st_status status;
    st_err err;
    st_device_info info;
  } probe_msg;
  int fds[2];
  if (pipe(fds) != 0) return st_fail(err, ST_ERR_NOMEM, "pipe: %s", strerror(errno));
  pid_t pid = -1;
  const st_status forked = st_fork_child(NULL, &pid, err);
  if (forked != ST_OK) {
    close(fds[0]);
    close(fds[1]);
    return forked;
  }
  if (pid == 0) {
    close(fds[0]);
    probe_msg pm;
    memset(&pm, 0, sizeof pm);
    const st_cu *cu = NULL;
    pm.status = st_cu_load(&cu, &pm.err);
    if (pm.status == ST_OK) pm.status = st_cu_device_info(cu, ordinal, &pm.info, &pm.err);
    write_all(fds[1], &pm, sizeof pm);
    _exit(0);
  }
  close(fds[1]);
  probe_msg pm;
  int rc = read_all(fds[0], &pm, sizeof pm, 120, NULL);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (rc != 1) {
    char why[200];
    describe_exit(status, why, sizeof why);
    return st_fail(err, ST_ERR_NO_DRIVER, "probing the GPU failed: %s", why);
  }
  if (pm.status != ST_OK) {
    if (err) *err = pm.err;
    return pm.status;
  }
  *info = pm.info;
  return ST_OK;
}
