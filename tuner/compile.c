/* compile.c - NVRTC compiles, the ptxas resource report, and the parallel,
 * cached compile of a whole variant set.
 *
 * Threads: st_compile_all's workers only call NVRTC (thread-safe for separate
 * programs) and touch nothing but their own job; the database handle stays on
 * the calling thread, which takes finished jobs off a mutex-protected queue
 * and stores them. */
#include "compile.h"

#include <ctype.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compile_cache.h"
#include "disk_cache.h"
#include "nvrtc_options.h"

/* Results stored per transaction at most: few enough that an interruption
 * loses little, enough to spare commits when compiles finish together. */
#define ST_COMPILE_BATCH 16
#define ST_COMPILE_MAX_JOBS 256

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static st_status nvrtc_fail(st_err *err, const char *call, nvrtcResult r) {
  return st_fail(err, ST_ERR_CUDA, "%s failed: %s", call, nvrtcGetErrorString(r));
}

/* ---- architecture and compiler ---------------------------------------- */

/* The compute capability of "sm_NN[N][a|f]" (90 for "sm_90a"), or -1. */
static int parse_arch(const char *arch) {
  if (strncmp(arch, "sm_", 3) != 0) return -1;
  const char *p = arch + 3;
  int digits = 0, cc = 0;
  while (digits < 4 && isdigit((unsigned char)p[digits])) cc = cc * 10 + (p[digits++] - '0');
  if (digits < 2 || digits > 3) return -1;
  p += digits;
  /* Arch-specific targets began with Hopper (sm_90a), families with
   * Blackwell (sm_100f). */
  if ((*p == 'a' && cc >= 90) || (*p == 'f' && cc >= 100)) p++;
  return *p ? -1 : cc;
}

st_status st_compile_check_arch(const char *arch, st_err *err) {
  if (!arch) return st_fail(err, ST_ERR_INVALID_ARG, "arch is NULL: expected a GPU architecture such as sm_90a");
  const int cc = parse_arch(arch);
  if (cc < 0)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "arch=\"%.32s\" is not a GPU architecture: expected sm_ and the compute capability, "
                   "optionally followed by a (from sm_90) or f (from sm_100): sm_89, sm_90a, sm_100f",
                   arch);
  int n = 0;
  nvrtcResult r = nvrtcGetNumSupportedArchs(&n);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetNumSupportedArchs", r);
  int archs[64];
  if (n <= 0 || n > (int)(sizeof archs / sizeof archs[0]))
    return st_fail(err, ST_ERR_CUDA, "nvrtcGetNumSupportedArchs returned %d architectures", n);
  if ((r = nvrtcGetSupportedArchs(archs)) != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetSupportedArchs", r);
  char list[256] = "";
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    if (archs[i] == cc) return ST_OK;
    int w = snprintf(list + used, sizeof list - used, "%ssm_%d", i ? ", " : "", archs[i]);
    if (w > 0 && (size_t)w < sizeof list - used) used += (size_t)w;
  }
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return st_fail(err, ST_ERR_INVALID_ARG, "arch=%s is not supported by NVRTC %d.%d (it supports %s)", arch, major,
                 minor, list);
}

st_status st_compile_compiler(char out[32], st_err *err) {
  int major = 0, minor = 0;
  nvrtcResult r = nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcVersion", r);
  snprintf(out, 32, "NVRTC %d.%d", major, minor);
  return ST_OK;
}

/* ---- the ptxas report --------------------------------------------------- */

/* The integer just before `what` in `line` ("128 bytes stack frame"), or -1. */
static int number_before(const char *line, const char *end, const char *what) {
  const size_t wlen = strlen(what);
  for (const char *p = line; p + wlen <= end; p++) {
    if (memcmp(p, what, wlen) != 0) continue;
    const char *q = p;
    while (q > line && q[-1] == ' ') q--;
    const char *digits = q;
    while (digits > line && isdigit((unsigned char)digits[-1])) digits--;
    if (digits == q) return -1;
    long v = strtol(digits, NULL, 10);
    return v > 0x7fffffff ? 0x7fffffff : (int)v;
  }
  return -1;
}

static void max_into(int *dst, int v) {
  if (v > *dst) *dst = v;
}

static int line_has(const char *line, const char *end, const char *what) {
  const char *p = strstr(line, what);
  return p && p < end;
}

/* ptxas -v prints per function:
 *   ptxas         .     128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 * and per entry function:
 *   ptxas info    : Used 32 registers, used 1 barriers, ..., 1024 bytes smem
 * Each figure kept is the largest over the functions. */
static void parse_report(const char *log, st_binary_row *b) {
  for (const char *line = log; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const int stack = number_before(line, end, "bytes stack frame");
    if (stack >= 0) {
      const int stores = number_before(line, end, "bytes spill stores");
      const int loads = number_before(line, end, "bytes spill loads");
      max_into(&b->local_bytes, stack);
      max_into(&b->spill_bytes, (stores > 0 ? stores : 0) + (loads > 0 ? loads : 0));
    }
    if (line_has(line, end, "Used ")) {
      max_into(&b->registers, number_before(line, end, " registers"));
      max_into(&b->shared_bytes, number_before(line, end, " bytes smem"));
    }
    line = *end ? end + 1 : end;
  }
}

/* ---- one compile -------------------------------------------------------- */

static st_status read_log(nvrtcProgram prog, char **log, st_err *err) {
  size_t size = 0;
  nvrtcResult r = nvrtcGetProgramLogSize(prog, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetProgramLogSize", r);
  *log = malloc(size + 1);
  if (!*log) return st_fail(err, ST_ERR_NOMEM, "no memory for a compile log of %zu bytes", size);
  (*log)[0] = (*log)[size] = '\0';
  if (size && (r = nvrtcGetProgramLog(prog, *log)) != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetProgramLog", r);
  return ST_OK;
}

static st_status read_cubin(nvrtcProgram prog, st_binary_row *b, st_err *err) {
  size_t size = 0;
  nvrtcResult r = nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetCUBINSize", r);
  if (!size) return st_fail(err, ST_ERR_CUDA, "NVRTC compiled the program but returned an empty cubin");
  b->cubin = malloc(size);
  if (!b->cubin) return st_fail(err, ST_ERR_NOMEM, "no memory for a cubin of %zu bytes", size);
  b->cubin_size = size;
  if ((r = nvrtcGetCUBIN(prog, b->cubin)) != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetCUBIN", r);
  return ST_OK;
}

/* One NVRTC program: *rc is the compile's verdict, *log (malloc'ed, set
 * even on error when it was read) its log; the cubin goes into `cubin_to`
 * when it compiled and `cubin_to` is not NULL. */
static st_status nvrtc_run(const char *source, const char *name, const char *const *opts, int nopts, nvrtcResult *rc,
                           char **log, st_binary_row *cubin_to, st_err *err) {
  nvrtcProgram prog = NULL;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcCreateProgram", r);
  *rc = nvrtcCompileProgram(prog, nopts, opts);
  st_status s = read_log(prog, log, err);
  if (s == ST_OK && *rc == NVRTC_SUCCESS && cubin_to) s = read_cubin(prog, cubin_to, err);
  if ((r = nvrtcDestroyProgram(&prog)) != NVRTC_SUCCESS && s == ST_OK) s = nvrtc_fail(err, "nvrtcDestroyProgram", r);
  return s;
}

/* With ptxas -v, NVRTC's log keeps the report but drops ptxas's own error
 * ("uses too much shared data"): a failure whose log names no error is
 * compiled again without -v, and that log is appended. */
static st_status explain_failure(const char *source, const char *name, const char *const *opts, int nopts, char **log,
                                 st_err *err) {
  nvrtcResult rc;
  char *why = NULL;
  st_status s = nvrtc_run(source, name, opts, nopts, &rc, &why, NULL, err);
  if (s == ST_OK && why && *why) {
    const size_t a = strlen(*log), b = strlen(why);
    char *both = realloc(*log, a + b + 1);
    if (!both)
      s = st_fail(err, ST_ERR_NOMEM, "no memory for a compile log of %zu bytes", a + b);
    else {
      memcpy(both + a, why, b + 1);
      *log = both;
    }
  }
  free(why);
  return s;
}

st_status st_compile_one(const char *source, const char *name, const char *arch, st_compiled *out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "out is NULL");
  memset(out, 0, sizeof *out);
  if (!source) return st_fail(err, ST_ERR_INVALID_ARG, "source is NULL");
  if (!name || !*name) return st_fail(err, ST_ERR_INVALID_ARG, "name is NULL or empty");
  st_status s = st_compile_check_arch(arch, err);
  if (s != ST_OK) return s;
  st_binary_row *b = &out->bin;
  if ((s = st_compile_compiler(b->compiler, err)) != ST_OK) return s;
  snprintf(b->arch, sizeof b->arch, "%s", arch);

  char arch_opt[48];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  /* The report option comes last so that explain_failure can drop it. */
  const char *const opts[] = {arch_opt, ST_NVRTC_OPTIONS, "--ptxas-options=-v"};
  const int nopts = (int)(sizeof opts / sizeof opts[0]);
  const double t0 = now_s();
  nvrtcResult rc = NVRTC_SUCCESS;
  if ((s = nvrtc_run(source, name, opts, nopts, &rc, &b->log, b, err)) != ST_OK) goto cleanup;
  /* Options NVRTC refuses are the caller's error, not the source's. */
  if (rc == NVRTC_ERROR_INVALID_OPTION || (rc == NVRTC_ERROR_COMPILATION && strstr(b->log, "Command-line error"))) {
    s = st_fail(err, ST_ERR_INVALID_ARG, "arch=%s: NVRTC refused the options: %.300s", arch, b->log);
    goto cleanup;
  }
  if (rc != NVRTC_SUCCESS && rc != NVRTC_ERROR_COMPILATION) {
    s = nvrtc_fail(err, "nvrtcCompileProgram", rc);
    goto cleanup;
  }
  b->ok = rc == NVRTC_SUCCESS;
  parse_report(b->log, b);
  if (!b->ok && !strstr(b->log, "error") && (s = explain_failure(source, name, opts, nopts - 1, &b->log, err)) != ST_OK)
    goto cleanup;
  b->compile_ms = 1e3 * (now_s() - t0);

cleanup:
  if (s != ST_OK) st_compiled_free(out);
  return s;
}

void st_compiled_free(st_compiled *c) {
  if (!c) return;
  free(c->bin.cubin);
  free(c->bin.log);
  memset(c, 0, sizeof *c);
}

/* ---- the parallel, cached compile --------------------------------------- */

typedef struct job {
  const char *hash;    /* the first variant's row.source_hash          */
  const char *name;    /* that variant's name, for progress            */
  const char *source;  /* its source, or owned_source                  */
  char *owned_source;  /* read from the database                       */
  char prog_name[176]; /* "<name>.cu", what the log's messages name    */
  st_compiled result;
  int from_disk; /* the result came from the disk cache (compile_cache.h) */
  st_status status;
  st_err err;
} job;

/* Shared between the caller and the workers; every field after `mu` is
 * guarded by it, except jobs[i], which belongs to the worker that took i
 * until i is queued in `finished`. */
typedef struct pool {
  const char *arch;
  const char *compiler;
  char cache_dir[4096]; /* "" when the disk cache is off */
  job *jobs;
  int njobs;
  volatile sig_atomic_t *stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int next;      /* next job to hand out                               */
  int *finished; /* job indices in the order they finished             */
  int nfinished; /* pushed by workers                                  */
  int running;   /* workers that have not exited                       */
  int halt;      /* set by the caller after an error                   */
} pool;

/* A job's result from the disk cache, else compiled and kept there. */
static st_status compile_job(const pool *p, job *j) {
  char path[4608];
  st_compile_cache_path(p->cache_dir, j->hash, p->arch, p->compiler, path, sizeof path);
  if (path[0] && st_compile_cache_get(path, j->hash, p->arch, p->compiler, &j->result.bin)) {
    j->from_disk = 1;
    return ST_OK;
  }
  const st_status s = st_compile_one(j->source, j->prog_name, p->arch, &j->result, &j->err);
  if (s == ST_OK && path[0]) (void)st_compile_cache_put(path, &j->result.bin); /* a convenience: never an error */
  return s;
}

static void *worker_main(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    if (p->halt || (p->stop && *p->stop) || p->next >= p->njobs) {
      p->running--;
      pthread_cond_signal(&p->cv);
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    job *j = &p->jobs[p->next++];
    pthread_mutex_unlock(&p->mu);

    j->status = compile_job(p, j);

    pthread_mutex_lock(&p->mu);
    p->finished[p->nfinished++] = (int)(j - p->jobs);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

typedef struct hash_ref {
  const char *hash;
  int index;
} hash_ref;

static int cmp_hash_ref(const void *a, const void *b) {
  const hash_ref *x = a, *y = b;
  const int c = strcmp(x->hash, y->hash);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int cmp_int(const void *a, const void *b) {
  const int i = *(const int *)a, j = *(const int *)b;
  return (i > j) - (i < j);
}

/* Indices of the first variant of each distinct source hash, in input order. */
static st_status distinct_sources(const st_gen_variant *v, int n, int **out, int *nout, st_err *err) {
  hash_ref *refs = malloc(sizeof *refs * (size_t)(n ? n : 1));
  int *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
  if (!refs || !idx) {
    free(refs);
    free(idx);
    return st_fail(err, ST_ERR_NOMEM, "no memory to index %d variants", n);
  }
  for (int i = 0; i < n; i++) {
    if (!v[i].row.source_hash[0]) {
      free(refs);
      free(idx);
      return st_fail(err, ST_ERR_INVALID_ARG, "variant %d (%.160s) has an empty source_hash", i, v[i].row.name);
    }
    refs[i] = (hash_ref){v[i].row.source_hash, i};
  }
  qsort(refs, (size_t)n, sizeof *refs, cmp_hash_ref);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || strcmp(refs[i].hash, refs[i - 1].hash) != 0) idx[m++] = refs[i].index;
  free(refs);
  qsort(idx, (size_t)m, sizeof *idx, cmp_int);
  *out = idx;
  *nout = m;
  return ST_OK;
}

static void free_jobs(job *jobs, int n) {
  for (int i = 0; i < n; i++) {
    free(jobs[i].owned_source);
    st_compiled_free(&jobs[i].result);
  }
  free(jobs);
}

/* The jobs: distinct sources the database lacks for (arch, compiler), with
 * their text at hand. Counts the rest as cached. */
static st_status plan(st_db *db, const st_gen_variant *v, int n, const char *arch, const char *compiler, job **out,
                      int *njobs, st_compile_stats *stats, st_err *err) {
  int *idx = NULL, m = 0;
  st_status s = distinct_sources(v, n, &idx, &m, err);
  if (s != ST_OK) return s;
  stats->total = m;
  job *jobs = calloc((size_t)(m ? m : 1), sizeof *jobs);
  if (!jobs) {
    free(idx);
    return st_fail(err, ST_ERR_NOMEM, "no memory for %d compile jobs", m);
  }
  int k = 0;
  for (int i = 0; i < m; i++) {
    const st_gen_variant *var = &v[idx[i]];
    int found = 0;
    if ((s = st_db_has_binary(db, var->row.source_hash, arch, compiler, &found, err)) != ST_OK) break;
    if (found) {
      stats->cached++;
      continue;
    }
    job *j = &jobs[k++];
    j->hash = var->row.source_hash;
    j->name = var->row.name[0] ? var->row.name : var->row.source_hash;
    snprintf(j->prog_name, sizeof j->prog_name, "%.160s.cu", j->name);
    j->source = var->source;
    if (!j->source) {
      if ((s = st_db_get_source(db, j->hash, &j->owned_source, err)) != ST_OK) break;
      j->source = j->owned_source;
    }
  }
  free(idx);
  if (s != ST_OK) {
    free_jobs(jobs, k);
    return s;
  }
  *out = jobs;
  *njobs = k;
  return ST_OK;
}

/* Stores finished jobs in one transaction and frees their results. A job
 * that could not run (an NVRTC API failure, not a compile error) is not
 * stored; its error becomes the call's once the others are stored. */
static st_status store_batch(st_db *db, job *jobs, const int *which, int k, st_compile_stats *stats, st_err *err) {
  st_status s = st_db_begin(db, err), job_status = ST_OK;
  st_err job_err = {{0}};
  int stored = 0, failed = 0, from_disk = 0;
  for (int i = 0; i < k && s == ST_OK; i++) {
    job *j = &jobs[which[i]];
    if (j->status != ST_OK) {
      if (job_status == ST_OK) job_status = st_fail(&job_err, j->status, "compiling %s: %s", j->name, j->err.msg);
      continue;
    }
    st_binary_row *b = &j->result.bin;
    snprintf(b->source_hash, sizeof b->source_hash, "%s", j->hash);
    if ((s = st_db_put_binary(db, b, err)) != ST_OK) break;
    stored++;
    failed += !b->ok;
    from_disk += j->from_disk;
  }
  if (s == ST_OK)
    s = st_db_commit(db, err);
  else
    st_db_rollback(db); /* a no-op when begin itself failed */
  for (int i = 0; i < k; i++) st_compiled_free(&jobs[which[i]].result);
  if (s != ST_OK) return s;
  stats->compiled += stored;
  stats->failed += failed;
  stats->from_disk += from_disk;
  if (job_status != ST_OK && err) *err = job_err;
  return job_status;
}

static int start_workers(pool *p, pthread_t *threads, int want) {
  int started = 0;
  for (; started < want; started++) {
    pthread_mutex_lock(&p->mu);
    p->running++;
    pthread_mutex_unlock(&p->mu);
    if (pthread_create(&threads[started], NULL, worker_main, p)) {
      pthread_mutex_lock(&p->mu);
      p->running--;
      pthread_mutex_unlock(&p->mu);
      break;
    }
  }
  return started;
}

/* Runs the jobs on `nthreads` workers, storing results as they come. */
static st_status run_pool(st_db *db, pool *p, int nthreads, int cached, st_compile_progress_fn progress, void *ctx,
                          st_compile_stats *stats, st_err *err) {
  pthread_t threads[ST_COMPILE_MAX_JOBS];
  const int started = start_workers(p, threads, nthreads);
  if (!started) return st_fail(err, ST_ERR_NOMEM, "could not start a compile thread");
  const double t0 = now_s();
  st_status s = ST_OK;
  int taken = 0;
  for (;;) {
    int batch[ST_COMPILE_BATCH], k = 0;
    pthread_mutex_lock(&p->mu);
    while (taken == p->nfinished && p->running > 0) pthread_cond_wait(&p->cv, &p->mu);
    while (taken < p->nfinished && k < ST_COMPILE_BATCH) batch[k++] = p->finished[taken++];
    pthread_mutex_unlock(&p->mu);
    if (!k) break;    /* every worker has exited and everything is taken */
    if (s != ST_OK) { /* after an error: drain only */
      for (int i = 0; i < k; i++) st_compiled_free(&p->jobs[batch[i]].result);
      continue;
    }
    s = store_batch(db, p->jobs, batch, k, stats, err);
    if (s != ST_OK) {
      pthread_mutex_lock(&p->mu);
      p->halt = 1;
      pthread_mutex_unlock(&p->mu);
    }
    if (progress) {
      const int done = stats->compiled, left = p->njobs - done;
      const double eta = done ? (now_s() - t0) / done * left : -1.0;
      progress(ctx, cached + done, stats->total, cached, stats->failed, eta, p->jobs[batch[k - 1]].name);
    }
  }
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  return s;
}

static int default_jobs(int jobs) {
  if (jobs <= 0) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    jobs = cpus > 0 ? (int)(cpus < ST_COMPILE_MAX_JOBS ? cpus : ST_COMPILE_MAX_JOBS) : 1;
  }
  return jobs < ST_COMPILE_MAX_JOBS ? jobs : ST_COMPILE_MAX_JOBS;
}

st_status st_compile_all(st_db *db, const st_gen_variant *v, int n, const char *arch, int jobs,
                         st_compile_progress_fn progress, void *ctx, volatile sig_atomic_t *stop,
                         st_compile_stats *stats, st_err *err) {
  st_compile_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  const double t0 = now_s();
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "db is NULL");
  if (n < 0 || (n > 0 && !v))
    return st_fail(err, ST_ERR_INVALID_ARG, "n=%d with variants %s: need n >= 0 variants", n, v ? "given" : "NULL");
  st_status s = st_compile_check_arch(arch, err);
  char compiler[32];
  if (s != ST_OK || (s = st_compile_compiler(compiler, err)) != ST_OK) return s;

  job *js = NULL;
  int njobs = 0;
  if ((s = plan(db, v, n, arch, compiler, &js, &njobs, stats, err)) != ST_OK) return s;
  if (progress) progress(ctx, stats->cached, stats->total, stats->cached, 0, njobs ? -1.0 : 0.0, NULL);

  pool p = {.arch = arch, .compiler = compiler, .jobs = js, .njobs = njobs, .stop = stop};
  st_disk_cache_dir(p.cache_dir, sizeof p.cache_dir);
  if (njobs) {
    p.finished = malloc(sizeof *p.finished * (size_t)njobs);
    if (!p.finished) s = st_fail(err, ST_ERR_NOMEM, "no memory for %d compile results", njobs);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    if (s == ST_OK) {
      const int want = default_jobs(jobs);
      s = run_pool(db, &p, want < njobs ? want : njobs, stats->cached, progress, ctx, stats, err);
    }
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(p.finished);
  }
  stats->interrupted = s == ST_OK && stats->cached + stats->compiled < stats->total;
  free_jobs(js, njobs);
  stats->seconds = now_s() - t0;
  return s;
}
