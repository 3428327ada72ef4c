#include "params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

st_status st_params_set(st_params *ps, const char *key, const char *val, st_err *err) {
  if (strlen(key) >= ST_PARAM_KEY_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "parameter name '%.40s...' is longer than %d bytes", key,
                   ST_PARAM_KEY_MAX - 1);
  if (strlen(val) >= ST_PARAM_VAL_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "value of parameter '%s' is longer than %d bytes", key,
                   ST_PARAM_VAL_MAX - 1);
  for (int i = 0; i < ps->n; i++) {
    if (strcmp(ps->p[i].key, key) == 0) {
      snprintf(ps->p[i].val, ST_PARAM_VAL_MAX, "%s", val);
      return ST_OK;
    }
  }
  if (ps->n >= ST_PARAMS_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "more than %d parameters (adding '%s')", ST_PARAMS_MAX, key);
  snprintf(ps->p[ps->n].key, ST_PARAM_KEY_MAX, "%s", key);
  snprintf(ps->p[ps->n].val, ST_PARAM_VAL_MAX, "%s", val);
  ps->n++;
  return ST_OK;
}

st_status st_params_set_int(st_params *ps, const char *key, long long val, st_err *err) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", val);
  return st_params_set(ps, key, buf, err);
}

const char *st_params_get(const st_params *ps, const char *key) {
  for (int i = 0; i < ps->n; i++)
    if (strcmp(ps->p[i].key, key) == 0) return ps->p[i].val;
  return NULL;
}

int st_params_whole_number(const char *text, long long *out) {
  char *end = NULL;
  errno = 0;
  const long long x = strtoll(text, &end, 10);
  if (errno || end == text || *end != '\0') return 0;
  *out = x;
  return 1;
}

st_status st_params_get_int(const st_params *ps, const char *key, long long lo, long long hi,
                            long long *out, st_err *err) {
  const char *v = st_params_get(ps, key);
  if (!v) return st_fail(err, ST_ERR_INVALID_ARG, "parameter '%s' is missing", key);
  long long x = 0;
  if (!st_params_whole_number(v, &x))
    return st_fail(err, ST_ERR_INVALID_ARG, "parameter %s='%s' is not a whole number", key, v);
  if (x < lo || x > hi)
    return st_fail(err, ST_ERR_INVALID_ARG, "parameter %s=%lld is outside %lld..%lld", key, x, lo, hi);
  *out = x;
  return ST_OK;
}

static int is_json_int(const char *s) {
  const char *p = s;
  if (*p == '-') p++;
  if (*p < '0' || *p > '9') return 0;
  if (*p == '0' && p[1] != '\0') return 0; /* no leading zeros in JSON numbers */
  for (; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

static int cmp_param(const void *a, const void *b) {
  return strcmp(((const st_param *)a)->key, ((const st_param *)b)->key);
}

/* Appends `s` as a JSON string body (quotes not included). */
static int put_escaped(char *buf, size_t cap, size_t *len, const char *s) {
  for (; *s; s++) {
    char tmp[8];
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') snprintf(tmp, sizeof tmp, "\\%c", c);
    else if (c < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", c);
    else snprintf(tmp, sizeof tmp, "%c", c);
    size_t n = strlen(tmp);
    if (*len + n >= cap) return -1;
    memcpy(buf + *len, tmp, n + 1); /* with its terminator: the buffer stays a string */
    *len += n;
  }
  return 0;
}

static int put_raw(char *buf, size_t cap, size_t *len, const char *s) {
  size_t n = strlen(s);
  if (*len + n >= cap) return -1;
  memcpy(buf + *len, s, n + 1);
  *len += n;
  return 0;
}

int st_params_to_json(const st_params *ps, char *buf, size_t cap) {
  st_params sorted = *ps;
  qsort(sorted.p, (size_t)sorted.n, sizeof sorted.p[0], cmp_param);
  size_t len = 0;
  if (cap == 0 || put_raw(buf, cap, &len, "{")) return -1;
  for (int i = 0; i < sorted.n; i++) {
    const st_param *p = &sorted.p[i];
    if ((i && put_raw(buf, cap, &len, ",")) || put_raw(buf, cap, &len, "\"") ||
        put_escaped(buf, cap, &len, p->key) || put_raw(buf, cap, &len, "\":"))
      return -1;
    if (is_json_int(p->val)) {
      if (put_raw(buf, cap, &len, p->val)) return -1;
    } else if (put_raw(buf, cap, &len, "\"") || put_escaped(buf, cap, &len, p->val) ||
               put_raw(buf, cap, &len, "\"")) {
      return -1;
    }
  }
  if (put_raw(buf, cap, &len, "}")) return -1;
  buf[len] = '\0';
  return (int)len;
}

st_status st_params_parse_key(const char *key, st_params *out, st_err *err) {
  out->n = 0;
  const char *colon = strchr(key, ':');
  const char *p = colon ? colon + 1 : key;
  while (*p) {
    const char *comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char field[ST_PARAM_KEY_MAX + ST_PARAM_VAL_MAX + 2];
    if (len >= sizeof field) return st_fail(err, ST_ERR_INVALID_ARG, "key field '%.40s...' is too long", p);
    memcpy(field, p, len);
    field[len] = '\0';
    char *eq = strchr(field, '=');
    if (!eq || eq == field) return st_fail(err, ST_ERR_INVALID_ARG, "key field '%s' is not name=value", field);
    *eq = '\0';
    st_status s = st_params_set(out, field, eq + 1, err);
    if (s != ST_OK) return s;
    p += len + (comma ? 1 : 0);
  }
  return ST_OK;
}
