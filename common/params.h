/* params.h - a variant's or shape's parameters as an ordered key/value list.
 *
 * Parameters travel between the Lua generator, the database (as canonical
 * JSON objects) and the C launchers. This list is the C form: small, fixed
 * size, no allocation, values kept as text and converted on lookup. */
#ifndef ST_PARAMS_H
#define ST_PARAMS_H

#include "error.h"

#define ST_PARAMS_MAX 32
#define ST_PARAM_KEY_MAX 32
#define ST_PARAM_VAL_MAX 64

typedef struct st_param {
  char key[ST_PARAM_KEY_MAX];
  char val[ST_PARAM_VAL_MAX];
} st_param;

typedef struct st_params {
  int n;
  st_param p[ST_PARAMS_MAX];
} st_params;

/* Adds or replaces `key`. Fails on a full list or a too-long key or value. */
st_status st_params_set(st_params *ps, const char *key, const char *val, st_err *err);
st_status st_params_set_int(st_params *ps, const char *key, long long val, st_err *err);

/* The value of `key`, or NULL when absent. */
const char *st_params_get(const st_params *ps, const char *key);

/* 1 if `text` is a whole decimal number (all of it), with its value in
 * *out; else 0. */
int st_params_whole_number(const char *text, long long *out);

/* Reads `key` as a whole decimal number in [lo, hi]; a missing key, text
 * that is not a number, or a value outside the range is an error that names
 * the key and value. */
st_status st_params_get_int(const st_params *ps, const char *key, long long lo,
                            long long hi, long long *out, st_err *err);

/* Writes the canonical JSON object of the list: keys sorted bytewise, values
 * that are decimal integers written bare, all others as JSON strings. Returns
 * the length written (excluding NUL) or -1 if `cap` is too small. */
int st_params_to_json(const st_params *ps, char *buf, size_t cap);

/* Reads the fields of a canonical key "op:k1=v1,k2=v2" (the part after the
 * first ':'; the whole text if there is none) into `out`. */
st_status st_params_parse_key(const char *key, st_params *out, st_err *err);

#endif
