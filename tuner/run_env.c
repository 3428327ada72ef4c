/* run_env.c - the JSON text of runs.env (run_env.h). */
#include "run_env.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "compile.h"
#include "st_db.h"

_Static_assert(sizeof(((st_run_row *)0)->env) == ST_RUN_ENV_CAP, "runs.env and run_env.h disagree on its size");

/* ---- the tree hash ------------------------------------------------------ */

typedef struct path_list {
  char **paths; /* relative to the root, owned */
  int n, cap;
} path_list;

static void path_list_free(path_list *l) {
  for (int i = 0; i < l->n; i++) free(l->paths[i]);
  free(l->paths);
}

static st_status path_list_add(path_list *l, const char *rel, st_err *err) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    char **p = realloc(l->paths, (size_t)cap * sizeof *p);
    if (!p) return st_fail(err, ST_ERR_NOMEM, "out of host memory listing files");
    l->paths = p;
    l->cap = cap;
  }
  if (!(l->paths[l->n] = strdup(rel))) return st_fail(err, ST_ERR_NOMEM, "out of host memory listing files");
  l->n++;
  return ST_OK;
}

/* Every regular file below root/rel ("" for root itself), dot-files left
 * out (an installed tree has no .clang-format; its hash must not differ). */
static st_status list_files(const char *root, const char *rel, int depth, path_list *l, st_err *err) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
  if (depth > 32) return st_fail(err, ST_ERR_INVALID_ARG, "folder '%s' is nested more than 32 deep", dir);
  DIR *d = opendir(dir);
  if (!d) return st_fail(err, ST_ERR_INVALID_ARG, "folder '%s' cannot be read: %s", dir, strerror(errno));
  st_status st = ST_OK;
  struct dirent *e;
  while (st == ST_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char sub[4096], full[8192];
    int n = snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    if (n < 0 || (size_t)n >= sizeof sub) {
      st = st_fail(err, ST_ERR_INVALID_ARG, "a path below '%s' is longer than %zu bytes", root, sizeof sub - 1);
      break;
    }
    snprintf(full, sizeof full, "%s/%s", root, sub);
    struct stat sb;
    if (stat(full, &sb) != 0)
      st = st_fail(err, ST_ERR_INVALID_ARG, "'%s' cannot be read: %s", full, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
      st = list_files(root, sub, depth + 1, l, err);
    else if (S_ISREG(sb.st_mode))
      st = path_list_add(l, sub, err);
  }
  closedir(d);
  return st;
}

static int cmp_paths(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* st_hash_hex of the file at `path`. */
static st_status hash_file(const char *path, char out[ST_HASH_HEX_LEN + 1], st_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return st_fail(err, ST_ERR_INVALID_ARG, "'%s' cannot be read: %s", path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  st_status st = ST_OK;
  for (;;) {
    if (len == cap) {
      cap = cap ? 2 * cap : 1 << 16;
      char *p = realloc(buf, cap);
      if (!p) {
        st = st_fail(err, ST_ERR_NOMEM, "out of host memory reading '%s'", path);
        break;
      }
      buf = p;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) st = st_fail(err, ST_ERR_INVALID_ARG, "'%s' cannot be read", path);
      break;
    }
  }
  fclose(f);
  if (st == ST_OK) st_hash_hex(buf ? buf : "", len, out);
  free(buf);
  return st;
}

st_status st_run_env_tree_hash(const char *dir, char out[ST_HASH_HEX_LEN + 1], st_err *err) {
  if (!dir || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_run_env_tree_hash: NULL argument");
  path_list l = {0};
  char *lines = NULL;
  st_status st = list_files(dir, "", 0, &l, err);
  if (st != ST_OK) goto cleanup;
  if (l.n > 1) qsort(l.paths, (size_t)l.n, sizeof *l.paths, cmp_paths); /* an empty folder: no list */
  size_t cap = 1, used = 0;
  for (int i = 0; i < l.n; i++) cap += strlen(l.paths[i]) + ST_HASH_HEX_LEN + 2;
  if (!(lines = malloc(cap))) {
    st = st_fail(err, ST_ERR_NOMEM, "out of host memory hashing '%s'", dir);
    goto cleanup;
  }
  for (int i = 0; i < l.n && st == ST_OK; i++) {
    char full[8192], h[ST_HASH_HEX_LEN + 1];
    snprintf(full, sizeof full, "%s/%s", dir, l.paths[i]);
    if ((st = hash_file(full, h, err)) == ST_OK)
      used += (size_t)snprintf(lines + used, cap - used, "%s\t%s\n", l.paths[i], h);
  }
  if (st == ST_OK) st_hash_hex(lines, used, out);
cleanup:
  free(lines);
  path_list_free(&l);
  return st;
}

/* ---- the JSON text ------------------------------------------------------ */

typedef struct jbuf {
  char *p;
  size_t cap, len;
  int overflow;
} jbuf;

static void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jb_printf(jbuf *b, const char *fmt, ...) {
  if (b->overflow) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= b->cap - b->len)
    b->overflow = 1;
  else
    b->len += (size_t)n;
}

/* `,"key":` then the string `s` quoted and escaped. */
static void jb_str(jbuf *b, const char *key, const char *s) {
  jb_printf(b, "%s\"%s\":\"", b->len > 1 ? "," : "", key);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      jb_printf(b, "\\%c", *c);
    else if (*c < 0x20)
      jb_printf(b, "\\u%04x", *c);
    else
      jb_printf(b, "%c", *c);
  }
  jb_printf(b, "\"");
}

/* `,"key":` then `raw`, a JSON number or null as is. */
static void jb_raw(jbuf *b, const char *key, const char *raw) {
  jb_printf(b, "%s\"%s\":%s", b->len > 1 ? "," : "", key, raw);
}

st_status st_run_env_json(const st_run_env_in *in, char *out, size_t cap, st_err *err) {
  if (!in || !out || cap < 3 || !in->generator_dir || !in->templates_dir || !in->suite)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_run_env_json: NULL argument or no room");
  char gen_hash[ST_HASH_HEX_LEN + 1], tpl_hash[ST_HASH_HEX_LEN + 1], nvrtc[32] = "", num[32];
  st_status st = st_run_env_tree_hash(in->generator_dir, gen_hash, err);
  if (st == ST_OK) st = st_run_env_tree_hash(in->templates_dir, tpl_hash, err);
  if (st != ST_OK) return st;
  st_err ignored = {{0}};
  /* "NVRTC 13.0" -> "13.0"; left out where NVRTC cannot say. */
  if (st_compile_compiler(nvrtc, &ignored) == ST_OK && strncmp(nvrtc, "NVRTC ", 6) == 0)
    memmove(nvrtc, nvrtc + 6, strlen(nvrtc + 6) + 1);
  else
    nvrtc[0] = '\0';
  /* The driver in use now, as the card's probe read it: the devices
   * table's row is overwritten when a card meets a new one, this value is
   * what the run saw. Never asked here: a process that initializes the
   * driver before it forks leaves its children a driver they cannot use
   * (CUDA_ERROR_NOT_INITIALIZED), and tune and bench time in forked
   * workers. */
  const int driver = in->dev ? in->dev->driver_version : 0;

  jbuf b = {out, cap, 0, 0};
  jb_printf(&b, "{");
  jb_str(&b, "tool_version", ST_VERSION);
  if (driver > 0) snprintf(num, sizeof num, "%d", driver);
  jb_raw(&b, "driver", driver > 0 ? num : "null");
  if (nvrtc[0]) jb_str(&b, "nvrtc", nvrtc);
  if (in->dev) {
    jb_str(&b, "gpu_name", in->dev->name);
    jb_str(&b, "gpu_uuid", in->dev->uuid);
    snprintf(num, sizeof num, "%d", in->dev->sm_count);
    jb_raw(&b, "sm_count", num);
  }
  jb_str(&b, "generator_hash", gen_hash);
  jb_str(&b, "templates_hash", tpl_hash);
  jb_str(&b, "suite", in->suite);
  snprintf(num, sizeof num, "%llu", in->seed);
  jb_raw(&b, "seed", num);
  jb_printf(&b, "}");
  if (b.overflow) {
    out[0] = '\0';
    return st_fail(err, ST_ERR_INVALID_ARG, "the run's environment does not fit in %zu bytes", cap);
  }
  return ST_OK;
}

/* ---- reading it back ---------------------------------------------------- */

/* Through SQLite's JSON functions, on a private in-memory connection a
 * call (reports read a few keys a run): no JSON parser of our own. */
int st_run_env_get(const char *env, const char *key, char *out, size_t cap) {
  if (!env || !key || !out || cap == 0) return 0;
  out[0] = '\0';
  char path[160];
  const int n = snprintf(path, sizeof path, "$.\"%s\"", key);
  if (n < 0 || (size_t)n >= sizeof path || strchr(key, '"')) return 0;
  sqlite3 *conn = NULL;
  sqlite3_stmt *s = NULL;
  int found = 0;
  if (sqlite3_open_v2(":memory:", &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(conn,
                         "SELECT json_type(?1, ?2), json_extract(?1, ?2) "
                         "WHERE json_valid(?1) AND json_type(?1) = 'object'",
                         -1, &s, NULL) == SQLITE_OK &&
      sqlite3_bind_text(s, 1, env, -1, SQLITE_STATIC) == SQLITE_OK &&
      sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
      sqlite3_column_type(s, 0) != SQLITE_NULL) {
    const char *type = (const char *)sqlite3_column_text(s, 0);
    /* true, false and null as JSON writes them; strings unescaped; numbers,
     * objects and arrays as text. */
    const char *text = !strcmp(type, "true") || !strcmp(type, "false") || !strcmp(type, "null")
                           ? type
                           : (const char *)sqlite3_column_text(s, 1);
    snprintf(out, cap, "%s", text ? text : "");
    found = 1;
  }
  sqlite3_finalize(s);
  sqlite3_close(conn);
  return found;
}
