/* report_capture.h - a report's output captured in memory (open_memstream)
 * for the report tests to search: capture_open, pass c.f as the report's
 * FILE *, capture_close, then read c.buf (free it). */
#ifndef ST_REPORT_CAPTURE_H
#define ST_REPORT_CAPTURE_H

#include <stdio.h>

#include "testutil.h"

typedef struct capture {
  char *buf;
  size_t size;
  FILE *f;
} capture;

static inline void capture_open(capture *c) {
  c->buf = NULL;
  c->size = 0;
  c->f = open_memstream(&c->buf, &c->size);
  assert_non_null(c->f);
}

static inline void capture_close(capture *c) {
  assert_int_equal(fclose(c->f), 0);
  c->f = NULL;
}

#endif
