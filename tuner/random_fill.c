#include "random_fill.h"

#include <pthread.h>

#include "reference/dtype.h"

uint64_t st_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t st_rand_below(uint64_t *state, uint64_t n) { return n ? st_splitmix64(state) % n : 0; }

/* Fixed-size pieces, each with its own stream, so the bytes do not depend on
 * how pieces are shared among threads. */
#define PIECE ((size_t)1 << 20)

typedef struct fill_job {
  void *dst;
  st_dtype dtype;
  size_t n;
  float lo, hi;
  uint64_t seed;
  int thread, threads;
} fill_job;

static void fill_piece(const fill_job *j, size_t piece) {
  uint64_t s = j->seed ^ (0xa0761d6478bd642fULL * (piece + 1));
  const size_t begin = piece * PIECE, end = begin + PIECE < j->n ? begin + PIECE : j->n;
  const float scale = (j->hi - j->lo) * (1.0f / 16777216.0f);
  for (size_t i = begin; i < end; i++) {
    const float v = j->lo + scale * (float)(st_splitmix64(&s) >> 40);
    if (j->dtype == ST_DTYPE_BF16) ((uint16_t *)j->dst)[i] = st_float_to_bf16(v);
    else if (j->dtype == ST_DTYPE_FP8_E4M3) ((uint8_t *)j->dst)[i] = st_float_to_fp8_e4m3(v);
    else ((float *)j->dst)[i] = v;
  }
}

static void *fill_worker(void *arg) {
  const fill_job *j = arg;
  const size_t pieces = (j->n + PIECE - 1) / PIECE;
  for (size_t p = (size_t)j->thread; p < pieces; p += (size_t)j->threads) fill_piece(j, p);
  return NULL;
}

int st_fill_uniform(void *dst, st_dtype dtype, size_t n, float lo, float hi, uint64_t seed, int threads) {
  if (dtype != ST_DTYPE_BF16 && dtype != ST_DTYPE_FP8_E4M3 && dtype != ST_DTYPE_FP32) return -1;
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  fill_job jobs[64];
  pthread_t tid[64];
  int started = 0;
  for (int t = 0; t < threads; t++)
    jobs[t] = (fill_job){dst, dtype, n, lo, hi, seed, t, threads};
  for (int t = 1; t < threads; t++)
    if (pthread_create(&tid[started], NULL, fill_worker, &jobs[t]) == 0) started++;
    else break;
  /* Pieces of threads that did not start are done here. */
  for (int t = 0; t < threads; t++)
    if (t == 0 || t > started) fill_worker(&jobs[t]);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  return 0;
}
