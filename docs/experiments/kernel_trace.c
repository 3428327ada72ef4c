/* kernel_trace.c - a kernel timeline for any sparsetune process, where the
 * device has no nsys (standalone, an LD_PRELOAD library; not part of the
 * product). CUPTI's activity API records every kernel's start and end on
 * the GPU's clock, graph replays included, with its stream; at exit the
 * records are written as CSV, one kernel a line:
 *   start_ns,end_ns,stream,graph,grid_x,block_x,regs,dyn_smem,name
 * with start_ns counted from the first kernel's start. Whether two kernels
 * of different streams ran side by side (sparse_attn's merge of chunk c
 * beside the blocks kernel of chunk c + 1, docs/kernels/sparse_attn.md)
 * is then whether their intervals overlap.
 *
 * Build (on the device; CUPTI comes with the toolkit):
 *   gcc -O2 -shared -fPIC -o kt.so docs/experiments/kernel_trace.c \
 *       -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
 *       -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti
 * Run:
 *   KT_OUT=trace.csv LD_PRELOAD=$PWD/kt.so LD_LIBRARY_PATH=<libcupti's dir> \
 *       build/tuner/sparsetune tune --suite anchors --op sparse_attn --match ...
 * KT_MATCH=TEXT keeps only kernels whose name contains TEXT.
 * The tuner times kernels in forked workers that end with _exit, and keeps
 * its own process CUDA-free: with KT_FORK=1 the recording starts in each
 * forked child instead (a fresh CUDA process there), and _exit is wrapped
 * so that the child writes its records, to KT_OUT.PID. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KT_BUFFER_BYTES = 8 << 20, KT_ALIGN = 8 };

typedef struct kt_row {
  uint64_t start, end;
  uint32_t stream, graph;
  int32_t grid_x, block_x;
  uint16_t regs;
  int32_t dyn_smem;
  char name[96];
} kt_row;

static kt_row *g_rows;
static size_t g_n, g_cap;
static const char *g_match;
static int g_recording, g_child;

static void kt_check(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS) return;
  const char *msg = NULL;
  cuptiGetResultString(r, &msg);
  fprintf(stderr, "kernel_trace: %s: %s\n", what, msg ? msg : "unknown CUPTI error");
}

static void CUPTIAPI kt_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  uint8_t *b = aligned_alloc(KT_ALIGN, KT_BUFFER_BYTES);
  *buffer = b;
  *size = b ? KT_BUFFER_BYTES : 0;
  *max_records = 0; /* as many as fit */
}

/* Keeps the kernel records of a full buffer (CUPTI calls this from its own
 * thread, one buffer at a time). */
static void CUPTIAPI kt_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                         size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    if (g_match && (!k->name || !strstr(k->name, g_match))) continue;
    if (g_n == g_cap) {
      const size_t cap = g_cap ? 2 * g_cap : 4096;
      kt_row *rows = realloc(g_rows, cap * sizeof *rows);
      if (!rows) break; /* out of memory: the trace ends here */
      g_rows = rows;
      g_cap = cap;
    }
    kt_row *r = &g_rows[g_n++];
    r->start = k->start;
    r->end = k->end;
    r->stream = k->streamId;
    r->graph = k->graphId;
    r->grid_x = k->gridX;
    r->block_x = k->blockX;
    r->regs = k->registersPerThread;
    r->dyn_smem = k->dynamicSharedMemory;
    snprintf(r->name, sizeof r->name, "%s", k->name ? k->name : "?");
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
    fprintf(stderr, "kernel_trace: CUPTI dropped %zu records\n", dropped);
  free(buffer);
}

static int kt_by_start(const void *a, const void *b) {
  const uint64_t x = ((const kt_row *)a)->start, y = ((const kt_row *)b)->start;
  return x < y ? -1 : x > y;
}

static void kt_write(void) {
  if (!g_recording) return;
  g_recording = 0;
  kt_check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing the activity buffers");
  char path[4096];
  const char *base = getenv("KT_OUT") ? getenv("KT_OUT") : "kernel_trace.csv";
  if (g_child) snprintf(path, sizeof path, "%s.%ld", base, (long)getpid());
  else snprintf(path, sizeof path, "%s", base);
  if (g_child && !g_n) return; /* a child that ran no kernel (the compiler, a probe) */
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  qsort(g_rows, g_n, sizeof *g_rows, kt_by_start);
  const uint64_t t0 = g_n ? g_rows[0].start : 0;
  fprintf(f, "start_ns,end_ns,stream,graph,grid_x,block_x,regs,dyn_smem,name\n");
  for (size_t i = 0; i < g_n; i++) {
    const kt_row *r = &g_rows[i];
    fprintf(f, "%llu,%llu,%u,%u,%d,%d,%u,%d,%s\n", (unsigned long long)(r->start - t0),
            (unsigned long long)(r->end - t0), r->stream, r->graph, r->grid_x, r->block_x, r->regs, r->dyn_smem,
            r->name);
  }
  fclose(f);
  fprintf(stderr, "kernel_trace: %zu kernels in %s\n", g_n, path);
  free(g_rows);
}

__attribute__((destructor)) static void kt_at_exit(void) { kt_write(); }

static void kt_record(void) {
  g_recording = 1;
  kt_check(cuptiActivityRegisterCallbacks(kt_buffer_requested, kt_buffer_completed), "registering the buffers");
  /* Concurrent kernels: the records keep kernels of different streams
   * apart instead of serializing them. */
  kt_check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records");
}

static void kt_in_child(void) {
  g_child = 1;
  g_n = 0;
  kt_record();
}

/* The forked workers leave through _exit, which runs no destructor. */
void _exit(int status) {
  kt_write();
  void (*real)(int) = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
  real(status);
  __builtin_unreachable();
}

__attribute__((constructor)) static void kt_start(void) {
  g_match = getenv("KT_MATCH");
  const char *fork_mode = getenv("KT_FORK");
  if (fork_mode && fork_mode[0] == '1') pthread_atfork(NULL, NULL, kt_in_child);
  else kt_record();
}
