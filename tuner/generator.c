/* generator.c - runs the Lua generator (generator/main.lua) in an embedded
 * Lua 5.4 state, one per st_gen, and converts its answers to C structs.
 *
 * Every Lua interaction runs inside lua_pcall: each public function packs
 * its arguments and results into a small context struct and runs a C
 * function in protected mode. A Lua error (bad suite name, template error,
 * a module that does not parse, out of memory) unwinds to that pcall; its
 * message, on one line, ends up in the caller's st_err, and whatever the
 * context had allocated is freed by the public function. No state outside
 * the st_gen. */
#include "generator.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "ops/op_list.h"

struct st_gen {
  lua_State *L;
  int instance;         /* registry reference of the table main.lua's new() returned */
  char **ops, **suites; /* names, owned */
  int nops, nsuites;
  char generator_dir[PATH_MAX], templates_dir[PATH_MAX]; /* as located at open */
};

/* ---- small helpers ------------------------------------------------------ */

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The installed tree beside the running binary, <folder of
 * /proc/self/exe>/ST_DATA_FROM_BIN (../share/sparsetune from bin/), goes to
 * `out` (canonical where it exists); 1 if it exists. A binary in its build
 * tree has none. */
static int installed_root(char *out, size_t cap) {
  char exe[PATH_MAX];
  out[0] = '\0';
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return 0;
  *slash = '\0';
  const int len = snprintf(out, cap, "%s/%s", exe, ST_DATA_FROM_BIN);
  if (len < 0 || (size_t)len >= cap) {
    out[0] = '\0';
    return 0;
  }
  if (!is_dir(out)) return 0;
  char *canonical = realpath(out, NULL); /* the path without its "../" */
  if (canonical && strlen(canonical) < cap) snprintf(out, cap, "%s", canonical);
  free(canonical);
  return 1;
}

st_status st_gen_locate(const char *explicit, const char *sub, char *out, size_t cap, const char **why, st_err *err) {
  const char *home = getenv("SPARSETUNE_HOME");
  char installed[PATH_MAX] = "";
  int n, from_source = 0;
  if (explicit) {
    *why = "as given";
    n = snprintf(out, cap, "%s", explicit);
  } else if (home && *home) {
    *why = "from $SPARSETUNE_HOME";
    n = snprintf(out, cap, "%s/%s", home, sub);
  } else if (installed_root(installed, sizeof installed)) {
    *why = "installed beside the binary";
    n = snprintf(out, cap, "%s/%s", installed, sub);
  } else {
    *why = "from the source tree";
    from_source = 1;
    n = snprintf(out, cap, "%s/%s", ST_SOURCE_DIR, sub);
  }
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "%s directory path is too long", sub);
  if (is_dir(out)) return ST_OK;
  if (from_source && installed[0])
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "%s directory '%s' does not exist (%s; nor is there an installed tree at '%s')", sub, out, *why,
                   installed);
  return st_fail(err, ST_ERR_INVALID_ARG, "%s directory '%s' does not exist (%s)", sub, out, *why);
}

/* The message handler: the error as text (an error object that is not a
 * string says what it is). No traceback: the message alone goes to st_err,
 * and Lua's messages already name the file and line where that helps. */
static int error_text(lua_State *L) {
  if (!lua_tostring(L, 1)) lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  return 1;
}

/* Lua's message `msg` on one line in out[cap]: `require` puts the reason a
 * module did not load ("suites.lua:42: '}' expected near ...") on a line of
 * its own after "error loading module ... from file ...:", and that line is
 * what says what to fix. A line break and the indentation after it become
 * one space. */
static void one_line(const char *msg, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = msg; *p && n + 1 < cap; p++) {
    if (*p != '\n') {
      out[n++] = *p;
      continue;
    }
    while (p[1] == '\t' || p[1] == ' ') p++;
    out[n++] = ' ';
  }
  while (n > 0 && out[n - 1] == ' ') n--;
  out[n] = '\0';
}

/* Runs `fn(ctx)` in protected mode; on error, Lua's message goes to `err`
 * on one line. Leaves the stack as it found it. */
static st_status protected_call(st_gen *g, lua_CFunction fn, void *ctx, st_err *err) {
  lua_State *L = g->L;
  const int top = lua_gettop(L);
  lua_pushcfunction(L, error_text);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, ctx);
  const int rc = lua_pcall(L, 1, 0, top + 1);
  st_status s = ST_OK;
  if (rc != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    char text[ST_ERR_MSG_MAX];
    one_line(msg ? msg : "(no message)", text, sizeof text);
    s = st_fail(err, rc == LUA_ERRMEM ? ST_ERR_NOMEM : ST_ERR_INVALID_ARG, "generator: %s", text);
  }
  lua_settop(L, top);
  return s;
}

/* Raises a Lua error with a formatted message (lua_pushfstring's formats:
 * %s %d %f %p %c %%); never returns, which luaL_error does not declare. */
static _Noreturn void gen_raise(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void gen_raise(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_error(L);
  abort(); /* not reached: lua_error unwinds to the protected call */
}

/* Pushes the generator function `name` (called without self). */
static void push_method(lua_State *L, int instance, const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, instance);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

/* Pushes a params list as a table of text values. */
static void push_params(lua_State *L, const st_params *ps) {
  lua_createtable(L, 0, ps->n);
  for (int i = 0; i < ps->n; i++) {
    lua_pushstring(L, ps->p[i].val);
    lua_setfield(L, -2, ps->p[i].key);
  }
}

static int cmp_param(const void *a, const void *b) {
  return strcmp(((const st_param *)a)->key, ((const st_param *)b)->key);
}

/* The table at `idx` as params: string keys; integer values as decimal
 * text, strings as they are; sorted by key. Raises a Lua error otherwise. */
static void to_params(lua_State *L, int idx, st_params *out, const char *what) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  memset(out, 0, sizeof *out);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING) gen_raise(L, "%s has a parameter name that is not a string", what);
    const char *key = lua_tostring(L, -2);
    char val[ST_PARAM_VAL_MAX + 1];
    if (lua_isinteger(L, -1))
      snprintf(val, sizeof val, "%lld", (long long)lua_tointeger(L, -1));
    else if (lua_type(L, -1) == LUA_TSTRING)
      snprintf(val, sizeof val, "%s", lua_tostring(L, -1));
    else if (lua_type(L, -1) == LUA_TNUMBER) /* a measured fact such as peer_us */
      snprintf(val, sizeof val, "%.10g", (double)lua_tonumber(L, -1));
    else
      gen_raise(L, "%s parameter '%s' is a %s, not a number or string", what, key, luaL_typename(L, -1));
    st_err e = {{0}};
    if (st_params_set(out, key, val, &e) != ST_OK) gen_raise(L, "%s: %s", what, e.msg);
    lua_pop(L, 1);
  }
  qsort(out->p, (size_t)out->n, sizeof out->p[0], cmp_param);
}

/* Copies the string field `name` of the table at `idx` into buf[cap]. */
static void get_string(lua_State *L, int idx, const char *name, char *buf, size_t cap, const char *what) {
  lua_getfield(L, idx, name);
  size_t len = 0;
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (!s) gen_raise(L, "%s has no string field '%s'", what, name);
  if (len >= cap) gen_raise(L, "%s field '%s' is longer than %d bytes: %s", what, name, (int)cap - 1, s);
  memcpy(buf, s, len + 1);
  lua_pop(L, 1);
}

/* ---- open / close ------------------------------------------------------- */

typedef struct open_ctx {
  st_gen *g;
  const char *main_path, *package_path, *templates_dir;
} open_ctx;

/* The names the array at the top holds, into a malloc'ed array in *out
 * (registered in g as soon as allocated, so close frees them). */
static void take_names(lua_State *L, char ***out, int *n) {
  luaL_checktype(L, -1, LUA_TTABLE);
  const int count = (int)luaL_len(L, -1);
  *out = calloc((size_t)count + 1, sizeof **out);
  if (!*out) gen_raise(L, "out of host memory");
  for (int i = 0; i < count; i++) {
    lua_rawgeti(L, -1, i + 1);
    const char *s = lua_tostring(L, -1);
    if (!s) gen_raise(L, "name %d is not a string", i + 1);
    (*out)[i] = strdup(s);
    if (!(*out)[i]) gen_raise(L, "out of host memory");
    *n = i + 1;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}


/* The runtime's one list of ops (ops/op_list.h), as a Lua array: the
 * generator loads the module of each. */
static void push_op_names(lua_State *L) {
#define ST_OP_NAME(name, NAME) #name,
  static const char *const names[] = {ST_OP_LIST(ST_OP_NAME)};
#undef ST_OP_NAME
  lua_createtable(L, (int)(sizeof names / sizeof names[0]), 0);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}
static int open_protected(lua_State *L) {
  const open_ctx *c = lua_touserdata(L, 1);
  /* No os, io is needed for reading templates, no debug or coroutine. */
  static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},        {LUA_LOADLIBNAME, luaopen_package},
                                  {LUA_TABLIBNAME, luaopen_table},  {LUA_IOLIBNAME, luaopen_io},
                                  {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
                                  {LUA_UTF8LIBNAME, luaopen_utf8},  {NULL, NULL}};
  for (const luaL_Reg *lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  lua_getglobal(L, LUA_LOADLIBNAME);
  lua_pushstring(L, c->package_path);
  lua_setfield(L, -2, "path");
  lua_pushliteral(L, "");
  lua_setfield(L, -2, "cpath");
  lua_pop(L, 1);

  if (luaL_loadfile(L, c->main_path) != LUA_OK) lua_error(L);
  lua_call(L, 0, 1);
  if (lua_type(L, -1) != LUA_TTABLE) gen_raise(L, "%s did not return a table", c->main_path);
  lua_getfield(L, -1, "new");
  lua_pushstring(L, c->templates_dir);
  push_op_names(L);
  lua_call(L, 2, 1);
  if (lua_type(L, -1) != LUA_TTABLE) gen_raise(L, "%s: new() did not return a table", c->main_path);
  lua_pushvalue(L, -1);
  c->g->instance = luaL_ref(L, LUA_REGISTRYINDEX);

  lua_getfield(L, -1, "ops");
  lua_call(L, 0, 1);
  take_names(L, &c->g->ops, &c->g->nops);
  lua_getfield(L, -1, "suites");
  lua_call(L, 0, 1);
  take_names(L, &c->g->suites, &c->g->nsuites);
  return 0;
}

st_status st_gen_open(const char *generator_dir, const char *templates_dir, st_gen **out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_open: out is NULL");
  *out = NULL;
  char gen_dir[PATH_MAX], tpl_dir[PATH_MAX], main_path[PATH_MAX + 16], package_path[PATH_MAX + 16];
  const char *why;
  st_status s;
  if ((s = st_gen_locate(generator_dir, "generator", gen_dir, sizeof gen_dir, &why, err)) != ST_OK) return s;
  if ((s = st_gen_locate(templates_dir, "templates", tpl_dir, sizeof tpl_dir, &why, err)) != ST_OK) return s;
  if (strpbrk(gen_dir, ";?"))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "generator directory '%s' contains ';' or '?', which Lua's "
                   "package.path cannot hold",
                   gen_dir);
  snprintf(main_path, sizeof main_path, "%s/main.lua", gen_dir);
  snprintf(package_path, sizeof package_path, "%s/?.lua", gen_dir);
  if (!is_file(main_path)) return st_fail(err, ST_ERR_INVALID_ARG, "generator directory '%s' has no main.lua", gen_dir);

  st_gen *g = calloc(1, sizeof *g);
  if (!g) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  g->instance = LUA_NOREF;
  snprintf(g->generator_dir, sizeof g->generator_dir, "%s", gen_dir);
  snprintf(g->templates_dir, sizeof g->templates_dir, "%s", tpl_dir);
  g->L = luaL_newstate();
  if (!g->L) {
    free(g);
    return st_fail(err, ST_ERR_NOMEM, "cannot create a Lua state (out of memory)");
  }
  open_ctx c = {g, main_path, package_path, tpl_dir};
  if ((s = protected_call(g, open_protected, &c, err)) != ST_OK) {
    st_gen_close(g);
    return s;
  }
  *out = g;
  return ST_OK;
}

const char *st_gen_generator_dir(const st_gen *g) { return g ? g->generator_dir : NULL; }
const char *st_gen_templates_dir(const st_gen *g) { return g ? g->templates_dir : NULL; }

static void free_names(char **names, int n) {
  if (!names) return;
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

void st_gen_close(st_gen *g) {
  if (!g) return;
  if (g->L) lua_close(g->L);
  free_names(g->ops, g->nops);
  free_names(g->suites, g->nsuites);
  free(g);
}

st_status st_gen_ops(st_gen *g, const char ***names, int *n, st_err *err) {
  if (!g || !names || !n) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_ops: NULL argument");
  *names = (const char **)g->ops;
  *n = g->nops;
  return ST_OK;
}

st_status st_gen_suites(st_gen *g, const char ***names, int *n, st_err *err) {
  if (!g || !names || !n) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_suites: NULL argument");
  *names = (const char **)g->suites;
  *n = g->nsuites;
  return ST_OK;
}

/* ---- suites ------------------------------------------------------------- */

typedef struct suite_ctx {
  int instance;
  const char *suite, *op;
  st_shape *shapes; /* malloc'ed here, freed by the caller on failure */
  int n;
} suite_ctx;

static int suite_protected(lua_State *L) {
  suite_ctx *c = lua_touserdata(L, 1);
  push_method(L, c->instance, "suite");
  lua_pushstring(L, c->suite);
  if (c->op)
    lua_pushstring(L, c->op);
  else
    lua_pushnil(L);
  lua_call(L, 2, 1);
  luaL_checktype(L, -1, LUA_TTABLE);
  const int list = lua_gettop(L);
  const int count = (int)luaL_len(L, list);
  c->shapes = calloc((size_t)count + 1, sizeof *c->shapes);
  if (!c->shapes) gen_raise(L, "out of host memory");
  for (int i = 0; i < count; i++) {
    st_shape *s = &c->shapes[i];
    lua_rawgeti(L, list, i + 1);
    const int row = lua_gettop(L);
    get_string(L, row, "op", s->op, sizeof s->op, "shape");
    get_string(L, row, "key", s->key, sizeof s->key, "shape");
    get_string(L, row, "dispatch_key", s->dispatch_key, sizeof s->dispatch_key, "shape");
    lua_getfield(L, row, "params");
    to_params(L, -1, &s->params, s->key);
    lua_settop(L, list);
    c->n = i + 1;
  }
  return 0;
}

st_status st_gen_suite(st_gen *g, const char *suite, const char *op, st_shape **shapes, int *n, st_err *err) {
  if (!g || !suite || !shapes || !n) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_suite: NULL argument");
  *shapes = NULL;
  *n = 0;
  suite_ctx c = {g->instance, suite, op, NULL, 0};
  const st_status s = protected_call(g, suite_protected, &c, err);
  if (s != ST_OK) {
    free(c.shapes);
    return s;
  }
  *shapes = c.shapes;
  *n = c.n;
  return ST_OK;
}

/* ---- variants ----------------------------------------------------------- */

typedef struct variants_ctx {
  int instance;
  const char *op;
  const st_shape *shapes;
  int nshapes;
  st_gen_variant *out; /* malloc'ed here, freed by the caller on failure */
  int n;
} variants_ctx;

/* The variant's id (identity.h). */
static void variant_id(lua_State *L, st_variant_row *row) {
  st_err why;
  if (st_variant_id(row->op, &row->kernel, &row->launch, row->source_hash, row->id, &why) != ST_OK)
    gen_raise(L, "variant %s: %s", row->name, why.msg);
}

static int variants_protected(lua_State *L) {
  variants_ctx *c = lua_touserdata(L, 1);
  push_method(L, c->instance, "variants");
  lua_pushstring(L, c->op);
  lua_createtable(L, c->nshapes, 0);
  for (int i = 0; i < c->nshapes; i++) {
    if (strcmp(c->shapes[i].op, c->op) != 0)
      gen_raise(L, "shape %s is of op '%s', not '%s'", c->shapes[i].key, c->shapes[i].op, c->op);
    push_params(L, &c->shapes[i].params);
    lua_rawseti(L, -2, i + 1);
  }
  lua_call(L, 2, 2);
  const int list = lua_gettop(L) - 1, sources = lua_gettop(L);
  luaL_checktype(L, list, LUA_TTABLE);
  luaL_checktype(L, sources, LUA_TTABLE);

  /* Hash each distinct source once. */
  const int nsources = (int)luaL_len(L, sources);
  char(*hashes)[33] = lua_newuserdatauv(L, sizeof *hashes * (size_t)(nsources + 1), 0);
  for (int i = 0; i < nsources; i++) {
    lua_rawgeti(L, sources, i + 1);
    size_t len = 0;
    const char *text = lua_tolstring(L, -1, &len);
    if (!text) gen_raise(L, "source %d is not a string", i + 1);
    st_hash_hex(text, len, hashes[i]);
    lua_pop(L, 1);
  }

  const int count = (int)luaL_len(L, list);
  c->out = calloc((size_t)count + 1, sizeof *c->out);
  if (!c->out) gen_raise(L, "out of host memory");
  const int base = lua_gettop(L);
  for (int i = 0; i < count; i++) {
    st_gen_variant *v = &c->out[i];
    st_variant_row *row = &v->row;
    lua_rawgeti(L, list, i + 1);
    const int item = lua_gettop(L);
    snprintf(row->op, sizeof row->op, "%s", c->op);
    get_string(L, item, "name", row->name, sizeof row->name, "variant");
    lua_getfield(L, item, "kernel");
    to_params(L, -1, &row->kernel, row->name);
    lua_getfield(L, item, "launch");
    to_params(L, -1, &row->launch, row->name);
    lua_getfield(L, item, "is_default");
    row->is_default = lua_toboolean(L, -1);
    lua_getfield(L, item, "source");
    const lua_Integer si = lua_tointeger(L, -1);
    if (si < 1 || si > nsources) gen_raise(L, "variant %s has no source", row->name);
    snprintf(row->source_hash, sizeof row->source_hash, "%s", hashes[si - 1]);
    variant_id(L, row);
    lua_rawgeti(L, sources, si);
    v->source = strdup(lua_tostring(L, -1));
    if (!v->source) gen_raise(L, "out of host memory");
    c->n = i + 1;
    lua_settop(L, base);
  }
  return 0;
}

st_status st_gen_variants(st_gen *g, const char *op, const st_shape *shapes, int nshapes, st_gen_variant **out, int *n,
                          st_err *err) {
  if (!g || !op || !out || !n || nshapes < 0 || (nshapes > 0 && !shapes))
    return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_variants: NULL or negative argument");
  *out = NULL;
  *n = 0;
  variants_ctx c = {g->instance, op, shapes, nshapes, NULL, 0};
  const st_status s = protected_call(g, variants_protected, &c, err);
  if (s != ST_OK) {
    st_gen_free_variants(c.out, c.n);
    return s;
  }
  *out = c.out;
  *n = c.n;
  return ST_OK;
}

void st_gen_free_variants(st_gen_variant *v, int n) {
  if (!v) return;
  for (int i = 0; i < n; i++) free(v[i].source);
  free(v);
}

/* ---- applies and render ------------------------------------------------- */

typedef struct applies_ctx {
  int instance;
  const st_variant_row *v;
  const st_shape *s;
  int applies;
} applies_ctx;

static int applies_protected(lua_State *L) {
  applies_ctx *c = lua_touserdata(L, 1);
  push_method(L, c->instance, "applies");
  lua_pushstring(L, c->v->op);
  push_params(L, &c->v->kernel);
  push_params(L, &c->v->launch);
  lua_pushboolean(L, c->v->is_default);
  push_params(L, &c->s->params);
  lua_call(L, 5, 1);
  c->applies = lua_toboolean(L, -1);
  return 0;
}

st_status st_gen_applies(st_gen *g, const st_variant_row *v, const st_shape *s, int *applies, st_err *err) {
  if (!g || !v || !s || !applies) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_applies: NULL argument");
  *applies = 0;
  if (strcmp(v->op, s->op) != 0) return ST_OK; /* a variant of one op never runs another's shape */
  applies_ctx c = {g->instance, v, s, 0};
  const st_status st = protected_call(g, applies_protected, &c, err);
  if (st == ST_OK) *applies = c.applies;
  return st;
}

typedef struct render_ctx {
  int instance;
  const char *op;
  const st_params *kernel;
  char *source;
} render_ctx;

static int render_protected(lua_State *L) {
  render_ctx *c = lua_touserdata(L, 1);
  push_method(L, c->instance, "render");
  lua_pushstring(L, c->op);
  push_params(L, c->kernel);
  lua_call(L, 2, 1);
  const char *text = lua_tostring(L, -1);
  if (!text) gen_raise(L, "render of %s returned no text", c->op);
  c->source = strdup(text);
  if (!c->source) gen_raise(L, "out of host memory");
  return 0;
}

st_status st_gen_render(st_gen *g, const char *op, const st_params *kernel, char **source, st_err *err) {
  if (!g || !op || !kernel || !source) return st_fail(err, ST_ERR_INVALID_ARG, "st_gen_render: NULL argument");
  *source = NULL;
  render_ctx c = {g->instance, op, kernel, NULL};
  const st_status s = protected_call(g, render_protected, &c, err);
  if (s != ST_OK) {
    free(c.source);
    return s;
  }
  *source = c.source;
  return ST_OK;
}
