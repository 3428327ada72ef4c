/* The tuner's case inputs: "q_len:prefix;..." shape fields become
 * cu_seqlens_q and seq_lens, "q_len:prefix*count" repeats an item, and
 * malformed or oversized lists are refused with the field quoted; bound
 * variants get zeroed memory at the alignment their tensor maps need. */
#include <stdlib.h>
#include <string.h>

#include "ops/case_inputs.h"
#include "testutil.h"

typedef struct parsed {
  int32_t *cu, *seq;
  int R, total_q, max_context;
} parsed;

static st_status parse(const char *reqs, parsed *out, st_err *err) {
  memset(out, 0, sizeof *out);
  return st_case_requests(reqs, &out->cu, &out->seq, &out->R, &out->total_q, &out->max_context, err);
}

static void release(parsed *p) {
  free(p->cu);
  free(p->seq);
}

static void test_repeated_items_expand_in_order(void **state) {
  (void)state;
  st_err err = {{0}};
  parsed p;
  assert_int_equal(parse("3:0*2;2:126;1:5000*2", &p, &err), ST_OK);
  assert_int_equal(p.R, 5);
  assert_int_equal(p.total_q, 3 + 3 + 2 + 1 + 1);
  assert_int_equal(p.max_context, 5001);
  const int32_t cu[] = {0, 3, 6, 8, 9, 10}, seq[] = {3, 3, 128, 5001, 5001};
  assert_memory_equal(p.cu, cu, sizeof cu);
  assert_memory_equal(p.seq, seq, sizeof seq);
  release(&p);
  assert_int_equal(parse("1:0*4096", &p, &err), ST_OK);
  assert_int_equal(p.R, 4096);
  assert_int_equal(p.cu[4096], 4096);
  release(&p);
}

static void expect_refused(const char *reqs, const char *fragment) {
  st_err err = {{0}};
  parsed p;
  const st_status s = parse(reqs, &p, &err);
  release(&p);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("reqs='%s': expected refusal with '%s', got status %d: '%s'", reqs, fragment, (int)s, err.msg);
}

static void test_malformed_lists_are_refused(void **state) {
  (void)state;
  const char *bad[] = {"", "3", "3:", ":5", "3:0*", "3:0*0", "3:0*-2", "3:0*2x", "-1:0", "3:-1", "3:0;;1:0", "3:0;"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_refused(bad[i], "is not a list of q_len:prefix[*count]");
  expect_refused("1:0*4000;1:0*97", "lists more than 4096 requests");
  expect_refused("1:0*9223372036854775807", "lists more than 4096 requests");
  /* Lengths past 2^24 tokens, also where q_len + prefix would pass LONG_MAX. */
  const char *huge[] = {"16777216:1",
                        "1:16777216",
                        "9223372036854775807:1",
                        "1:9223372036854775807",
                        "9223372036854775807:9223372036854775807",
                        "99999999999999999999:0"};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
    expect_refused(huge[i], "is not a list of q_len:prefix[*count]");
  expect_refused(NULL, "reqs is missing");
}

static void test_aligned_allocations_are_aligned_and_zeroed(void **state) {
  (void)state;
  const size_t sizes[] = {1, 128, 130, 384, 4000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = st_case_zalloc_aligned(128, sizes[i]);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 128, 0);
    for (size_t k = 0; k < sizes[i]; k++)
      if (p[k]) fail_msg("byte %zu of %zu is %d, not 0", k, sizes[i], p[k]);
    free(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aligned_allocations_are_aligned_and_zeroed),
      cmocka_unit_test(test_repeated_items_expand_in_order),
      cmocka_unit_test(test_malformed_lists_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
