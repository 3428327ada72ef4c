#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_driver.h"

uint64_t st_test_seed(const char *test_name) {
  const char *env = getenv("ST_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  printf("# %s: seed %llu (replay with ST_TEST_SEED=%llu)\n", test_name, (unsigned long long)seed,
         (unsigned long long)seed);
  return seed;
}

uint64_t st_rand_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double st_rand_uniform(uint64_t *state, double lo, double hi) {
  return lo + (hi - lo) * ((double)(st_rand_next(state) >> 11) * (1.0 / 9007199254740992.0));
}

int64_t st_rand_int(uint64_t *state, int64_t lo, int64_t hi) {
  return lo + (int64_t)(st_rand_next(state) % (uint64_t)(hi - lo + 1));
}

const char *st_test_compile_only(void) {
  const char *arch = getenv("ST_TEST_COMPILE_ONLY");
  return arch && *arch ? arch : NULL;
}

int st_test_require_gpu(void) {
  const st_cu *cu = NULL;
  st_err err = {{0}};
  if (st_test_compile_only()) return 0; /* the variant tests compile, then stop */
  if (st_cu_load(&cu, &err) != ST_OK) {
    printf("SKIPPED: %s\n", err.msg);
    return ST_TEST_SKIP;
  }
  return 0;
}

void st_test_temp_path(char *buf, size_t cap, const char *suffix) {
  const char *dir = getenv("TMPDIR");
  static unsigned counter;
  snprintf(buf, cap, "%s/st_test_%d_%u%s", dir ? dir : "/tmp", (int)getpid(), counter++, suffix);
}

st_tensor st_test_tensor(st_dtype dt, int ndim, const int64_t *shape, void *data) {
  st_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = stride;
    stride *= shape[i];
  }
  return t;
}

void st_test_expect_near(double got, double want, double eps, const char *file, int line) {
  if (!(fabs(got - want) <= eps)) fail_msg("%s:%d: %.17g is not within %g of %.17g", file, line, got, eps, want);
}
