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

/* Formats the message into `err` (if not NULL) and returns `status`, so a
 * failure reads `return st_fail(err, ST_ERR_INVALID_ARG, "topk=%d ...", k);`. */
st_status st_fail(st_err *err, st_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
