#include "dispatch.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *st_dispatch_rule_name(st_dispatch_rule rule) {
  switch (rule) {
  case ST_DISPATCH_EXACT: return "exact";
  case ST_DISPATCH_NEAREST: return "nearest key";
  case ST_DISPATCH_DEFAULT: return "default";
  }
  return "unknown";
}

/* ---- key fields ---------------------------------------------------------- */

/* Same keys with the same values. */
static int fields_equal(const st_params *a, const st_params *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++) {
    const char *v = st_params_get(b, a->p[i].key);
    if (!v || strcmp(v, a->p[i].val) != 0) return 0;
  }
  return 1;
}

long long st_dispatch_key_int(const st_params *fields, const char *name) {
  long long v = 0;
  if (st_params_get_int(fields, name, 1, INT_MAX, &v, NULL) != ST_OK) return 0;
  return v;
}

/* A field's value as a positive integer, or 0. */
static long long positive_int(const char *s) {
  long long v = 0;
  return st_params_whole_number(s, &v) && v > 0 ? v : 0;
}

/* How far a winner's key is from the call's: the sum over the fields that
 * differ of |log2 w/c|, when both are positive integers; INFINITY when a
 * text field differs (the dtype). A numeric field on one side only counts
 * nothing (a key recorded before the field was added: the context), a text
 * field on one side only makes the keys incomparable. */
static double key_distance(const st_params *w, const st_params *call) {
  for (int i = 0; i < call->n; i++)
    if (!st_params_get(w, call->p[i].key) && !positive_int(call->p[i].val)) return INFINITY;
  double d = 0.0;
  for (int i = 0; i < w->n; i++) {
    const char *cv = st_params_get(call, w->p[i].key);
    if (!cv) {
      if (!positive_int(w->p[i].val)) return INFINITY;
      continue;
    }
    if (strcmp(cv, w->p[i].val) == 0) continue;
    const long long a = positive_int(w->p[i].val), b = positive_int(cv);
    if (!a || !b) return INFINITY;
    d += fabs(log2((double)a / (double)b));
  }
  return d;
}

/* Whether the winner's own key says it beat the op's defaults there by the
 * margin; a winner recorded without the defaults' time counts as having. */
static int beat_defaults(const st_dispatch_winner *w) {
  return w->default_us <= 0 || w->median_us <= 0 || w->default_us >= ST_DISPATCH_NEAREST_MARGIN * w->median_us;
}

/* 1 if candidate x goes before y among the nearest-key winners: supported
 * ones first, then the nearer; ties (within rounding of the logarithms) to
 * the larger batch, then the larger context. */
static int before(const st_dispatch_candidate *x, const st_dispatch_candidate *y) {
  if (x->supported != y->supported) return x->supported;
  if (x->distance < y->distance - 1e-9) return 1;
  if (x->distance > y->distance + 1e-9) return 0;
  if (x->batch != y->batch) return x->batch > y->batch;
  return x->context > y->context;
}

/* ---- candidates ---------------------------------------------------------- */

typedef struct cand_list {
  st_dispatch_candidate *out;
  size_t n;
  st_op_id op;
  const void *args;
  const st_dispatch_hooks *hooks;
  st_err *why;
} cand_list;

static int listed(const cand_list *l, const st_dispatch_variant *v) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->out[i].v->id, v->id) == 0) return 1;
  return 0;
}

/* Appends `v` if it is new and fits; returns 1 if appended. */
static int add_if_fits(cand_list *l, const st_dispatch_variant *v, st_dispatch_rule rule, long long batch,
                       long long context, double distance, int supported) {
  if (listed(l, v)) return 0;
  st_err reason;
  if (l->hooks->fit(l->hooks->fit_ctx, l->op, v, l->args, &reason) != ST_OK) {
    if (l->why) st_err_format(l->why, "%s: %s", v->name, reason.msg);
    return 0;
  }
  l->out[l->n++] = (st_dispatch_candidate){
      .v = v, .rule = rule, .batch = batch, .context = context, .distance = distance, .supported = supported};
  return 1;
}

/* Whether default `v` is meant for a call of `load` (< 0: unknown) and
 * `qlen` (<= 0: unknown); an unknown value is in every range. */
static int meant_for(const st_dispatch_variant *v, double load, int qlen) {
  const int load_ok = load < 0 || v->load_hi <= 0 || (load > v->load_lo && load <= v->load_hi);
  const int qlen_ok = qlen <= 0 || v->qlen_hi <= 0 || (qlen > v->qlen_lo && qlen <= v->qlen_hi);
  return load_ok && qlen_ok;
}

/* st_dispatch_meant_fn over the op's st_op_desc.default_meant_for; ctx
 * points at the device's multiprocessor count. */
static int op_meant_for(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args) {
  const st_op_desc *d = st_op_desc_of(op);
  return !d || !d->default_meant_for || d->default_meant_for(&v->cfg, args, *(const int *)ctx);
}

void st_dispatch_call_hooks(st_op_id op, const void *args, const int *sm_count, st_dispatch_hooks *h) {
  const st_op_desc *d = st_op_desc_of(op);
  h->call_load = d && d->load ? d->load(args, *sm_count) : -1;
  h->call_qlen = d && d->qlen ? d->qlen(args) : 0;
  h->meant_for = d && d->default_meant_for ? op_meant_for : NULL;
  h->meant_ctx = (void *)sm_count;
}

/* Stable partition: the defaults meant for the call first. */
static void prefer_in_range(st_dispatch_candidate *c, size_t n, const st_dispatch_hooks *hooks, st_op_id op,
                            const void *args) {
  size_t front = 0;
  for (size_t i = 0; i < n; i++) {
    if (!meant_for(c[i].v, hooks->call_load, hooks->call_qlen)) continue;
    if (hooks->meant_for && !hooks->meant_for(hooks->meant_ctx, op, c[i].v, args)) continue;
    st_dispatch_candidate x = c[i];
    for (size_t j = i; j > front; j--) c[j] = c[j - 1];
    c[front++] = x;
  }
}

/* Appends the nearest-key winners of `t` (every winner whose key differs
 * from the call's and is comparable) that are `supported` or not, nearest
 * first: an insertion sort of the appended tail, stable, so winners of one
 * key keep the table's order (newest run first). */
static void add_nearest(cand_list *l, const st_dispatch_table *t, const st_params *fields, int supported) {
  const size_t tail = l->n;
  for (size_t i = 0; i < t->n_winners; i++) {
    const st_dispatch_winner *w = &t->winners[i];
    if (fields_equal(&w->fields, fields)) continue; /* handled as exact */
    const double d = key_distance(&w->fields, fields);
    if (isinf(d)) continue;
    if ((d <= t->nearest_radius + 1e-9 && beat_defaults(w)) != supported) continue;
    if (!add_if_fits(l, &w->v, ST_DISPATCH_NEAREST, w->batch, w->context, d, supported)) continue;
    st_dispatch_candidate c = l->out[l->n - 1];
    size_t j = l->n - 1;
    for (; j > tail && before(&c, &l->out[j - 1]); j--) l->out[j] = l->out[j - 1];
    l->out[j] = c;
  }
}

void st_dispatch_candidates(const st_dispatch_table *t, const st_params *fields, const void *args,
                            const st_dispatch_hooks *hooks, st_dispatch_candidate *out, size_t *n_fit, st_err *why) {
  cand_list l = {.out = out, .n = 0, .op = t->op, .args = args, .hooks = hooks, .why = why};
  if (why) why->msg[0] = '\0';

  for (size_t i = 0; i < t->n_winners; i++) {
    const st_dispatch_winner *w = &t->winners[i];
    if (fields_equal(&w->fields, fields)) add_if_fits(&l, &w->v, ST_DISPATCH_EXACT, w->batch, w->context, 0.0, 1);
  }

  /* Nearest keys within the radius that beat the defaults on their own
   * keys, then the defaults, then the other winners (beyond the radius, or
   * no better than the defaults where tuned: there the measurements say
   * little about the call, and the built-in choice is made for its shape).
   * A default that is also such a winner keeps its place as a default. */
  add_nearest(&l, t, fields, 1);
  const size_t first_default = l.n;
  for (size_t i = 0; i < t->n_defaults; i++) add_if_fits(&l, &t->defaults[i], ST_DISPATCH_DEFAULT, 0, 0, 0.0, 0);
  if (hooks->call_load >= 0 || hooks->call_qlen > 0 || hooks->meant_for)
    prefer_in_range(out + first_default, l.n - first_default, hooks, t->op, args);
  add_nearest(&l, t, fields, 0);
  *n_fit = l.n;
}

/* ---- choosing ------------------------------------------------------------ */

/* "index_decode:B=8,D=128,topk=16" -> "B=8 D=128 topk=16" for messages. */
static void shape_text(const char *key, char *buf, size_t cap) {
  const char *colon = strchr(key, ':');
  if (colon) key = colon + 1;
  size_t i = 0;
  for (; key[i] && i + 1 < cap; i++) buf[i] = key[i] != ',' ? key[i] : (char)' ';
  buf[i] = '\0';
}

static st_status no_variant(const st_dispatch_table *t, const char *key, size_t n_fit, const st_err *why,
                            const st_err *load_err, st_err *err) {
  char shape[ST_DISPATCH_KEY_MAX];
  shape_text(key, shape, sizeof shape);
  const char *src = t->source ? t->source : "the database";
  const char *note = t->note ? t->note : "";
  const char *op = st_op_name(t->op);
  const char *sep = t->note ? "; " : "";
  if (n_fit > 0)
    return st_fail(err, ST_ERR_NO_VARIANT,
                   "no compiled %s variant for %s in %s; run sparsetune tune/compile "
                   "(%zu variant%s fit but none could be loaded, the last: %s)%s%s",
                   op, shape, src, n_fit, n_fit == 1 ? "" : "s", load_err->msg, sep, note);
  if (why->msg[0])
    return st_fail(err, ST_ERR_NO_VARIANT,
                   "no compiled %s variant for %s in %s; run sparsetune tune/compile "
                   "(no recorded variant fits, e.g.: %s)%s%s",
                   op, shape, src, why->msg, sep, note);
  return st_fail(err, ST_ERR_NO_VARIANT,
                 "no compiled %s variant for %s in %s; run sparsetune tune/compile "
                 "(it records no winner and no default for this op)%s%s",
                 op, shape, src, sep, note);
}

st_status st_dispatch_choose(const st_dispatch_table *t, const char *key, const st_params *fields, const void *args,
                             const st_dispatch_hooks *hooks, st_dispatch_choice *choice, st_err *err) {
  size_t cap = t->n_winners + t->n_defaults;
  st_dispatch_candidate *c = NULL;
  if (cap > 0 && !(c = malloc(cap * sizeof *c)))
    return st_fail(err, ST_ERR_NOMEM, "out of host memory listing %zu candidate variants", cap);
  size_t n_fit = 0;
  st_err why = {{0}}, load_err = {{0}};
  if (cap > 0) st_dispatch_candidates(t, fields, args, hooks, c, &n_fit, &why);

  st_status st = ST_ERR_NO_VARIANT;
  for (size_t i = 0; i < n_fit; i++) {
    void *loaded = NULL;
    st = hooks->load(hooks->load_ctx, t->op, c[i].v, &loaded, &load_err);
    if (st == ST_OK) {
      *choice = (st_dispatch_choice){.v = c[i].v, .rule = c[i].rule, .loaded = loaded};
      break;
    }
    if (st != ST_ERR_NO_VARIANT) { /* a driver or database failure: not the
                                      variant's fault */
      if (err) *err = load_err;
      break;
    }
  }
  free(c);
  if (st == ST_ERR_NO_VARIANT) return no_variant(t, key, n_fit, &why, &load_err, err);
  return st;
}

/* ---- memo ---------------------------------------------------------------- */

/* FNV-1a; never 0, which marks a free slot. */
static uint64_t key_hash(const char *key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 0x100000001b3ULL;
  return h ? h : 1;
}

static int slot_matches(const st_dispatch_memo_entry *e, uint64_t hash, const char *key, int max_context,
                        uint32_t tag) {
  return e->hash == hash && e->max_context == max_context && e->tag == tag && strcmp(e->key, key) == 0;
}

const st_dispatch_choice *st_dispatch_memo_find(const st_dispatch_memo *memo, const char *key, int max_context,
                                                uint32_t tag) {
  uint64_t hash = key_hash(key);
  for (size_t i = 0; i < ST_DISPATCH_MEMO_SLOTS; i++)
    if (slot_matches(&memo->slot[i], hash, key, max_context, tag)) return &memo->slot[i].choice;
  return NULL;
}

void st_dispatch_memo_put(st_dispatch_memo *memo, const char *key, int max_context, uint32_t tag,
                          const st_dispatch_choice *choice) {
  if (strlen(key) >= ST_DISPATCH_KEY_MAX) return;
  uint64_t hash = key_hash(key);
  st_dispatch_memo_entry *e = NULL;
  for (size_t i = 0; i < ST_DISPATCH_MEMO_SLOTS && !e; i++)
    if (slot_matches(&memo->slot[i], hash, key, max_context, tag)) e = &memo->slot[i];
  for (size_t i = 0; i < ST_DISPATCH_MEMO_SLOTS && !e; i++)
    if (memo->slot[i].hash == 0) e = &memo->slot[i];
  if (!e) {
    e = &memo->slot[memo->next];
    memo->next = (memo->next + 1) % ST_DISPATCH_MEMO_SLOTS;
  }
  e->hash = hash;
  e->max_context = max_context;
  e->tag = tag;
  memcpy(e->key, key, strlen(key) + 1);
  e->choice = *choice;
}

st_status st_dispatch_resolve(const st_dispatch_table *t, st_dispatch_memo *memo, const char *key,
                              const st_params *fields, const void *args, int max_context, uint32_t tag,
                              const st_dispatch_hooks *hooks, st_dispatch_choice *choice, st_err *err) {
  const st_dispatch_choice *hit = st_dispatch_memo_find(memo, key, max_context, tag);
  /* The key holds the host-known shape, but a fit may also depend on other
   * arguments (strides, forced blocks): re-check, it is arithmetic only. */
  if (hit && hooks->fit(hooks->fit_ctx, t->op, hit->v, args, NULL) == ST_OK) {
    *choice = *hit;
    return ST_OK;
  }
  st_status st = st_dispatch_choose(t, key, fields, args, hooks, choice, err);
  if (st == ST_OK) st_dispatch_memo_put(memo, key, max_context, tag, choice);
  return st;
}

/* ---- table order --------------------------------------------------------- */

static int cmp_winner(const void *pa, const void *pb) {
  const st_dispatch_winner *a = pa, *b = pb;
  if (a->run_id != b->run_id) return a->run_id > b->run_id ? -1 : 1;
  if (a->median_us != b->median_us) return a->median_us < b->median_us ? -1 : 1;
  return strcmp(a->v.id, b->v.id);
}

static int cmp_default(const void *pa, const void *pb) {
  const st_dispatch_variant *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  int c = strcmp(a->name, b->name);
  return c ? c : strcmp(a->id, b->id);
}

void st_dispatch_sort_winners(st_dispatch_winner *w, size_t n) {
  if (n > 1) qsort(w, n, sizeof *w, cmp_winner);
}

void st_dispatch_sort_defaults(st_dispatch_variant *v, size_t n) {
  if (n > 1) qsort(v, n, sizeof *v, cmp_default);
}
