/* run_change.c - what differs between two runs (run_change.h). */
#include "run_change.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_format.h"
#include "run_env.h"

enum { VALUE_CAP = 128 };

st_status st_run_driver(st_db *db, const st_run_row *r, int *driver, st_err *err) {
  char drv[32];
  *driver = 0;
  if (st_run_env_get(r->env, "driver", drv, sizeof drv) && atoi(drv) > 0) {
    *driver = atoi(drv);
    return ST_OK;
  }
  int found = 0;
  return st_db_device_driver(db, r->device_id, driver, &found, err);
}

static void append(char *buf, size_t cap, const char *label, const char *a, const char *b) {
  const size_t len = strlen(buf);
  if (len + 1 >= cap) return;
  snprintf(buf + len, cap - len, "%s%s %s -> %s", len ? "; " : "", label, a, b);
}

/* runs.env keys named when both runs recorded them and they differ (the
 * driver is compared with the devices table's as the fallback). */
static const struct {
  const char *key, *label;
  int is_hash;
} ENV_KEYS[] = {
    {"nvrtc", "nvrtc", 0},
    {"templates_hash", "templates", 1},
    {"generator_hash", "generator", 1},
    {"sm_count", "SMs", 0},
};

void st_run_change(const st_run_row *a, int driver_a, const st_run_row *b, int driver_b, char *buf, size_t cap) {
  if (!cap) return;
  buf[0] = '\0';
  char x[VALUE_CAP], y[VALUE_CAP];
  if (a->device_id != b->device_id) {
    snprintf(x, sizeof x, "%lld", (long long)a->device_id);
    snprintf(y, sizeof y, "%lld", (long long)b->device_id);
    append(buf, cap, "card", x, y);
  }
  if (driver_a != driver_b) {
    snprintf(x, sizeof x, "%d", driver_a);
    snprintf(y, sizeof y, "%d", driver_b);
    append(buf, cap, "driver", x, y);
  }
  if (strcmp(a->tool_version, b->tool_version) != 0) append(buf, cap, "tool", a->tool_version, b->tool_version);
  if (strcmp(a->args, b->args) != 0) {
    snprintf(x, sizeof x, "'%s'", a->args);
    snprintf(y, sizeof y, "'%s'", b->args);
    append(buf, cap, "args", x, y);
  }
  for (size_t i = 0; i < sizeof ENV_KEYS / sizeof *ENV_KEYS; i++) {
    if (!st_run_env_get(a->env, ENV_KEYS[i].key, x, sizeof x) || !st_run_env_get(b->env, ENV_KEYS[i].key, y, sizeof y) ||
        strcmp(x, y) == 0)
      continue;
    if (ENV_KEYS[i].is_hash) { /* 8 hex digits name a tree well enough to read */
      x[8] = '\0';
      y[8] = '\0';
    }
    append(buf, cap, ENV_KEYS[i].label, x, y);
  }
}

static void json_pair_str(FILE *out, const char *key, const char *a, const char *b) {
  rpt_json_key(out, key, 0);
  fputc('[', out);
  if (a)
    st_json_str(out, a);
  else
    fputs("null", out);
  fputc(',', out);
  if (b)
    st_json_str(out, b);
  else
    fputs("null", out);
  fputc(']', out);
}

void st_run_change_json(FILE *out, const st_run_row *a, int driver_a, const st_run_row *b, int driver_b) {
  rpt_json_key(out, "card", 1);
  fprintf(out, "[%lld,%lld]", (long long)a->device_id, (long long)b->device_id);
  rpt_json_key(out, "driver_version", 0);
  fprintf(out, "[%d,%d]", driver_a, driver_b);
  json_pair_str(out, "tool_version", a->tool_version, b->tool_version);
  json_pair_str(out, "args", a->args, b->args);
  for (size_t i = 0; i < sizeof ENV_KEYS / sizeof *ENV_KEYS; i++) {
    char x[VALUE_CAP], y[VALUE_CAP];
    const int hx = st_run_env_get(a->env, ENV_KEYS[i].key, x, sizeof x);
    const int hy = st_run_env_get(b->env, ENV_KEYS[i].key, y, sizeof y);
    json_pair_str(out, ENV_KEYS[i].key, hx ? x : NULL, hy ? y : NULL);
  }
}
