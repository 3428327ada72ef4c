/* error.h - the error-message buffer every internal function fills on failure.
 *
 * Internal functions return an st_status and, when it is not ST_OK, write a
 * message naming the argument and value at fault into an st_err the caller
 * passed (which may be NULL when the caller does not want the text). */
#ifndef ST_ERROR_H
#define ST_ERROR_H

#include "sparsetune.h"

#define ST_ERR_MSG_MAX 512

typedef struct st_err {
  char msg[ST_ERR_MSG_MAX];
} st_err;

/* Formats the message into `err` if it is not NULL (printf's rules,
 * truncated to fit). */
void st_err_format(st_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats the message into `err` (if not NULL) and is `status`, so a
 * failure reads `return st_fail(err, ST_ERR_INVALID_ARG, "topk=%d ...", k);`.
 * A macro, not a function in error.c, so that the status is visible where
 * it is returned: a static analyzer then follows a failure as a failure,
 * not as an unknown value that might be ST_OK (clang-tidy, .clang-tidy). */
#define st_fail(err, status, ...) (st_err_format((err), __VA_ARGS__), (st_status)(status))

#endif
