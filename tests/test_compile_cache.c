/* test_compile_cache.c - the tuner's compile results on disk
 * (tuner/compile_cache.c): a round trip of a good and a failed compile,
 * the file's name, and payloads that pass the disk cache's integrity check
 * but are not one of ours, each refused without touching the output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile_cache.h"
#include "disk_cache.h"
#include "testutil.h"

#define HASH "0123456789abcdef0123456789abcdef"

static void name_says_hash_arch_compiler_and_version(void **state) {
  (void)state;
  char path[512];
  st_compile_cache_path("/c", HASH, "sm_90a", "nvrtc 13.0", path, sizeof path);
  assert_string_equal(path, "/c/" HASH ".sm_90a.nvrtc-13.0-sparsetune-" SPARSETUNE_VERSION_STRING ".row");
  st_compile_cache_path("", HASH, "sm_90a", "nvrtc 13.0", path, sizeof path);
  assert_string_equal(path, ""); /* caching off */
  char small[16];
  st_compile_cache_path("/c", HASH, "sm_90a", "nvrtc 13.0", small, sizeof small);
  assert_string_equal(small, ""); /* does not fit */
}

static void good_and_failed_results_round_trip(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, ".row");
  unsigned char cubin[300];
  for (size_t i = 0; i < sizeof cubin; i++) cubin[i] = (unsigned char)(i * 7 + 1);
  st_binary_row b = {.ok = 1,
                     .cubin = cubin,
                     .cubin_size = sizeof cubin,
                     .registers = 168,
                     .spill_bytes = 8,
                     .shared_bytes = 1024,
                     .local_bytes = 16,
                     .compile_ms = 123.5,
                     .log = "ptxas info : Used 168 registers"};
  assert_int_equal(st_compile_cache_put(path, &b), 0);
  st_binary_row r;
  assert_int_equal(st_compile_cache_get(path, HASH, "sm_90a", "nvrtc 13.0", &r), 1);
  assert_string_equal(r.source_hash, HASH);
  assert_string_equal(r.arch, "sm_90a");
  assert_string_equal(r.compiler, "nvrtc 13.0");
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.cubin_size, sizeof cubin);
  assert_memory_equal(r.cubin, cubin, sizeof cubin);
  assert_int_equal(r.registers, 168);
  assert_int_equal(r.spill_bytes, 8);
  assert_int_equal(r.shared_bytes, 1024);
  assert_int_equal(r.local_bytes, 16);
  assert_true(r.compile_ms == 123.5);
  assert_string_equal(r.log, b.log);
  free(r.cubin);
  free(r.log);

  /* A failed compile: no binary, the log says why. */
  st_binary_row f = {.ok = 0, .log = "error: identifier \"x\" is undefined", .compile_ms = 4.0};
  assert_int_equal(st_compile_cache_put(path, &f), 0);
  assert_int_equal(st_compile_cache_get(path, HASH, "sm_90a", "nvrtc 13.0", &r), 1);
  assert_int_equal(r.ok, 0);
  assert_null(r.cubin);
  assert_int_equal(r.cubin_size, 0);
  assert_string_equal(r.log, f.log);
  free(r.log);

  /* A good compile without its binary is not kept. */
  st_binary_row bad = {.ok = 1, .log = ""};
  assert_int_equal(st_compile_cache_put(path, &bad), -1);
  unlink(path);
  assert_int_equal(st_compile_cache_get(path, HASH, "sm_90a", "nvrtc 13.0", &r), 0); /* absent */
}

/* A payload: magic, ok, registers, spills, shared, local, compile_ms, log,
 * cubin, with each length as given (so it can lie). */
static size_t payload(unsigned char *buf, const char *magic, const int ints[5], double ms, uint64_t log_len_field,
                      const char *log, uint64_t cubin_len_field, size_t cubin_bytes) {
  unsigned char *p = buf;
  memcpy(p, magic, 8);
  p += 8;
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 4; k++) *p++ = (unsigned char)((uint32_t)ints[i] >> (8 * k));
  uint64_t bits;
  memcpy(&bits, &ms, sizeof bits);
  for (int k = 0; k < 8; k++) *p++ = (unsigned char)(bits >> (8 * k));
  for (int k = 0; k < 8; k++) *p++ = (unsigned char)(log_len_field >> (8 * k));
  const size_t log_bytes = strlen(log);
  memcpy(p, log, log_bytes); // NOLINT(bugprone-not-null-terminated-result): the file holds the bytes, no NUL
  p += log_bytes;
  for (int k = 0; k < 8; k++) *p++ = (unsigned char)(cubin_len_field >> (8 * k));
  memset(p, 0x5a, cubin_bytes);
  p += cubin_bytes;
  return (size_t)(p - buf);
}

static void foreign_payloads_are_refused(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, ".row");
  static const int good[5] = {1, 32, 0, 0, 0};
  static const int neg[5] = {1, -1, 0, 0, 0};
  static const int ok2[5] = {2, 32, 0, 0, 0};
  unsigned char buf[1024];
  const struct {
    const char *what;
    const char *magic;
    const int *ints;
    double ms;
    uint64_t log_len;
    uint64_t cubin_len;
    size_t cubin_bytes;
  } cases[] = {
      {"another magic", "STROW999", good, 1.0, 3, 64, 64},
      {"a log longer than the file", "STROW001", good, 1.0, 1u << 30, 64, 64},
      {"a cubin length that is not the rest", "STROW001", good, 1.0, 3, 65, 64},
      {"trailing bytes", "STROW001", good, 1.0, 3, 60, 64},
      {"ok neither 0 nor 1", "STROW001", ok2, 1.0, 3, 64, 64},
      {"ok without a binary", "STROW001", good, 1.0, 3, 0, 0},
      {"a negative count", "STROW001", neg, 1.0, 3, 64, 64},
      {"a compile time that is not a number", "STROW001", good, NAN, 3, 64, 64},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_t n = payload(buf, cases[i].magic, cases[i].ints, cases[i].ms, cases[i].log_len, "log",
                             cases[i].cubin_len, cases[i].cubin_bytes);
    assert_int_equal(st_disk_cache_write(path, buf, n), 0);
    st_binary_row r;
    memset(&r, 0xab, sizeof r);
    if (st_compile_cache_get(path, HASH, "sm_90a", "nvrtc 13.0", &r) != 0) fail_msg("%s: accepted", cases[i].what);
    const unsigned char *bytes = (const unsigned char *)&r;
    for (size_t k = 0; k < sizeof r; k++)
      if (bytes[k] != 0xab) fail_msg("%s: the output was touched", cases[i].what);
  }
  /* The well-formed one the cases vary passes. */
  const size_t n = payload(buf, "STROW001", good, 1.0, 3, "log", 64, 64);
  assert_int_equal(st_disk_cache_write(path, buf, n), 0);
  st_binary_row r;
  assert_int_equal(st_compile_cache_get(path, HASH, "sm_90a", "nvrtc 13.0", &r), 1);
  assert_int_equal(r.cubin_size, 64);
  assert_string_equal(r.log, "log");
  free(r.cubin);
  free(r.log);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(name_says_hash_arch_compiler_and_version),
      cmocka_unit_test(good_and_failed_results_round_trip),
      cmocka_unit_test(foreign_payloads_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
