/* test_api_rejects_hostile_args.c - every public entry point of every op
 * (st_<op>_workspace_size, st_<op>_prepare, st_<op>) refuses hostile
 * arguments cleanly, on the GPU-less handle of api_fixture.h.
 *
 * Each case starts from valid arguments and makes one to three fields
 * hostile (0, -1, INT_MAX, INT64_MIN, 2^62, ..., out-of-enum dtypes and
 * modes, NULL or misaligned pointers), or sets one dimension wherever it
 * appears (all of total_q, say) to such a value. Every call must return
 * ST_OK or a defined error status (the sanitized build halts on any UBSan
 * report, so no signed overflow may happen on the way), an error must
 * leave a message, and whatever is accepted must satisfy the header's
 * contract as an oracle here checks it, in 128-bit arithmetic: ranges,
 * shapes, every view's extent within int64, and the workspace size the
 * query reports against an independent computation of it. The launch
 * entry has no device: its ST_ERR_NO_DRIVER means every check passed.
 * The overflows first reported run as named cases. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_fixture.h"
#include "ops/tensor_check.h"
#include "testutil.h"

__extension__ typedef __int128 i128;

_Static_assert(sizeof(st_dtype) == sizeof(int) && sizeof(st_kv_scale_mode) == sizeof(int),
               "enums are passed as ints, as a caller in another language writes them");

enum { CASES_PER_OP = 10000, MAX_VARIANTS = 3, MAX_SITES = 7 };

#define WS_ALIGN 256
#define WS_COUNTERS 65536 /* the counter area every workspace begins with */
#define WS_UNKNOWN SIZE_MAX /* a call that reports no workspace size */

/* ---- hostile values ------------------------------------------------------ */

static const int hostile_ints[] = {0,          -1,         1,       2,       4,       16,
                                   64,         65,         127,     128,     129,     65535,
                                   65536,      1 << 20,    1 << 24, INT_MAX, INT_MIN, INT_MAX / 2 + 1,
                                   2147483647, -2147483647};

static const int64_t hostile_int64s[] = {0,
                                         -1,
                                         1,
                                         2,
                                         128,
                                         65535,
                                         65536,
                                         (int64_t)1 << 24,
                                         INT32_MAX,
                                         (int64_t)INT32_MAX + 1,
                                         INT32_MIN,
                                         (int64_t)1 << 32,
                                         (int64_t)1 << 40,
                                         ((int64_t)1 << 53) + 1,
                                         (int64_t)1 << 62,
                                         -((int64_t)1 << 62),
                                         INT64_MAX,
                                         INT64_MIN};

static const int hostile_ndims[] = {0, -1, 1, 2, 3, 4, 5, 6, 7, 9, INT_MAX, INT_MIN};
static const int hostile_enums[] = {-1, 0, 1, 2, 3, 4, 5, 255, 1 << 16, INT_MAX, INT_MIN};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Uniform in 0..n-1 (every table here is non-empty; 0 for n = 0). */
static size_t pick(uint64_t *rng, size_t n) { return n ? (size_t)(st_rand_next(rng) % n) : 0; }

static float hostile_float(uint64_t *rng) {
  const float v[] = {0.0f, -0.0f, -1.0f, 1.0f, NAN, INFINITY, -INFINITY, FLT_MIN, FLT_TRUE_MIN, FLT_MAX, 1e-30f};
  return v[pick(rng, COUNT(v))];
}

/* An int64 the mutations use: a hostile one, or now and then a small one
 * (small values keep the other checks passing, so the plan runs). */
static int64_t hostile_int64(uint64_t *rng) {
  if (pick(rng, 4) == 0) return st_rand_int(rng, 1, 300);
  return hostile_int64s[pick(rng, COUNT(hostile_int64s))];
}

static int int_of(int64_t v) { return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; }

static int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat64(i128 v) { return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v; }

/* An enum field written through an int, as a caller in another language
 * would pass it: whatever the value, no enum object is loaded here. */
static void put_enum(void *field, int v) { memcpy(field, &v, sizeof v); }
static int get_enum(const void *field) {
  int v;
  memcpy(&v, field, sizeof v);
  return v;
}

/* ---- what a case may mutate ---------------------------------------------- */

typedef enum { F_INT, F_FLOAT, F_ENUM, F_TENSOR } field_kind;

typedef struct field {
  const char *name;
  field_kind kind;
  size_t off;
} field;

/* Where a dimension appears: a tensor's axis (value + plus), an int field
 * (axis SITE_INT), or max_context as value x 128 (axis SITE_CONTEXT, for
 * the block-table or score columns). */
enum { SITE_INT = -1, SITE_CONTEXT = -2 };
typedef struct site {
  size_t off;
  int axis, plus;
} site;

typedef struct symbol {
  const char *name;
  int n;
  site s[MAX_SITES];
} symbol;

#define FIELD(T, f, kind)                                                                                              \
  { #f, kind, offsetof(T, f) }
#define AT(T, f, axis)                                                                                                 \
  { offsetof(T, f), axis, 0 }
#define AT_PLUS1(T, f, axis)                                                                                           \
  { offsetof(T, f), axis, 1 }

static st_tensor *tensor_at(void *args, size_t off) { return (st_tensor *)((char *)args + off); }
static int *int_at(void *args, size_t off) { return (int *)((char *)args + off); }

/* Dense row-major strides for t's shape, each saturated at INT64_MAX. */
static void densify(st_tensor *t) {
  i128 stride = 1;
  for (int i = ST_MAX_DIMS - 1; i >= 0; i--) {
    if (i >= t->ndim || t->ndim > ST_MAX_DIMS) continue;
    t->stride[i] = sat64(stride);
    stride *= t->shape[i] > 0 ? t->shape[i] : 1;
    if (stride > INT64_MAX) stride = (i128)INT64_MAX + 1;
  }
}

/* Appends " name=v" (fmt) to a case's log of mutations. */
static void describe(char *log, size_t cap, const char *fmt, const char *name, long long v) {
  const size_t len = strlen(log);
  if (len + 1 < cap) snprintf(log + len, cap - len, fmt, name, v);
}

static void describe_float(char *log, size_t cap, const char *name, float v) {
  const size_t len = strlen(log);
  if (len + 1 < cap) snprintf(log + len, cap - len, " %s=%g", name, (double)v);
}

static void mutate_tensor(st_tensor *t, const char *name, uint64_t *rng, char *log, size_t cap) {
  const int axis = (int)pick(rng, ST_MAX_DIMS);
  char sub[64];
  switch (pick(rng, 7)) {
  case 0:
    t->shape[axis] = hostile_int64(rng);
    snprintf(sub, sizeof sub, "%s.shape[%d]", name, axis);
    describe(log, cap, " %s=%lld", sub, (long long)t->shape[axis]);
    return;
  case 1:
  case 2:
    t->stride[axis] = hostile_int64(rng);
    snprintf(sub, sizeof sub, "%s.stride[%d]", name, axis);
    describe(log, cap, " %s=%lld", sub, (long long)t->stride[axis]);
    return;
  case 3:
    t->ndim = hostile_ndims[pick(rng, COUNT(hostile_ndims))];
    snprintf(sub, sizeof sub, "%s.ndim", name);
    describe(log, cap, " %s=%lld", sub, t->ndim);
    return;
  case 4:
    put_enum(&t->dtype, hostile_enums[pick(rng, COUNT(hostile_enums))]);
    snprintf(sub, sizeof sub, "%s.dtype", name);
    describe(log, cap, " %s=%lld", sub, get_enum(&t->dtype));
    return;
  case 5: {
    const uintptr_t offsets[] = {0, 1, 2, 4, 8, 12};
    t->data = pick(rng, 3) == 0 ? NULL : (char *)FAKE_PTR(40 + pick(rng, 8)) + offsets[pick(rng, COUNT(offsets))];
    snprintf(sub, sizeof sub, "%s.data", name);
    describe(log, cap, " %s=%#llx", sub, (long long)(uintptr_t)t->data);
    return;
  }
  default:
    t->shape[axis] = hostile_int64(rng);
    densify(t);
    snprintf(sub, sizeof sub, "%s.shape[%d]", name, axis);
    describe(log, cap, " %s=%lld (dense)", sub, (long long)t->shape[axis]);
    return;
  }
}

static void mutate_field(void *args, const field *f, uint64_t *rng, char *log, size_t cap) {
  switch (f->kind) {
  case F_INT: {
    const int v = hostile_ints[pick(rng, COUNT(hostile_ints))];
    *int_at(args, f->off) = v;
    describe(log, cap, " %s=%lld", f->name, v);
    return;
  }
  case F_FLOAT: {
    const float v = hostile_float(rng);
    memcpy((char *)args + f->off, &v, sizeof v);
    describe_float(log, cap, f->name, v);
    return;
  }
  case F_ENUM: {
    const int v = hostile_enums[pick(rng, COUNT(hostile_enums))];
    put_enum((char *)args + f->off, v);
    describe(log, cap, " %s=%lld", f->name, v);
    return;
  }
  case F_TENSOR: mutate_tensor(tensor_at(args, f->off), f->name, rng, log, cap); return;
  }
}

/* Sets dimension `sym` to v everywhere it appears, the views' strides made
 * dense again if `dense`. */
static void set_symbol(void *args, const symbol *sym, int64_t v, int dense) {
  for (int i = 0; i < sym->n; i++) {
    const site *s = &sym->s[i];
    if (s->axis == SITE_INT) {
      *int_at(args, s->off) = int_of(v);
    } else if (s->axis == SITE_CONTEXT) {
      *int_at(args, s->off) = int_of(sat64((i128)v * ST_BLOCK_TOKENS));
    } else {
      st_tensor *t = tensor_at(args, s->off);
      t->shape[s->axis] = add_sat(v, s->plus);
      if (dense) densify(t);
    }
  }
}

static void mutate_symbol(void *args, const symbol *sym, uint64_t *rng, char *log, size_t cap) {
  const int64_t v = hostile_int64(rng);
  describe(log, cap, " {%s}=%lld", sym->name, (long long)v);
  set_symbol(args, sym, v, (int)pick(rng, 2));
}

/* ---- the ops --------------------------------------------------------------- */

typedef struct op_desc op_desc;
struct op_desc {
  const char *name;
  st_op_id op;
  int flavors;                                /* baselines make_valid knows */
  void (*make_valid)(void *args, int flavor); /* valid arguments; flavor 1: an fp8 cache */
  const field *fields;
  size_t n_fields;
  const symbol *symbols;
  size_t n_symbols;
  st_dispatch_variant variants[MAX_VARIANTS];
  size_t n_variants;
  st_status (*workspace_size)(st_handle *h, const void *args, size_t *bytes);
  st_status (*prepare)(st_handle *h, const void *args);
  st_status (*launch)(st_handle *h, const void *args, void *ws, size_t ws_bytes, void *stream);
  /* 1 if `args` satisfy the contract; pointers: also the pointers are as
   * it asks (the launch reads them, the other calls do not); ws: the
   * bytes the query reported for variant v, or WS_UNKNOWN. */
  int (*oracle)(const void *args, const st_dispatch_variant *v, int pointers, size_t ws, char *why, size_t cap);
};

#define ENTRIES(op, T)                                                                                                 \
  static st_status ws_##op(st_handle *h, const void *a, size_t *bytes) {                                               \
    return st_##op##_workspace_size(h, (const T *)a, bytes);                                                           \
  }                                                                                                                    \
  static st_status prepare_##op(st_handle *h, const void *a) { return st_##op##_prepare(h, (const T *)a); }            \
  static st_status launch_##op(st_handle *h, const void *a, void *ws, size_t n, void *stream) {                        \
    return st_##op(h, (const T *)a, ws, n, stream);                                                                    \
  }

ENTRIES(index_decode, st_index_decode_args)
ENTRIES(sparse_attn_decode, st_sparse_attn_decode_args)
ENTRIES(sparse_attn, st_sparse_attn_args)
ENTRIES(index_score, st_index_score_args)
ENTRIES(index_prefill, st_index_prefill_args)
ENTRIES(index_topk, st_index_topk_args)
ENTRIES(mla_sparse_decode, st_mla_sparse_decode_args)
ENTRIES(dsa_index_decode, st_dsa_index_decode_args)
ENTRIES(mla_sparse_prefill, st_mla_sparse_prefill_args)
ENTRIES(dsa_index_logits, st_dsa_index_logits_args)
ENTRIES(dsa_index_topk, st_dsa_index_topk_args)

static st_dispatch_variant named(const char *id, st_op_id op) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "%s_%s", st_op_name(op), id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s_%s", st_op_name(op), id);
  return v;
}

/* ---- the oracle's pieces --------------------------------------------------- */

#define WHY(...) (snprintf(why, cap, __VA_ARGS__), 0)

static int64_t bytes_of(int dtype) {
  switch (dtype) {
  case ST_DTYPE_BF16: return 2;
  case ST_DTYPE_FP8_E4M3: return 1;
  case ST_DTYPE_INT32:
  case ST_DTYPE_FP32: return 4;
  }
  return 0;
}

/* A view as the header allows it: dtype `dt`, `ndim` dims of 1..INT32_MAX,
 * non-negative strides (innermost 1 unless inner_any), each stride and the
 * largest element's byte offset within int64; with pointers, data set and
 * aligned to its element. */
static int view_ok(const st_tensor *t, const char *name, int dt, int ndim, int inner_any, int pointers, char *why,
                   size_t cap) {
  if (get_enum(&t->dtype) != dt) return WHY("%s.dtype=%d accepted, expected %d", name, get_enum(&t->dtype), dt);
  if (t->ndim != ndim) return WHY("%s.ndim=%d accepted, expected %d", name, t->ndim, ndim);
  const int64_t eb = bytes_of(dt);
  i128 last = 0;
  for (int i = 0; i < ndim; i++) {
    if (t->shape[i] < 1 || t->shape[i] > INT32_MAX)
      return WHY("%s.shape[%d]=%lld accepted", name, i, (long long)t->shape[i]);
    if (t->stride[i] < 0 || (i128)t->stride[i] * eb > INT64_MAX)
      return WHY("%s.stride[%d]=%lld accepted", name, i, (long long)t->stride[i]);
    last += (i128)t->stride[i] * (t->shape[i] - 1);
  }
  if (!inner_any && t->stride[ndim - 1] != 1)
    return WHY("%s: innermost stride %lld accepted", name, (long long)t->stride[ndim - 1]);
  if ((last + 1) * eb > INT64_MAX) return WHY("%s: an extent past int64 bytes accepted", name);
  if (pointers && (!t->data || (uintptr_t)t->data % (uintptr_t)eb)) return WHY("%s.data=%p accepted", name, t->data);
  return 1;
}

/* Rows (innermost dim) of `align` bytes' alignment: start, length, strides. */
static int rows_aligned(const st_tensor *t, const char *name, int align, int pointers, char *why, size_t cap) {
  const int64_t eb = bytes_of(get_enum(&t->dtype));
  if (pointers && (uintptr_t)t->data % (uintptr_t)align) return WHY("%s.data=%p accepted", name, t->data);
  for (int i = 0; i < t->ndim; i++) {
    const i128 bytes = (i128)(i == t->ndim - 1 ? t->shape[i] : t->stride[i]) * eb;
    if (bytes % align) return WHY("%s: rows not %d-byte aligned accepted (dim %d)", name, align, i);
  }
  return 1;
}

static int dims_are(const st_tensor *t, const char *name, int n, const int64_t *want, char *why, size_t cap) {
  for (int i = 0; i < n; i++)
    if (t->shape[i] != want[i])
      return WHY("%s.shape[%d]=%lld accepted, expected %lld", name, i, (long long)t->shape[i], (long long)want[i]);
  return 1;
}

/* The selection of the indexer ops: topk 1..64, init and local blocks
 * 0..topk together. */
static int selection_ok(int topk, int init, int local, char *why, size_t cap) {
  if (topk < 1 || topk > 64) return WHY("topk=%d accepted", topk);
  if (init < 0 || local < 0 || (i128)init + local > topk)
    return WHY("init_blocks=%d local_blocks=%d accepted with topk=%d", init, local, topk);
  return 1;
}

static int context_ok(int max_context, int64_t cols, const char *what, char *why, size_t cap) {
  if (max_context < 1 || (i128)max_context > (i128)cols * ST_BLOCK_TOKENS)
    return WHY("max_context=%d accepted with %s=%lld", max_context, what, (long long)cols);
  return 1;
}

static i128 ceil_div(i128 a, i128 b) { return (a + b - 1) / b; }
static i128 ws_align(i128 x) { return ceil_div(x, WS_ALIGN) * WS_ALIGN; }

/* A workspace of `counters` bytes of counters, in the counter area where
 * they fit, and `scratch` bytes of aligned pieces after it; none for
 * neither. */
static i128 ws_of(i128 counters, i128 scratch) {
  if (counters == 0 && scratch == 0) return 0;
  return WS_COUNTERS + (counters > WS_COUNTERS ? ws_align(counters) : 0) + scratch;
}

static int ws_equal(size_t ws, i128 want, char *why, size_t cap) {
  if (ws == WS_UNKNOWN || (i128)ws == want) return 1;
  return WHY("workspace %zu bytes reported, %.0Lf expected", ws, (long double)want);
}

static int ws_at_least(size_t ws, i128 least, char *why, size_t cap) {
  if (ws == WS_UNKNOWN || ((i128)ws >= least && ws % WS_ALIGN == 0)) return 1;
  return WHY("workspace %zu bytes reported, at least %.0Lf expected", ws, (long double)least);
}

/* ---- index_decode ---------------------------------------------------------- */

static void index_decode_valid(void *p, int flavor) {
  st_index_decode_args *a = p;
  st_index_decode_args_init(a);
  const st_dtype dt = flavor ? ST_DTYPE_FP8_E4M3 : ST_DTYPE_BF16;
  st_tensor_contiguous(&a->q, FAKE_PTR(1), dt, 3, (int64_t[]){8, 2, 128});
  st_tensor_contiguous(&a->k_cache, FAKE_PTR(2), dt, 3, (int64_t[]){1024, 128, 128});
  st_tensor_contiguous(&a->block_table, FAKE_PTR(3), ST_DTYPE_INT32, 2, (int64_t[]){8, 64});
  st_tensor_contiguous(&a->seq_lens, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(5), ST_DTYPE_INT32, 3, (int64_t[]){2, 8, 16});
  a->qlen = 1;
  a->topk = 16;
  a->init_blocks = 1;
  a->local_blocks = 2;
  a->max_context = 64 * 128;
}

static int index_decode_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                               size_t cap) {
  const st_index_decode_args *a = p;
  if (a->qlen < 1 || a->qlen > 4) return WHY("qlen=%d accepted", a->qlen);
  if (a->pdl != 0 && a->pdl != 1) return WHY("pdl=%d accepted", a->pdl);
  if (!selection_ok(a->topk, a->init_blocks, a->local_blocks, why, cap)) return 0;
  const int dt = get_enum(&a->q.dtype);
  if (dt != ST_DTYPE_BF16 && dt != ST_DTYPE_FP8_E4M3) return WHY("q.dtype=%d accepted", dt);
  if (!view_ok(&a->q, "q", dt, 3, 0, ptrs, why, cap) || !view_ok(&a->k_cache, "k_cache", dt, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->block_table, "block_table", ST_DTYPE_INT32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, 0, ptrs, why, cap))
    return 0;
  const int64_t rows = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2], R = rows / a->qlen;
  if (rows % a->qlen || R > 65535 || H > 65535)
    return WHY("q.shape=[%lld,%lld,..] accepted", (long long)rows, (long long)H);
  if (!dims_are(&a->k_cache, "k_cache", 3, (int64_t[]){a->k_cache.shape[0], 128, D}, why, cap) ||
      !dims_are(&a->block_table, "block_table", 1, (int64_t[]){R}, why, cap) ||
      !dims_are(&a->seq_lens, "seq_lens", 1, (int64_t[]){R}, why, cap) ||
      !dims_are(&a->topk_idx, "topk_idx", 3, (int64_t[]){H, rows, a->topk}, why, cap) ||
      !context_ok(a->max_context, a->block_table.shape[1], "block_table columns", why, cap) ||
      !rows_aligned(&a->q, "q", 16, ptrs, why, cap) || !rows_aligned(&a->k_cache, "k_cache", 16, ptrs, why, cap))
    return 0;
  /* Split variants keep every (request, head, query) row's block keys;
   * single ones that merge through the workspace their counters too. */
  const i128 keys = ws_align((i128)R * H * a->qlen * ceil_div(a->max_context, ST_BLOCK_TOKENS) * 4);
  if (v->cfg.index_decode.algo == ST_INDEX_DECODE_SPLIT) return ws_equal(ws, ws_of(0, keys), why, cap);
  if (ws == 0) return 1;
  return ws_equal(ws, ws_of((i128)R * (H / v->cfg.index_decode.heads_per_cta) * 4, keys), why, cap);
}

static const field index_decode_fields[] = {FIELD(st_index_decode_args, q, F_TENSOR),
                                            FIELD(st_index_decode_args, k_cache, F_TENSOR),
                                            FIELD(st_index_decode_args, block_table, F_TENSOR),
                                            FIELD(st_index_decode_args, seq_lens, F_TENSOR),
                                            FIELD(st_index_decode_args, topk_idx, F_TENSOR),
                                            FIELD(st_index_decode_args, qlen, F_INT),
                                            FIELD(st_index_decode_args, topk, F_INT),
                                            FIELD(st_index_decode_args, init_blocks, F_INT),
                                            FIELD(st_index_decode_args, local_blocks, F_INT),
                                            FIELD(st_index_decode_args, max_context, F_INT),
                                            FIELD(st_index_decode_args, pdl, F_INT)};

#define ID st_index_decode_args
static const symbol index_decode_symbols[] = {
    {"R", 4, {AT(ID, q, 0), AT(ID, block_table, 0), AT(ID, seq_lens, 0), AT(ID, topk_idx, 1)}},
    {"H", 2, {AT(ID, q, 1), AT(ID, topk_idx, 0)}},
    {"D", 2, {AT(ID, q, 2), AT(ID, k_cache, 2)}},
    {"pages", 1, {AT(ID, k_cache, 0)}},
    {"topk", 2, {AT(ID, topk, SITE_INT), AT(ID, topk_idx, 2)}},
    {"max_blocks", 2, {AT(ID, block_table, 1), AT(ID, max_context, SITE_CONTEXT)}},
};
#undef ID

static st_dispatch_variant index_decode_variant(const char *id, st_dtype dt, st_index_decode_algo algo) {
  st_dispatch_variant v = named(id, ST_OP_INDEX_DECODE);
  v.cfg.index_decode = (st_index_decode_config){.dtype = dt,
                                                .head_dim = 128,
                                                .topk_cap = 64,
                                                .heads_per_cta = 1,
                                                .max_qlen = 4,
                                                .threads = 128,
                                                .units_in_flight = 2,
                                                .algo = algo};
  return v;
}

/* ---- dsa_index_decode ------------------------------------------------------- */

/* R=8 of qlen 1, 64 heads, topk 512, 64-token pages of 132-byte tokens. */
static void dsa_index_decode_valid(void *p, int flavor) {
  (void)flavor;
  st_dsa_index_decode_args *a = p;
  st_dsa_index_decode_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_FP8_E4M3, 3, (int64_t[]){8, 64, 128});
  st_tensor_contiguous(&a->weights, FAKE_PTR(6), ST_DTYPE_FP32, 2, (int64_t[]){8, 64});
  st_tensor_contiguous(&a->k_cache, FAKE_PTR(2), ST_DTYPE_FP8_E4M3, 2, (int64_t[]){1024, 64 * 132});
  st_tensor_contiguous(&a->block_table, FAKE_PTR(3), ST_DTYPE_INT32, 2, (int64_t[]){8, 64});
  st_tensor_contiguous(&a->seq_lens, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(5), ST_DTYPE_INT32, 2, (int64_t[]){8, 512});
  a->qlen = 1;
  a->topk = 512;
  a->page_size = 64;
  a->max_context = 64 * 64;
}

static int dsa_index_decode_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                   size_t cap) {
  (void)v;
  const st_dsa_index_decode_args *a = p;
  if (a->qlen < 1 || a->qlen > 4) return WHY("qlen=%d accepted", a->qlen);
  if (a->pdl != 0 && a->pdl != 1) return WHY("pdl=%d accepted", a->pdl);
  if (a->topk < 1 || a->topk > 2048) return WHY("topk=%d accepted", a->topk);
  if (a->page_size < 1 || a->page_size > 1024) return WHY("page_size=%d accepted", a->page_size);
  if (!view_ok(&a->q, "q", ST_DTYPE_FP8_E4M3, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->weights, "weights", ST_DTYPE_FP32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->k_cache, "k_cache", ST_DTYPE_FP8_E4M3, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->block_table, "block_table", ST_DTYPE_INT32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 2, 0, ptrs, why, cap))
    return 0;
  const int64_t rows = a->q.shape[0], H = a->q.shape[1], R = rows / a->qlen;
  if (rows % a->qlen || R > 65535 || H > 64 || a->q.shape[2] != 128)
    return WHY("q.shape=[%lld,%lld,%lld] accepted", (long long)rows, (long long)H, (long long)a->q.shape[2]);
  const i128 page_bytes = (i128)a->page_size * 132;
  if (a->k_cache.shape[1] != page_bytes || (a->k_cache.shape[0] > 1 && a->k_cache.stride[0] < page_bytes) ||
      a->k_cache.stride[0] % 16 || (ptrs && (uintptr_t)a->k_cache.data % 16))
    return WHY("k_cache [%lld,%lld] stride %lld accepted with page_size=%d", (long long)a->k_cache.shape[0],
               (long long)a->k_cache.shape[1], (long long)a->k_cache.stride[0], a->page_size);
  i128 most = (i128)a->block_table.shape[1] * a->page_size;
  if (most > (1 << 24)) most = 1 << 24;
  if (a->max_context < 1 || a->max_context > most)
    return WHY("max_context=%d accepted with %lld block_table columns of %d tokens", a->max_context,
               (long long)a->block_table.shape[1], a->page_size);
  if (!dims_are(&a->weights, "weights", 2, (int64_t[]){rows, H}, why, cap) ||
      !dims_are(&a->block_table, "block_table", 1, (int64_t[]){R}, why, cap) ||
      !dims_are(&a->seq_lens, "seq_lens", 1, (int64_t[]){R}, why, cap) ||
      !dims_are(&a->topk_idx, "topk_idx", 2, (int64_t[]){rows, a->topk}, why, cap) ||
      !rows_aligned(&a->q, "q", 16, ptrs, why, cap))
    return 0;
  /* The logits of every row, rows of max_context rounded up to 4. */
  return ws_equal(ws, ws_of(0, ws_align((i128)rows * ceil_div(a->max_context, 4) * 4 * 4)), why, cap);
}

static const field dsa_index_decode_fields[] = {
    FIELD(st_dsa_index_decode_args, q, F_TENSOR),        FIELD(st_dsa_index_decode_args, weights, F_TENSOR),
    FIELD(st_dsa_index_decode_args, k_cache, F_TENSOR),  FIELD(st_dsa_index_decode_args, block_table, F_TENSOR),
    FIELD(st_dsa_index_decode_args, seq_lens, F_TENSOR), FIELD(st_dsa_index_decode_args, topk_idx, F_TENSOR),
    FIELD(st_dsa_index_decode_args, qlen, F_INT),        FIELD(st_dsa_index_decode_args, topk, F_INT),
    FIELD(st_dsa_index_decode_args, page_size, F_INT),   FIELD(st_dsa_index_decode_args, max_context, F_INT),
    FIELD(st_dsa_index_decode_args, pdl, F_INT)};

#define DI st_dsa_index_decode_args
static const symbol dsa_index_decode_symbols[] = {
    {"R", 5, {AT(DI, q, 0), AT(DI, weights, 0), AT(DI, block_table, 0), AT(DI, seq_lens, 0), AT(DI, topk_idx, 0)}},
    {"H", 2, {AT(DI, q, 1), AT(DI, weights, 1)}},
    {"pages", 1, {AT(DI, k_cache, 0)}},
    {"topk", 2, {AT(DI, topk, SITE_INT), AT(DI, topk_idx, 1)}},
    {"max_pages", 1, {AT(DI, block_table, 1)}},
    {"max_context", 1, {AT(DI, max_context, SITE_INT)}},
};
#undef DI

static st_dispatch_variant dsa_index_decode_variant(const char *id, int merge_filter) {
  st_dispatch_variant v = named(id, ST_OP_DSA_INDEX_DECODE);
  v.cfg.dsa_index_decode = (st_dsa_index_decode_config){.max_heads = 64,
                                                        .max_qlen = 4,
                                                        .threads = 256,
                                                        .tiles_in_flight = 2,
                                                        .merge_threads = 512,
                                                        .merge_filter = merge_filter};
  return v;
}

/* ---- dsa_index_logits -------------------------------------------------------- */

/* s_q 100 queries of 64 heads against s_kv 3000 rows, logits rows of 3004. */
static void dsa_index_logits_valid(void *p, int flavor) {
  (void)flavor;
  st_dsa_index_logits_args *a = p;
  st_dsa_index_logits_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_FP8_E4M3, 3, (int64_t[]){100, 64, 128});
  st_tensor_contiguous(&a->k, FAKE_PTR(2), ST_DTYPE_FP8_E4M3, 2, (int64_t[]){3000, 128});
  st_tensor_contiguous(&a->k_scale, FAKE_PTR(3), ST_DTYPE_FP32, 1, (int64_t[]){3000});
  st_tensor_contiguous(&a->weights, FAKE_PTR(4), ST_DTYPE_FP32, 2, (int64_t[]){100, 64});
  st_tensor_contiguous(&a->ks, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){100});
  st_tensor_contiguous(&a->ke, FAKE_PTR(6), ST_DTYPE_INT32, 1, (int64_t[]){100});
  st_tensor_contiguous(&a->logits, FAKE_PTR(7), ST_DTYPE_FP32, 2, (int64_t[]){100, 3000});
  a->logits.stride[0] = 3004;
}

static int dsa_index_logits_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                   size_t cap) {
  const st_dsa_index_logits_args *a = p;
  if (!view_ok(&a->q, "q", ST_DTYPE_FP8_E4M3, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->k, "k", ST_DTYPE_FP8_E4M3, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->k_scale, "k_scale", ST_DTYPE_FP32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->weights, "weights", ST_DTYPE_FP32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->ks, "ks", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->ke, "ke", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->logits, "logits", ST_DTYPE_FP32, 2, 0, ptrs, why, cap))
    return 0;
  const int64_t s_q = a->q.shape[0], H = a->q.shape[1], s_kv = a->k.shape[0];
  if (s_q > (1 << 24) || H > 64 || a->q.shape[2] != 128)
    return WHY("q.shape=[%lld,%lld,%lld] accepted", (long long)s_q, (long long)H, (long long)a->q.shape[2]);
  if (s_kv > (1 << 24) || a->k.shape[1] != 128)
    return WHY("k.shape=[%lld,%lld] accepted", (long long)s_kv, (long long)a->k.shape[1]);
  if (H > v->cfg.dsa_index_logits.max_heads) return WHY("H=%lld accepted by a variant of fewer heads", (long long)H);
  if (!dims_are(&a->k_scale, "k_scale", 1, (int64_t[]){s_kv}, why, cap) ||
      !dims_are(&a->weights, "weights", 2, (int64_t[]){s_q, H}, why, cap) ||
      !dims_are(&a->ks, "ks", 1, (int64_t[]){s_q}, why, cap) ||
      !dims_are(&a->ke, "ke", 1, (int64_t[]){s_q}, why, cap) ||
      !dims_are(&a->logits, "logits", 2, (int64_t[]){s_q, s_kv}, why, cap) ||
      !rows_aligned(&a->q, "q", 16, ptrs, why, cap) || !rows_aligned(&a->k, "k", 16, ptrs, why, cap))
    return 0;
  if ((s_q > 1 && a->logits.stride[0] < s_kv) || a->logits.stride[0] % 4 || (ptrs && (uintptr_t)a->logits.data % 16))
    return WHY("logits.stride[0]=%lld accepted with s_kv=%lld", (long long)a->logits.stride[0], (long long)s_kv);
  return ws_equal(ws, 0, why, cap);
}

static const field dsa_index_logits_fields[] = {
    FIELD(st_dsa_index_logits_args, q, F_TENSOR),       FIELD(st_dsa_index_logits_args, k, F_TENSOR),
    FIELD(st_dsa_index_logits_args, k_scale, F_TENSOR), FIELD(st_dsa_index_logits_args, weights, F_TENSOR),
    FIELD(st_dsa_index_logits_args, ks, F_TENSOR),      FIELD(st_dsa_index_logits_args, ke, F_TENSOR),
    FIELD(st_dsa_index_logits_args, logits, F_TENSOR)};

#define DL st_dsa_index_logits_args
static const symbol dsa_index_logits_symbols[] = {
    {"s_q", 5, {AT(DL, q, 0), AT(DL, weights, 0), AT(DL, ks, 0), AT(DL, ke, 0), AT(DL, logits, 0)}},
    {"H", 2, {AT(DL, q, 1), AT(DL, weights, 1)}},
    {"s_kv", 3, {AT(DL, k, 0), AT(DL, k_scale, 0), AT(DL, logits, 1)}},
};
#undef DL

static st_dispatch_variant dsa_index_logits_variant(const char *id, int max_heads, int queries, int splits) {
  st_dispatch_variant v = named(id, ST_OP_DSA_INDEX_LOGITS);
  v.cfg.dsa_index_logits = (st_dsa_index_logits_config){.max_heads = max_heads,
                                                        .queries = queries,
                                                        .head_tiles = 2,
                                                        .tokens = 128,
                                                        .threads = 256,
                                                        .stages = 3,
                                                        .splits = splits};
  return v;
}

/* ---- dsa_index_topk ---------------------------------------------------------- */

/* s_q 100 rows of s_kv 3000 logits (rows of 3004), top-2048, output rows
 * of 2050. */
static void dsa_index_topk_valid(void *p, int flavor) {
  (void)flavor;
  st_dsa_index_topk_args *a = p;
  st_dsa_index_topk_args_init(a);
  st_tensor_contiguous(&a->logits, FAKE_PTR(1), ST_DTYPE_FP32, 2, (int64_t[]){100, 3000});
  a->logits.stride[0] = 3004;
  st_tensor_contiguous(&a->ks, FAKE_PTR(2), ST_DTYPE_INT32, 1, (int64_t[]){100});
  st_tensor_contiguous(&a->ke, FAKE_PTR(3), ST_DTYPE_INT32, 1, (int64_t[]){100});
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(4), ST_DTYPE_INT32, 2, (int64_t[]){100, 2048});
  a->topk_idx.stride[0] = 2050;
  a->topk = 2048;
}

static int dsa_index_topk_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                 size_t cap) {
  (void)v;
  const st_dsa_index_topk_args *a = p;
  if (!view_ok(&a->logits, "logits", ST_DTYPE_FP32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->ks, "ks", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->ke, "ke", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 2, 0, ptrs, why, cap))
    return 0;
  const int64_t s_q = a->logits.shape[0], s_kv = a->logits.shape[1];
  if (s_q > (1 << 24) || s_kv > (1 << 24))
    return WHY("logits.shape=[%lld,%lld] accepted", (long long)s_q, (long long)s_kv);
  if (a->topk < 1 || a->topk > 2048) return WHY("topk=%d accepted", a->topk);
  if (!dims_are(&a->ks, "ks", 1, (int64_t[]){s_q}, why, cap) || !dims_are(&a->ke, "ke", 1, (int64_t[]){s_q}, why, cap) ||
      !dims_are(&a->topk_idx, "topk_idx", 2, (int64_t[]){s_q, a->topk}, why, cap))
    return 0;
  if ((s_q > 1 && a->logits.stride[0] < s_kv) || a->logits.stride[0] % 4 || (ptrs && (uintptr_t)a->logits.data % 16))
    return WHY("logits.stride[0]=%lld accepted with s_kv=%lld", (long long)a->logits.stride[0], (long long)s_kv);
  if (s_q > 1 && a->topk_idx.stride[0] < a->topk)
    return WHY("topk_idx.stride[0]=%lld accepted with topk=%d", (long long)a->topk_idx.stride[0], a->topk);
  return ws_equal(ws, 0, why, cap);
}

static const field dsa_index_topk_fields[] = {
    FIELD(st_dsa_index_topk_args, logits, F_TENSOR), FIELD(st_dsa_index_topk_args, ks, F_TENSOR),
    FIELD(st_dsa_index_topk_args, ke, F_TENSOR),     FIELD(st_dsa_index_topk_args, topk_idx, F_TENSOR),
    FIELD(st_dsa_index_topk_args, topk, F_INT)};

#define DT st_dsa_index_topk_args
static const symbol dsa_index_topk_symbols[] = {
    {"s_q", 4, {AT(DT, logits, 0), AT(DT, ks, 0), AT(DT, ke, 0), AT(DT, topk_idx, 0)}},
    {"topk", 2, {AT(DT, topk, SITE_INT), AT(DT, topk_idx, 1)}},
};
#undef DT

static st_dispatch_variant dsa_index_topk_variant(const char *id, int threads, int filter) {
  st_dispatch_variant v = named(id, ST_OP_DSA_INDEX_TOPK);
  v.cfg.dsa_index_topk = (st_dsa_index_topk_config){.threads = threads, .filter = filter};
  return v;
}

/* ---- sparse_attn_decode and sparse_attn: caches and outputs ---------------- */

/* flavor 0: a bf16 (pages, 2, 128, Hkv, D) cache; 1: fp8 with per-token
 * scales. Both ops' structs name these fields alike. */
#define SET_KV(a, flavor)                                                                                              \
  do {                                                                                                                 \
    const st_dtype dt_ = (flavor) ? ST_DTYPE_FP8_E4M3 : ST_DTYPE_BF16;                                                 \
    st_tensor_contiguous(&(a)->k_cache, FAKE_PTR(2), dt_, 4, (int64_t[]){4096, 2, 128, 128});                          \
    const int64_t stride_[4] = {2 * 128 * 2 * 128, 128, 2 * 128, 1};                                                   \
    memcpy((a)->k_cache.stride, stride_, sizeof stride_);                                                              \
    (a)->v_cache = (a)->k_cache;                                                                                       \
    (a)->v_cache.data = (char *)FAKE_PTR(2) + 128 * 2 * 128 * st_dtype_bytes(dt_);                                     \
    if (flavor) {                                                                                                      \
      (a)->scale_mode = ST_KV_SCALE_TENSOR;                                                                            \
      st_tensor_contiguous(&(a)->k_scales, FAKE_PTR(8), ST_DTYPE_FP32, 3, (int64_t[]){4096, 2, 128});                  \
      st_tensor_contiguous(&(a)->v_scales, FAKE_PTR(9), ST_DTYPE_FP32, 3, (int64_t[]){4096, 2, 128});                  \
    }                                                                                                                  \
  } while (0)

typedef struct attn_view {
  const st_tensor *q, *k, *v, *ks, *vs, *idx, *bt, *seq, *o, *lse;
  st_kv_scale_mode mode; /* as an int, read through get_enum */
  float sm_scale, k_scale, v_scale;
} attn_view;

static int scales_ok(const attn_view *a, int mode, int ptrs, char *why, size_t cap) {
  if (mode == ST_KV_SCALE_NONE) return 1;
  if (get_enum(&a->k->dtype) != ST_DTYPE_FP8_E4M3) return WHY("scale_mode=%d accepted on a bf16 cache", mode);
  if (mode == ST_KV_SCALE_SCALAR) {
    if (!(isfinite(a->k_scale) && a->k_scale > 0 && isfinite(a->v_scale) && a->v_scale > 0))
      return WHY("k_scale=%g v_scale=%g accepted", (double)a->k_scale, (double)a->v_scale);
    return 1;
  }
  const int64_t want[3] = {a->k->shape[0], a->k->shape[1], 128};
  return view_ok(a->ks, "k_scales", ST_DTYPE_FP32, 3, 1, ptrs, why, cap) &&
         view_ok(a->vs, "v_scales", ST_DTYPE_FP32, 3, 1, ptrs, why, cap) &&
         dims_are(a->ks, "k_scales", 3, want, why, cap) && dims_are(a->vs, "v_scales", 3, want, why, cap);
}

/* What both attention ops ask of q, the caches, scales and outputs: rows
 * query rows; returns Hkv in *hkv. */
static int attn_common_ok(const attn_view *a, int64_t rows, int ptrs, int64_t *hkv, char *why, size_t cap) {
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0)) return WHY("sm_scale=%g accepted", (double)a->sm_scale);
  if (!view_ok(a->q, "q", ST_DTYPE_BF16, 3, 0, ptrs, why, cap) || !rows_aligned(a->q, "q", 16, ptrs, why, cap))
    return 0;
  const int64_t Hq = a->q->shape[1], D = a->q->shape[2];
  if (D != 64 && D != 128 && D != 256) return WHY("head_dim=%lld accepted", (long long)D);
  const int kdt = get_enum(&a->k->dtype);
  if (kdt != ST_DTYPE_BF16 && kdt != ST_DTYPE_FP8_E4M3) return WHY("k_cache.dtype=%d accepted", kdt);
  if (!view_ok(a->k, "k_cache", kdt, 4, 0, ptrs, why, cap) || !view_ok(a->v, "v_cache", kdt, 4, 0, ptrs, why, cap) ||
      !rows_aligned(a->k, "k_cache", 16, ptrs, why, cap) || !rows_aligned(a->v, "v_cache", 16, ptrs, why, cap))
    return 0;
  const int64_t Hkv = a->k->shape[1];
  const int64_t want[4] = {a->k->shape[0], Hkv, 128, D};
  if (!dims_are(a->k, "k_cache", 4, want, why, cap) || !dims_are(a->v, "v_cache", 4, want, why, cap)) return 0;
  if (Hq % Hkv || Hq / Hkv > 32 || Hkv > 65535) return WHY("Hq=%lld Hkv=%lld accepted", (long long)Hq, (long long)Hkv);
  const int mode = get_enum(&a->mode);
  if (mode < ST_KV_SCALE_NONE || mode > ST_KV_SCALE_TENSOR) return WHY("scale_mode=%d accepted", mode);
  if (!scales_ok(a, mode, ptrs, why, cap)) return 0;
  if (!view_ok(a->idx, "topk_idx", ST_DTYPE_INT32, 3, 0, ptrs, why, cap) ||
      !dims_are(a->idx, "topk_idx", 2, (int64_t[]){Hkv, rows}, why, cap))
    return 0;
  if (a->idx->shape[2] > 64) return WHY("topk=%lld accepted", (long long)a->idx->shape[2]);
  if (!view_ok(a->bt, "block_table", ST_DTYPE_INT32, 2, 0, ptrs, why, cap) ||
      !view_ok(a->seq, "seq_lens", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !dims_are(a->seq, "seq_lens", 1, (int64_t[]){a->bt->shape[0]}, why, cap) ||
      !view_ok(a->o, "o", ST_DTYPE_BF16, 3, 0, ptrs, why, cap) ||
      !dims_are(a->o, "o", 3, (int64_t[]){rows, Hq, D}, why, cap))
    return 0;
  if (a->lse->data && (!view_ok(a->lse, "lse", ST_DTYPE_FP32, 2, 0, ptrs, why, cap) ||
                       !dims_are(a->lse, "lse", 2, (int64_t[]){rows, Hq}, why, cap)))
    return 0;
  *hkv = Hkv;
  return 1;
}

#define ATTN_VIEW(a)                                                                                                   \
  (&(attn_view){&(a)->q, &(a)->k_cache, &(a)->v_cache, &(a)->k_scales, &(a)->v_scales, &(a)->topk_idx,                 \
                &(a)->block_table, &(a)->seq_lens, &(a)->o, &(a)->lse, (a)->scale_mode, (a)->sm_scale, (a)->k_scale,   \
                (a)->v_scale})

/* ---- sparse_attn_decode ---------------------------------------------------- */

static void sparse_attn_decode_valid(void *p, int flavor) {
  st_sparse_attn_decode_args *a = p;
  st_sparse_attn_decode_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){8, 32, 128});
  SET_KV(a, flavor);
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(3), ST_DTYPE_INT32, 3, (int64_t[]){2, 8, 16});
  st_tensor_contiguous(&a->block_table, FAKE_PTR(4), ST_DTYPE_INT32, 2, (int64_t[]){8, 256});
  st_tensor_contiguous(&a->seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a->o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){8, 32, 128});
  st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){8, 32}); /* not wanted until a case sets data */
  a->sm_scale = 0.088f;
  a->qlen = 1;
  a->max_context = 32768;
}

/* The split count a variant of fixed splits plans for topk entries. */
static int64_t decode_splits(const st_sparse_attn_decode_config *cfg, int64_t topk) {
  int64_t s = cfg->splits < topk ? cfg->splits : topk;
  if (cfg->algo == ST_SPARSE_ATTN_DECODE_SPLIT && s < 2) s = 2;
  if (s < 1) s = 1;
  return (int64_t)ceil_div(topk, ceil_div(topk, s));
}

static int sparse_attn_decode_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                     size_t cap) {
  const st_sparse_attn_decode_args *a = p;
  if (a->qlen < 1 || a->qlen > 4) return WHY("qlen=%d accepted", a->qlen);
  if (a->pdl != 0 && a->pdl != 1) return WHY("pdl=%d accepted", a->pdl);
  const int64_t rows = a->q.shape[0];
  int64_t Hkv = 0;
  if (!attn_common_ok(ATTN_VIEW(a), rows, ptrs, &Hkv, why, cap)) return 0;
  if (rows % a->qlen || rows > 65535) return WHY("R*qlen=%lld accepted with qlen %d", (long long)rows, a->qlen);
  if (a->block_table.shape[0] != rows / a->qlen)
    return WHY("block_table rows %lld accepted", (long long)a->block_table.shape[0]);
  if (!context_ok(a->max_context, a->block_table.shape[1], "block_table columns", why, cap)) return 0;
  const st_sparse_attn_decode_config *cfg = &v->cfg.sparse_attn_decode;
  const int64_t splits = decode_splits(cfg, a->topk_idx.shape[2]);
  if (splits == 1) return ws_equal(ws, 0, why, cap);
  const i128 items = (i128)rows * Hkv, states = items * splits * cfg->group;
  const i128 counters = cfg->algo == ST_SPARSE_ATTN_DECODE_SINGLE ? items * 4 : 0;
  return ws_equal(ws, ws_of(counters, ws_align(states * cfg->head_dim * 4) + ws_align(states * 8)), why, cap);
}

#define ATTN_FIELDS(T)                                                                                                 \
  FIELD(T, q, F_TENSOR), FIELD(T, k_cache, F_TENSOR), FIELD(T, v_cache, F_TENSOR), FIELD(T, scale_mode, F_ENUM),       \
      FIELD(T, k_scale, F_FLOAT), FIELD(T, v_scale, F_FLOAT), FIELD(T, k_scales, F_TENSOR),                            \
      FIELD(T, v_scales, F_TENSOR), FIELD(T, topk_idx, F_TENSOR), FIELD(T, block_table, F_TENSOR),                     \
      FIELD(T, seq_lens, F_TENSOR), FIELD(T, o, F_TENSOR), FIELD(T, lse, F_TENSOR), FIELD(T, sm_scale, F_FLOAT),       \
      FIELD(T, max_context, F_INT)

static const field sparse_attn_decode_fields[] = {ATTN_FIELDS(st_sparse_attn_decode_args),
                                                  FIELD(st_sparse_attn_decode_args, qlen, F_INT),
                                                  FIELD(st_sparse_attn_decode_args, pdl, F_INT)};

/* The dimensions both attention ops share. */
#define ATTN_SYMBOLS(T)                                                                                                \
  {"Hq", 3, {AT(T, q, 1), AT(T, o, 1), AT(T, lse, 1)}},                                                                \
      {"D", 4, {AT(T, q, 2), AT(T, k_cache, 3), AT(T, v_cache, 3), AT(T, o, 2)}},                                      \
      {"Hkv", 5, {AT(T, k_cache, 1), AT(T, v_cache, 1), AT(T, topk_idx, 0), AT(T, k_scales, 1), AT(T, v_scales, 1)}},  \
      {"pages", 4, {AT(T, k_cache, 0), AT(T, v_cache, 0), AT(T, k_scales, 0), AT(T, v_scales, 0)}},                    \
      {"topk", 1, {AT(T, topk_idx, 2)}}, {                                                                             \
    "max_blocks", 2, { AT(T, block_table, 1), AT(T, max_context, SITE_CONTEXT) }                                       \
  }

#define SD st_sparse_attn_decode_args
static const symbol sparse_attn_decode_symbols[] = {
    ATTN_SYMBOLS(SD),
    {"R",
     6,
     {AT(SD, q, 0), AT(SD, topk_idx, 1), AT(SD, block_table, 0), AT(SD, seq_lens, 0), AT(SD, o, 0), AT(SD, lse, 0)}},
};
#undef SD

static st_dispatch_variant sparse_attn_decode_variant(const char *id, st_dtype dt, st_sparse_attn_decode_algo algo,
                                                      int splits) {
  st_dispatch_variant v = named(id, ST_OP_SPARSE_ATTN_DECODE);
  v.cfg.sparse_attn_decode = (st_sparse_attn_decode_config){.dtype = dt,
                                                            .head_dim = 128,
                                                            .group = 16,
                                                            .warps_n = 4,
                                                            .stages = 1,
                                                            .algo = algo,
                                                            .cluster = 1,
                                                            .splits = splits};
  return v;
}

/* ---- sparse_attn ----------------------------------------------------------- */

static void sparse_attn_valid(void *p, int flavor) {
  st_sparse_attn_args *a = p;
  st_sparse_attn_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){1000, 32, 128});
  SET_KV(a, flavor);
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(3), ST_DTYPE_INT32, 3, (int64_t[]){2, 1000, 16});
  st_tensor_contiguous(&a->block_table, FAKE_PTR(4), ST_DTYPE_INT32, 2, (int64_t[]){2, 512});
  st_tensor_contiguous(&a->cu_seqlens_q, FAKE_PTR(7), ST_DTYPE_INT32, 1, (int64_t[]){3});
  st_tensor_contiguous(&a->seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){2});
  st_tensor_contiguous(&a->o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){1000, 32, 128});
  st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){1000, 32});
  a->sm_scale = 0.088f;
  a->max_context = 65536;
}

static int sparse_attn_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why, size_t cap) {
  const st_sparse_attn_args *a = p;
  const int64_t total_q = a->q.shape[0];
  int64_t Hkv = 0;
  if (!attn_common_ok(ATTN_VIEW(a), total_q, ptrs, &Hkv, why, cap)) return 0;
  const int64_t R = a->block_table.shape[0], topk = a->topk_idx.shape[2];
  if (!view_ok(&a->cu_seqlens_q, "cu_seqlens_q", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !dims_are(&a->cu_seqlens_q, "cu_seqlens_q", 1, (int64_t[]){R + 1}, why, cap) ||
      !context_ok(a->max_context, a->block_table.shape[1], "block_table columns", why, cap))
    return 0;
  if ((i128)R * ceil_div(a->max_context, ST_BLOCK_TOKENS) > INT32_MAX)
    return WHY("%lld requests x max_context=%d accepted", (long long)R, a->max_context);
  const st_sparse_attn_config *cfg = &v->cfg.sparse_attn;
  if (cfg->algo == ST_SPARSE_ATTN_TILE) return ws_equal(ws, 0, why, cap);
  /* Block-major: a chunk of at least min(64, total_q) tokens keeps every
   * entry's bf16 partial output, and the dense tiles a flag and a slot. */
  const i128 chunk = total_q < 64 ? total_q : 64;
  const i128 partials = (i128)Hkv * chunk * topk * cfg->group * cfg->head_dim * 2;
  const i128 dense_lists = cfg->dense ? (i128)2 * Hkv * R * topk * cfg->group * 4 : 0;
  return ws_at_least(ws, ws_of(0, partials + dense_lists), why, cap);
}

static const field sparse_attn_fields[] = {ATTN_FIELDS(st_sparse_attn_args),
                                           FIELD(st_sparse_attn_args, cu_seqlens_q, F_TENSOR)};

#define SA st_sparse_attn_args
static const symbol sparse_attn_symbols[] = {
    ATTN_SYMBOLS(SA),
    {"total_q", 4, {AT(SA, q, 0), AT(SA, topk_idx, 1), AT(SA, o, 0), AT(SA, lse, 0)}},
    {"R", 3, {AT(SA, block_table, 0), AT(SA, seq_lens, 0), AT_PLUS1(SA, cu_seqlens_q, 0)}},
};
#undef SA

static st_dispatch_variant sparse_attn_variant(const char *id, st_sparse_attn_algo algo, int two_pass) {
  st_dispatch_variant v = named(id, ST_OP_SPARSE_ATTN);
  st_sparse_attn_config c = {.algo = algo,
                             .dtype = ST_DTYPE_BF16,
                             .head_dim = 128,
                             .group = 16,
                             .tokens = algo == ST_SPARSE_ATTN_TILE ? 4 : 8,
                             .topk_cap = 64,
                             .stages = 1,
                             .ctas = 1,
                             .mtiles = 1};
  if (two_pass) { /* the dense tiles, overlapped chunks and the bulk merge: the widest plan */
    c.mtiles = 2;
    c.wgmma = 1;
    c.dense = 1;
    c.overlap = 1;
    c.merge_slots = 4;
  }
  v.cfg.sparse_attn = c;
  v.rank = 64;
  return v;
}

/* ---- the prefill indexer ops ----------------------------------------------- */

/* The scoring inputs index_score and index_prefill share. */
#define SET_INDEX_INPUTS(a, dt)                                                                                        \
  do {                                                                                                                 \
    st_tensor_contiguous(&(a)->q, FAKE_PTR(1), dt, 3, (int64_t[]){1000, 2, 128});                                      \
    st_tensor_contiguous(&(a)->k_cache, FAKE_PTR(2), dt, 3, (int64_t[]){4096, 128, 128});                              \
    st_tensor_contiguous(&(a)->block_table, FAKE_PTR(3), ST_DTYPE_INT32, 2, (int64_t[]){2, 512});                      \
    st_tensor_contiguous(&(a)->cu_seqlens_q, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){3});                          \
    st_tensor_contiguous(&(a)->seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){2});                              \
    (a)->max_context = 512 * 128;                                                                                      \
  } while (0)

/* What index_score and index_prefill ask of those inputs. */
static int index_inputs_ok(const st_tensor *q, const st_tensor *k, const st_tensor *bt, const st_tensor *cu,
                           const st_tensor *seq, int ptrs, char *why, size_t cap) {
  const int dt = get_enum(&q->dtype);
  if (dt != ST_DTYPE_BF16 && dt != ST_DTYPE_FP8_E4M3) return WHY("q.dtype=%d accepted", dt);
  if (!view_ok(q, "q", dt, 3, 0, ptrs, why, cap) || !view_ok(k, "k_cache", dt, 3, 0, ptrs, why, cap) ||
      !view_ok(bt, "block_table", ST_DTYPE_INT32, 2, 0, ptrs, why, cap) ||
      !view_ok(cu, "cu_seqlens_q", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(seq, "seq_lens", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) || !rows_aligned(q, "q", 16, ptrs, why, cap) ||
      !rows_aligned(k, "k_cache", 16, ptrs, why, cap))
    return 0;
  const int64_t R = seq->shape[0];
  if (q->shape[1] > 65535 || R > 65535) return WHY("H=%lld R=%lld accepted", (long long)q->shape[1], (long long)R);
  return dims_are(k, "k_cache", 3, (int64_t[]){k->shape[0], 128, q->shape[2]}, why, cap) &&
         dims_are(bt, "block_table", 1, (int64_t[]){R}, why, cap) &&
         dims_are(cu, "cu_seqlens_q", 1, (int64_t[]){R + 1}, why, cap);
}

static const st_index_score_config score_config = {
    .dtype = ST_DTYPE_BF16, .head_dim = 128, .rows = 256, .warpgroups = 2, .stages = 2};

/* ---- index_score ----------------------------------------------------------- */

static void index_score_valid(void *p, int flavor) {
  st_index_score_args *a = p;
  st_index_score_args_init(a);
  SET_INDEX_INPUTS(a, flavor ? ST_DTYPE_FP8_E4M3 : ST_DTYPE_BF16);
  st_tensor_contiguous(&a->score, FAKE_PTR(6), ST_DTYPE_FP32, 3, (int64_t[]){2, 1000, 512});
  a->scale = 0.088f;
}

static int index_score_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why, size_t cap) {
  (void)v;
  const st_index_score_args *a = p;
  if (!index_inputs_ok(&a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens, ptrs, why, cap)) return 0;
  if (!(isfinite(a->scale) && a->scale > 0)) return WHY("scale=%g accepted", (double)a->scale);
  if (!view_ok(&a->score, "score", ST_DTYPE_FP32, 3, 0, ptrs, why, cap) ||
      !dims_are(&a->score, "score", 2, (int64_t[]){a->q.shape[1], a->q.shape[0]}, why, cap))
    return 0;
  const int64_t cols = a->block_table.shape[1] < a->score.shape[2] ? a->block_table.shape[1] : a->score.shape[2];
  return context_ok(a->max_context, cols, "block_table and score columns", why, cap) && ws_equal(ws, 0, why, cap);
}

static const field index_score_fields[] = {
    FIELD(st_index_score_args, q, F_TENSOR),           FIELD(st_index_score_args, k_cache, F_TENSOR),
    FIELD(st_index_score_args, block_table, F_TENSOR), FIELD(st_index_score_args, cu_seqlens_q, F_TENSOR),
    FIELD(st_index_score_args, seq_lens, F_TENSOR),    FIELD(st_index_score_args, score, F_TENSOR),
    FIELD(st_index_score_args, scale, F_FLOAT),        FIELD(st_index_score_args, max_context, F_INT)};

#define IS st_index_score_args
static const symbol index_score_symbols[] = {
    {"total_q", 2, {AT(IS, q, 0), AT(IS, score, 1)}},
    {"H", 2, {AT(IS, q, 1), AT(IS, score, 0)}},
    {"D", 2, {AT(IS, q, 2), AT(IS, k_cache, 2)}},
    {"pages", 1, {AT(IS, k_cache, 0)}},
    {"R", 3, {AT(IS, block_table, 0), AT(IS, seq_lens, 0), AT_PLUS1(IS, cu_seqlens_q, 0)}},
    {"max_blocks", 3, {AT(IS, block_table, 1), AT(IS, score, 2), AT(IS, max_context, SITE_CONTEXT)}},
};
#undef IS

static st_dispatch_variant index_score_variant(const char *id, int balanced, int chunk_blocks) {
  st_dispatch_variant v = named(id, ST_OP_INDEX_SCORE);
  v.cfg.index_score = score_config;
  v.cfg.index_score.balanced = balanced;
  v.cfg.index_score.chunk_blocks = chunk_blocks;
  return v;
}

/* ---- index_prefill --------------------------------------------------------- */

static void index_prefill_valid(void *p, int flavor) {
  st_index_prefill_args *a = p;
  st_index_prefill_args_init(a);
  SET_INDEX_INPUTS(a, flavor ? ST_DTYPE_FP8_E4M3 : ST_DTYPE_BF16);
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(7), ST_DTYPE_INT32, 3, (int64_t[]){2, 1000, 16});
  a->topk = 16;
  a->init_blocks = 1;
  a->local_blocks = 2;
}

static int index_prefill_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                size_t cap) {
  const st_index_prefill_args *a = p;
  if (!selection_ok(a->topk, a->init_blocks, a->local_blocks, why, cap) ||
      !index_inputs_ok(&a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens, ptrs, why, cap) ||
      !view_ok(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, 0, ptrs, why, cap) ||
      !dims_are(&a->topk_idx, "topk_idx", 3, (int64_t[]){a->q.shape[1], a->q.shape[0], a->topk}, why, cap) ||
      !context_ok(a->max_context, a->block_table.shape[1], "block_table columns", why, cap))
    return 0;
  const i128 rows = (i128)a->q.shape[1] * a->q.shape[0];
  /* Fused: each row's list of topk (key, block) pairs per chunk, at least
   * one chunk; composed: each row's keys of every block. */
  if (v->cfg.index_prefill.algo == ST_INDEX_PREFILL_FUSED)
    return ws_at_least(ws, ws_of(0, rows * a->topk * 8), why, cap);
  return ws_equal(ws, ws_of(0, ws_align(rows * ceil_div(a->max_context, ST_BLOCK_TOKENS) * 4)), why, cap);
}

static const field index_prefill_fields[] = {
    FIELD(st_index_prefill_args, q, F_TENSOR),           FIELD(st_index_prefill_args, k_cache, F_TENSOR),
    FIELD(st_index_prefill_args, block_table, F_TENSOR), FIELD(st_index_prefill_args, cu_seqlens_q, F_TENSOR),
    FIELD(st_index_prefill_args, seq_lens, F_TENSOR),    FIELD(st_index_prefill_args, topk_idx, F_TENSOR),
    FIELD(st_index_prefill_args, topk, F_INT),           FIELD(st_index_prefill_args, init_blocks, F_INT),
    FIELD(st_index_prefill_args, local_blocks, F_INT),   FIELD(st_index_prefill_args, max_context, F_INT)};

#define IP st_index_prefill_args
static const symbol index_prefill_symbols[] = {
    {"total_q", 2, {AT(IP, q, 0), AT(IP, topk_idx, 1)}},
    {"H", 2, {AT(IP, q, 1), AT(IP, topk_idx, 0)}},
    {"D", 2, {AT(IP, q, 2), AT(IP, k_cache, 2)}},
    {"pages", 1, {AT(IP, k_cache, 0)}},
    {"R", 3, {AT(IP, block_table, 0), AT(IP, seq_lens, 0), AT_PLUS1(IP, cu_seqlens_q, 0)}},
    {"topk", 2, {AT(IP, topk, SITE_INT), AT(IP, topk_idx, 2)}},
    {"max_blocks", 2, {AT(IP, block_table, 1), AT(IP, max_context, SITE_CONTEXT)}},
};
#undef IP

static st_dispatch_variant index_prefill_variant(const char *id, st_index_prefill_algo algo, int topk_cap) {
  st_dispatch_variant v = named(id, ST_OP_INDEX_PREFILL);
  v.cfg.index_prefill = (st_index_prefill_config){.score = score_config, .algo = algo, .topk_cap = topk_cap};
  return v;
}

/* ---- index_topk ------------------------------------------------------------ */

static void index_topk_valid(void *p, int flavor) {
  (void)flavor;
  st_index_topk_args *a = p;
  st_index_topk_args_init(a);
  st_tensor_contiguous(&a->score, FAKE_PTR(6), ST_DTYPE_FP32, 3, (int64_t[]){2, 1000, 512});
  st_tensor_contiguous(&a->cu_seqlens_q, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){3});
  st_tensor_contiguous(&a->seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){2});
  st_tensor_contiguous(&a->topk_idx, FAKE_PTR(7), ST_DTYPE_INT32, 3, (int64_t[]){2, 1000, 16});
  a->topk = 16;
  a->init_blocks = 1;
  a->local_blocks = 2;
  a->max_context = 512 * 128;
}

static int index_topk_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why, size_t cap) {
  (void)v;
  const st_index_topk_args *a = p;
  if (!selection_ok(a->topk, a->init_blocks, a->local_blocks, why, cap) ||
      !view_ok(&a->score, "score", ST_DTYPE_FP32, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->cu_seqlens_q, "cu_seqlens_q", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
      !view_ok(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, 0, ptrs, why, cap))
    return 0;
  const int64_t H = a->score.shape[0], total_q = a->score.shape[1];
  if (H > 65535) return WHY("H=%lld accepted", (long long)H);
  return dims_are(&a->cu_seqlens_q, "cu_seqlens_q", 1, (int64_t[]){a->seq_lens.shape[0] + 1}, why, cap) &&
         dims_are(&a->topk_idx, "topk_idx", 3, (int64_t[]){H, total_q, a->topk}, why, cap) &&
         context_ok(a->max_context, a->score.shape[2], "score columns", why, cap) && ws_equal(ws, 0, why, cap);
}

static const field index_topk_fields[] = {
    FIELD(st_index_topk_args, score, F_TENSOR),     FIELD(st_index_topk_args, cu_seqlens_q, F_TENSOR),
    FIELD(st_index_topk_args, seq_lens, F_TENSOR),  FIELD(st_index_topk_args, topk_idx, F_TENSOR),
    FIELD(st_index_topk_args, topk, F_INT),         FIELD(st_index_topk_args, init_blocks, F_INT),
    FIELD(st_index_topk_args, local_blocks, F_INT), FIELD(st_index_topk_args, max_context, F_INT)};

#define IT st_index_topk_args
static const symbol index_topk_symbols[] = {
    {"H", 2, {AT(IT, score, 0), AT(IT, topk_idx, 0)}},
    {"total_q", 2, {AT(IT, score, 1), AT(IT, topk_idx, 1)}},
    {"R", 2, {AT(IT, seq_lens, 0), AT_PLUS1(IT, cu_seqlens_q, 0)}},
    {"topk", 2, {AT(IT, topk, SITE_INT), AT(IT, topk_idx, 2)}},
    {"max_blocks", 2, {AT(IT, score, 2), AT(IT, max_context, SITE_CONTEXT)}},
};
#undef IT

static st_dispatch_variant index_topk_variant(const char *id, st_index_topk_algo algo) {
  st_dispatch_variant v = named(id, ST_OP_INDEX_TOPK);
  v.cfg.index_topk = (st_index_topk_config){
      .algo = algo, .keys = algo == ST_INDEX_TOPK_WARP ? 32 : 0, .rows = 8, .threads = 256, .topk_cap = 64};
  return v;
}

/* ---- mla_sparse_decode ------------------------------------------------------ */

/* flavor 0: a bf16 cache; 1: the 656-byte fp8 rows. topk_length and the
 * sink wanted, lse not until a case sets its data. */
static void mla_sparse_decode_valid(void *p, int flavor) {
  st_mla_sparse_decode_args *a = p;
  st_mla_sparse_decode_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){8, 128, 576});
  st_tensor_contiguous(&a->kv_cache, FAKE_PTR(2), flavor ? ST_DTYPE_FP8_E4M3 : ST_DTYPE_BF16, 3,
                       (int64_t[]){1024, 64, flavor ? 656 : 576});
  st_tensor_contiguous(&a->indices, FAKE_PTR(3), ST_DTYPE_INT32, 2, (int64_t[]){8, 2048});
  st_tensor_contiguous(&a->topk_length, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a->attn_sink, FAKE_PTR(5), ST_DTYPE_FP32, 1, (int64_t[]){128});
  st_tensor_contiguous(&a->o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){8, 128, 512});
  st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){8, 128});
  a->sm_scale = 0.0721f;
  a->qlen = 1;
}

static int mla_sparse_decode_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                    size_t cap) {
  const st_mla_sparse_decode_args *a = p;
  if (a->qlen < 1 || a->qlen > 4) return WHY("qlen=%d accepted", a->qlen);
  if (a->pdl != 0 && a->pdl != 1) return WHY("pdl=%d accepted", a->pdl);
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0)) return WHY("sm_scale=%g accepted", (double)a->sm_scale);
  const int kdt = get_enum(&a->kv_cache.dtype);
  if (kdt != ST_DTYPE_BF16 && kdt != ST_DTYPE_FP8_E4M3) return WHY("kv_cache.dtype=%d accepted", kdt);
  if (!view_ok(&a->q, "q", ST_DTYPE_BF16, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->kv_cache, "kv_cache", kdt, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->indices, "indices", ST_DTYPE_INT32, 2, 0, ptrs, why, cap) ||
      !view_ok(&a->o, "o", ST_DTYPE_BF16, 3, 0, ptrs, why, cap))
    return 0;
  const int64_t rows = a->q.shape[0], Hq = a->q.shape[1], topk = a->indices.shape[1];
  if (rows % a->qlen || rows > 65535) return WHY("B*qlen=%lld accepted with qlen %d", (long long)rows, a->qlen);
  if (Hq % 16 || Hq > 128) return WHY("Hq=%lld accepted", (long long)Hq);
  if (topk > 2048) return WHY("topk=%lld accepted", (long long)topk);
  const int64_t page = a->kv_cache.shape[1];
  if (page % 16 || page > 1024) return WHY("page_size=%lld accepted", (long long)page);
  if ((i128)a->kv_cache.shape[0] * page > INT32_MAX) return WHY("%lld pages accepted", (long long)a->kv_cache.shape[0]);
  if (!dims_are(&a->q, "q", 3, (int64_t[]){rows, Hq, 576}, why, cap) ||
      !dims_are(&a->kv_cache, "kv_cache", 3, (int64_t[]){a->kv_cache.shape[0], page, kdt == ST_DTYPE_BF16 ? 576 : 656},
                why, cap) ||
      !dims_are(&a->indices, "indices", 1, (int64_t[]){rows}, why, cap) ||
      !dims_are(&a->o, "o", 3, (int64_t[]){rows, Hq, 512}, why, cap) ||
      !rows_aligned(&a->q, "q", 16, ptrs, why, cap) || !rows_aligned(&a->kv_cache, "kv_cache", 16, ptrs, why, cap))
    return 0;
  if (a->topk_length.data && (!view_ok(&a->topk_length, "topk_length", ST_DTYPE_INT32, 1, 0, ptrs, why, cap) ||
                              !dims_are(&a->topk_length, "topk_length", 1, (int64_t[]){rows / a->qlen}, why, cap)))
    return 0;
  if (a->attn_sink.data && (!view_ok(&a->attn_sink, "attn_sink", ST_DTYPE_FP32, 1, 0, ptrs, why, cap) ||
                            !dims_are(&a->attn_sink, "attn_sink", 1, (int64_t[]){Hq}, why, cap)))
    return 0;
  if (a->lse.data && (!view_ok(&a->lse, "lse", ST_DTYPE_FP32, 2, 0, ptrs, why, cap) ||
                      !dims_are(&a->lse, "lse", 2, (int64_t[]){rows, Hq}, why, cap)))
    return 0;
  /* Fixed splits: at most topk, none empty; partial (o, m, l) per (row,
   * split, head). */
  const int64_t want = v->cfg.mla_sparse_decode.splits < topk ? v->cfg.mla_sparse_decode.splits : topk;
  const int64_t splits = (int64_t)ceil_div(topk, ceil_div(topk, want));
  if (splits == 1) return ws_equal(ws, 0, why, cap);
  const i128 states = (i128)rows * splits * Hq;
  return ws_equal(ws, ws_of(0, ws_align(states * 512 * 4) + ws_align(states * 8)), why, cap);
}

#define MD st_mla_sparse_decode_args
static const field mla_sparse_decode_fields[] = {
    FIELD(MD, q, F_TENSOR),    FIELD(MD, kv_cache, F_TENSOR), FIELD(MD, indices, F_TENSOR),
    FIELD(MD, topk_length, F_TENSOR), FIELD(MD, attn_sink, F_TENSOR), FIELD(MD, o, F_TENSOR),
    FIELD(MD, lse, F_TENSOR),  FIELD(MD, sm_scale, F_FLOAT),  FIELD(MD, qlen, F_INT),
    FIELD(MD, pdl, F_INT)};

static const symbol mla_sparse_decode_symbols[] = {
    {"rows", 4, {AT(MD, q, 0), AT(MD, indices, 0), AT(MD, o, 0), AT(MD, lse, 0)}},
    {"Hq", 4, {AT(MD, q, 1), AT(MD, o, 1), AT(MD, lse, 1), AT(MD, attn_sink, 0)}},
    {"B", 1, {AT(MD, topk_length, 0)}},
    {"pages", 1, {AT(MD, kv_cache, 0)}},
    {"page_size", 1, {AT(MD, kv_cache, 1)}},
    {"topk", 1, {AT(MD, indices, 1)}},
};
#undef MD

static st_dispatch_variant mla_sparse_decode_variant(const char *id, st_dtype dt, int splits) {
  st_dispatch_variant v = named(id, ST_OP_MLA_SPARSE_DECODE);
  v.cfg.mla_sparse_decode = (st_mla_sparse_decode_config){
      .dtype = dt, .heads_per_cta = 16, .tile_tokens = 64, .threads = 128, .mma = 1, .splits = splits};
  return v;
}

/* ---- mla_sparse_prefill ----------------------------------------------------- */

/* topk_length, the sink and max_logits wanted, lse not until a case sets
 * its data. */
static void mla_sparse_prefill_valid(void *p, int flavor) {
  (void)flavor;
  st_mla_sparse_prefill_args *a = p;
  st_mla_sparse_prefill_args_init(a);
  st_tensor_contiguous(&a->q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){8, 128, 576});
  st_tensor_contiguous(&a->kv, FAKE_PTR(2), ST_DTYPE_BF16, 3, (int64_t[]){4096, 1, 576});
  st_tensor_contiguous(&a->indices, FAKE_PTR(3), ST_DTYPE_INT32, 3, (int64_t[]){8, 1, 2048});
  st_tensor_contiguous(&a->topk_length, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a->attn_sink, FAKE_PTR(5), ST_DTYPE_FP32, 1, (int64_t[]){128});
  st_tensor_contiguous(&a->o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){8, 128, 512});
  st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){8, 128});
  st_tensor_contiguous(&a->max_logits, FAKE_PTR(7), ST_DTYPE_FP32, 2, (int64_t[]){8, 128});
  a->sm_scale = 0.0721f;
}

/* An optional [n] or [s_q, h_q] tensor: absent, or as wanted. */
static int mla_prefill_optional_ok(const st_tensor *t, const char *name, int dt, int ndim, const int64_t *want,
                                   int ptrs, char *why, size_t cap) {
  return !t->data || (view_ok(t, name, dt, ndim, 0, ptrs, why, cap) && dims_are(t, name, ndim, want, why, cap));
}

static int mla_sparse_prefill_oracle(const void *p, const st_dispatch_variant *v, int ptrs, size_t ws, char *why,
                                     size_t cap) {
  const st_mla_sparse_prefill_args *a = p;
  if (a->pdl != 0 && a->pdl != 1) return WHY("pdl=%d accepted", a->pdl);
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0)) return WHY("sm_scale=%g accepted", (double)a->sm_scale);
  if (!view_ok(&a->q, "q", ST_DTYPE_BF16, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->kv, "kv", ST_DTYPE_BF16, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->indices, "indices", ST_DTYPE_INT32, 3, 0, ptrs, why, cap) ||
      !view_ok(&a->o, "o", ST_DTYPE_BF16, 3, 0, ptrs, why, cap))
    return 0;
  const int64_t s_q = a->q.shape[0], Hq = a->q.shape[1], topk = a->indices.shape[2];
  if (s_q > (1 << 20)) return WHY("s_q=%lld accepted", (long long)s_q);
  if (Hq % 16 || Hq > 128) return WHY("Hq=%lld accepted", (long long)Hq);
  if (topk > 2048) return WHY("topk=%lld accepted", (long long)topk);
  if (!dims_are(&a->q, "q", 3, (int64_t[]){s_q, Hq, 576}, why, cap) ||
      !dims_are(&a->kv, "kv", 3, (int64_t[]){a->kv.shape[0], 1, 576}, why, cap) ||
      !dims_are(&a->indices, "indices", 2, (int64_t[]){s_q, 1}, why, cap) ||
      !dims_are(&a->o, "o", 3, (int64_t[]){s_q, Hq, 512}, why, cap) ||
      !rows_aligned(&a->q, "q", 16, ptrs, why, cap) || !rows_aligned(&a->kv, "kv", 16, ptrs, why, cap))
    return 0;
  const int64_t pairs[2] = {s_q, Hq};
  if (!mla_prefill_optional_ok(&a->topk_length, "topk_length", ST_DTYPE_INT32, 1, pairs, ptrs, why, cap) ||
      !mla_prefill_optional_ok(&a->attn_sink, "attn_sink", ST_DTYPE_FP32, 1, pairs + 1, ptrs, why, cap) ||
      !mla_prefill_optional_ok(&a->lse, "lse", ST_DTYPE_FP32, 2, pairs, ptrs, why, cap) ||
      !mla_prefill_optional_ok(&a->max_logits, "max_logits", ST_DTYPE_FP32, 2, pairs, ptrs, why, cap))
    return 0;
  /* Fixed splits: at most topk, none empty; partial (o, m, l) per (token,
   * split, head). */
  const int64_t want = v->cfg.mla_sparse_prefill.splits < topk ? v->cfg.mla_sparse_prefill.splits : topk;
  const int64_t splits = (int64_t)ceil_div(topk, ceil_div(topk, want));
  if (splits == 1) return ws_equal(ws, 0, why, cap);
  const i128 states = (i128)s_q * splits * Hq;
  return ws_equal(ws, ws_of(0, ws_align(states * 512 * 4) + ws_align(states * 8)), why, cap);
}

#define MP st_mla_sparse_prefill_args
static const field mla_sparse_prefill_fields[] = {
    FIELD(MP, q, F_TENSOR),           FIELD(MP, kv, F_TENSOR),        FIELD(MP, indices, F_TENSOR),
    FIELD(MP, topk_length, F_TENSOR), FIELD(MP, attn_sink, F_TENSOR), FIELD(MP, o, F_TENSOR),
    FIELD(MP, lse, F_TENSOR),         FIELD(MP, max_logits, F_TENSOR), FIELD(MP, sm_scale, F_FLOAT),
    FIELD(MP, pdl, F_INT)};

static const symbol mla_sparse_prefill_symbols[] = {
    {"s_q", 6,
     {AT(MP, q, 0), AT(MP, indices, 0), AT(MP, o, 0), AT(MP, lse, 0), AT(MP, max_logits, 0), AT(MP, topk_length, 0)}},
    {"Hq", 5, {AT(MP, q, 1), AT(MP, o, 1), AT(MP, lse, 1), AT(MP, max_logits, 1), AT(MP, attn_sink, 0)}},
    {"s_kv", 1, {AT(MP, kv, 0)}},
    {"topk", 1, {AT(MP, indices, 2)}},
};
#undef MP

static st_dispatch_variant mla_sparse_prefill_variant(const char *id, int splits) {
  st_dispatch_variant v = named(id, ST_OP_MLA_SPARSE_PREFILL);
  v.cfg.mla_sparse_prefill = (st_mla_sparse_prefill_config){
      .dtype = ST_DTYPE_BF16, .heads_per_cta = 16, .tile_tokens = 64, .threads = 128, .mma = 1, .splits = splits};
  return v;
}

/* ---- the table --------------------------------------------------------------- */

#define OP_DESC(op, n_flavors)                                                                                         \
  .name = #op, .flavors = (n_flavors), .make_valid = op##_valid, .fields = op##_fields,                                \
  .n_fields = COUNT(op##_fields), .symbols = op##_symbols, .n_symbols = COUNT(op##_symbols),                           \
  .workspace_size = ws_##op, .prepare = prepare_##op, .launch = launch_##op, .oracle = op##_oracle

static void make_ops(op_desc *ops) {
  ops[0] = (op_desc){OP_DESC(index_decode, 2), .op = ST_OP_INDEX_DECODE, .n_variants = 3};
  ops[0].variants[0] = index_decode_variant("split", ST_DTYPE_BF16, ST_INDEX_DECODE_SPLIT);
  ops[0].variants[1] = index_decode_variant("single", ST_DTYPE_BF16, ST_INDEX_DECODE_SINGLE);
  ops[0].variants[2] = index_decode_variant("fp8_split", ST_DTYPE_FP8_E4M3, ST_INDEX_DECODE_SPLIT);
  ops[1] = (op_desc){OP_DESC(sparse_attn_decode, 2), .op = ST_OP_SPARSE_ATTN_DECODE, .n_variants = 3};
  ops[1].variants[0] = sparse_attn_decode_variant("single4", ST_DTYPE_BF16, ST_SPARSE_ATTN_DECODE_SINGLE, 4);
  ops[1].variants[1] = sparse_attn_decode_variant("split2", ST_DTYPE_BF16, ST_SPARSE_ATTN_DECODE_SPLIT, 2);
  ops[1].variants[2] = sparse_attn_decode_variant("fp8_single4", ST_DTYPE_FP8_E4M3, ST_SPARSE_ATTN_DECODE_SINGLE, 4);
  ops[2] = (op_desc){OP_DESC(sparse_attn, 1), .op = ST_OP_SPARSE_ATTN, .n_variants = 3};
  ops[2].variants[0] = sparse_attn_variant("tile", ST_SPARSE_ATTN_TILE, 0);
  ops[2].variants[1] = sparse_attn_variant("block", ST_SPARSE_ATTN_BLOCK, 0);
  ops[2].variants[2] = sparse_attn_variant("two_pass", ST_SPARSE_ATTN_BLOCK, 1);
  ops[3] = (op_desc){OP_DESC(index_score, 1), .op = ST_OP_INDEX_SCORE, .n_variants = 3};
  ops[3].variants[0] = index_score_variant("balanced", 1, 0);
  ops[3].variants[1] = index_score_variant("auto_chunk", 0, 0);
  ops[3].variants[2] = index_score_variant("chunk16", 0, 16);
  ops[4] = (op_desc){OP_DESC(index_prefill, 1), .op = ST_OP_INDEX_PREFILL, .n_variants = 3};
  ops[4].variants[0] = index_prefill_variant("fused16", ST_INDEX_PREFILL_FUSED, 16);
  ops[4].variants[1] = index_prefill_variant("fused64", ST_INDEX_PREFILL_FUSED, 64);
  ops[4].variants[2] = index_prefill_variant("composed", ST_INDEX_PREFILL_COMPOSED, 64);
  ops[5] = (op_desc){OP_DESC(index_topk, 1), .op = ST_OP_INDEX_TOPK, .n_variants = 2};
  ops[5].variants[0] = index_topk_variant("cta", ST_INDEX_TOPK_CTA);
  ops[5].variants[1] = index_topk_variant("warp", ST_INDEX_TOPK_WARP);
  ops[6] = (op_desc){OP_DESC(mla_sparse_decode, 2), .op = ST_OP_MLA_SPARSE_DECODE, .n_variants = 3};
  ops[6].variants[0] = mla_sparse_decode_variant("s4", ST_DTYPE_BF16, 4);
  ops[6].variants[1] = mla_sparse_decode_variant("s1", ST_DTYPE_BF16, 1);
  ops[6].variants[2] = mla_sparse_decode_variant("fp8_s4", ST_DTYPE_FP8_E4M3, 4);
  ops[7] = (op_desc){OP_DESC(dsa_index_decode, 1), .op = ST_OP_DSA_INDEX_DECODE, .n_variants = 2};
  ops[7].variants[0] = dsa_index_decode_variant("filter", 1);
  ops[7].variants[1] = dsa_index_decode_variant("radix", 0);
  ops[8] = (op_desc){OP_DESC(mla_sparse_prefill, 1), .op = ST_OP_MLA_SPARSE_PREFILL, .n_variants = 2};
  ops[8].variants[0] = mla_sparse_prefill_variant("s4", 4);
  ops[8].variants[1] = mla_sparse_prefill_variant("s1", 1);
  ops[9] = (op_desc){OP_DESC(dsa_index_logits, 1), .op = ST_OP_DSA_INDEX_LOGITS, .n_variants = 3};
  ops[9].variants[0] = dsa_index_logits_variant("h64", 64, 4, 0);
  ops[9].variants[1] = dsa_index_logits_variant("h64_s7", 64, 4, 7);
  ops[9].variants[2] = dsa_index_logits_variant("h32", 32, 8, 0);
  ops[10] = (op_desc){OP_DESC(dsa_index_topk, 1), .op = ST_OP_DSA_INDEX_TOPK, .n_variants = 2};
  ops[10].variants[0] = dsa_index_topk_variant("t1024f", 1024, 1);
  ops[10].variants[1] = dsa_index_topk_variant("t512", 512, 0);
}

enum { N_OPS = 11 };

/* Room for any op's arguments, aligned for each. */
typedef union any_args {
  st_index_decode_args index_decode;
  st_sparse_attn_decode_args sparse_attn_decode;
  st_sparse_attn_args sparse_attn;
  st_index_score_args index_score;
  st_index_prefill_args index_prefill;
  st_index_topk_args index_topk;
  st_mla_sparse_decode_args mla_sparse_decode;
  st_dsa_index_decode_args dsa_index_decode;
  st_mla_sparse_prefill_args mla_sparse_prefill;
  st_dsa_index_logits_args dsa_index_logits;
  st_dsa_index_topk_args dsa_index_topk;
} any_args;

/* ---- running a case ---------------------------------------------------------- */

typedef struct case_ctx {
  const op_desc *op;
  const st_dispatch_variant *v;
  uint64_t seed;
  int index;
  const char *log;
} case_ctx;

static void expect_defined(const case_ctx *c, st_handle *h, const char *entry, st_status st) {
  const int code = (int)st;
  if (code < ST_OK || code > ST_ERR_UNSUPPORTED)
    fail_msg("seed %llu case %d: %s (%s) returned %d:%s", (unsigned long long)c->seed, c->index, entry, c->v->name,
             (int)st, c->log);
  const char *msg = st_last_error(h);
  if (st != ST_OK && msg[0] == '\0')
    fail_msg("seed %llu case %d: %s (%s) returned %s with no message:%s", (unsigned long long)c->seed, c->index, entry,
             c->v->name, st_status_name(st), c->log);
  /* A refused argument is named with its value ("topk=80 is outside 1..64"). */
  if (st == ST_ERR_INVALID_ARG && !strchr(msg, '=') && !strstr(msg, " is NULL"))
    fail_msg("seed %llu case %d: %s (%s): \"%s\" names no argument=value:%s", (unsigned long long)c->seed, c->index,
             entry, c->v->name, msg, c->log);
}

static void expect_contract(const case_ctx *c, const void *args, const char *entry, int pointers, size_t ws) {
  char why[256] = "";
  if (!c->op->oracle(args, c->v, pointers, ws, why, sizeof why))
    fail_msg("seed %llu case %d: %s (%s) accepted arguments the contract refuses: %s; mutations:%s",
             (unsigned long long)c->seed, c->index, entry, c->v->name, why, c->log);
}

static void expect(const case_ctx *c, int ok, const char *what) {
  if (!ok)
    fail_msg("seed %llu case %d (%s): %s; mutations:%s", (unsigned long long)c->seed, c->index, c->v->name, what,
             c->log);
}

/* The three entries on `args`: the query, prepare (both read no pointer,
 * so they agree), and the launch, which ends at ST_ERR_NO_DRIVER on this
 * handle once every check passed, the query's workspace size included.
 * Returns ACCEPTED_QUERY, | ACCEPTED_LAUNCH when the launch got that far. */
enum { ACCEPTED_QUERY = 1, ACCEPTED_LAUNCH = 2 };
static int run_entries(const case_ctx *c, st_handle *h, const void *args, uint64_t *rng) {
  const op_desc *op = c->op;
  size_t ws = 12345;
  const st_status queried = op->workspace_size(h, args, &ws);
  expect_defined(c, h, "workspace_size", queried);
  if (queried == ST_OK) expect_contract(c, args, "workspace_size", 0, ws);
  expect(c, queried == ST_OK || ws == 0, "a refused query left bytes set");
  const st_status prepared = op->prepare(h, args);
  expect_defined(c, h, "prepare", prepared);
  /* ... but for prepare of overlapping variants, which makes the side
   * stream, on the device this handle lacks. */
  expect(c, prepared == queried || (queried == ST_OK && prepared == ST_ERR_NO_DRIVER),
         "prepare and the workspace query disagree");
  const int sized = queried == ST_OK;
  void *buf = sized || pick(rng, 2) ? FAKE_PTR(60) : NULL;
  const size_t bytes = sized ? ws : (size_t)hostile_int64(rng);
  const st_status launched = op->launch(h, args, buf, bytes, NULL);
  expect_defined(c, h, "launch", launched);
  expect(c, launched != ST_OK, "a launch without a device returned ST_OK");
  expect(c, !(sized && launched == ST_ERR_WORKSPACE), "the launch refused the workspace size its query reported");
  if (launched == ST_ERR_NO_DRIVER) {
    expect(c, sized, "the launch passed arguments the workspace query refused");
    expect_contract(c, args, "launch", 1, WS_UNKNOWN);
  }
  return (sized ? ACCEPTED_QUERY : 0) | (launched == ST_ERR_NO_DRIVER ? ACCEPTED_LAUNCH : 0);
}

/* Runs the op's cases; counts[0]: accepted by the query, [1]: launches
 * that passed every check. */
static void fuzz_op(const op_desc *op, st_handle **handles, uint64_t seed, uint64_t *rng, int counts[2]) {
  any_args args;
  char log[512];
  for (int i = 0; i < CASES_PER_OP; i++) {
    const size_t vi = pick(rng, op->n_variants);
    op->make_valid(&args, (int)pick(rng, (size_t)op->flavors));
    log[0] = '\0';
    const int n = 1 + (int)pick(rng, 3);
    for (int m = 0; m < n; m++) {
      if (pick(rng, 10) < 3)
        mutate_symbol(&args, &op->symbols[pick(rng, op->n_symbols)], rng, log, sizeof log);
      else
        mutate_field(&args, &op->fields[pick(rng, op->n_fields)], rng, log, sizeof log);
    }
    const case_ctx c = {.op = op, .v = &op->variants[vi], .seed = seed, .index = i, .log = log};
    const int got = run_entries(&c, handles[vi], &args, rng);
    counts[0] += (got & ACCEPTED_QUERY) != 0;
    counts[1] += (got & ACCEPTED_LAUNCH) != 0;
  }
}

static void hostile_arguments_are_refused_or_satisfy_the_contract(void **state) {
  (void)state;
  const uint64_t seed = st_test_seed("test_api_rejects_hostile_args");
  const clock_t t0 = clock();
  op_desc ops[N_OPS];
  make_ops(ops);
  for (int o = 0; o < N_OPS; o++) {
    uint64_t rng = seed ^ (0x9e37u * (uint64_t)(o + 1));
    fake_loader f = {0};
    st_handle *handles[MAX_VARIANTS] = {0};
    for (size_t v = 0; v < ops[o].n_variants; v++) handles[v] = bare_handle(ops[o].op, &ops[o].variants[v], &f);
    /* The baselines pass: each on the variants of its cache dtype. */
    any_args args;
    for (int fl = 0; fl < ops[o].flavors; fl++) {
      ops[o].make_valid(&args, fl);
      int fits = 0;
      for (size_t v = 0; v < ops[o].n_variants; v++) {
        size_t ws = 0;
        const st_status st = ops[o].workspace_size(handles[v], &args, &ws);
        if (st != ST_OK && st != ST_ERR_NO_VARIANT)
          fail_msg("%s baseline %d on %s: %s", ops[o].name, fl, ops[o].variants[v].name, st_last_error(handles[v]));
        fits += st == ST_OK;
      }
      if (!fits) fail_msg("%s baseline %d fits no variant", ops[o].name, fl);
    }
    int counts[2] = {0, 0};
    fuzz_op(&ops[o], handles, seed, &rng, counts);
    printf("# %s: %d cases, %d accepted by the workspace query, %d launches past every check\n", ops[o].name,
           CASES_PER_OP, counts[0], counts[1]);
    for (size_t v = 0; v < ops[o].n_variants; v++) st_close(handles[v]);
  }
  printf("# %d cases in %.1f s of CPU time\n", N_OPS * CASES_PER_OP, (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* ---- the reported reproductions ---------------------------------------------- */

/* topk 16 with init_blocks INT_MAX and local_blocks 2 (their sum wrapped
 * to a negative number) and the mirror image: refused by every entry of
 * every op that shares the selection check. */
static void selection_sums_past_int_max_are_refused(void **state) {
  (void)state;
  op_desc ops[N_OPS];
  make_ops(ops);
  const int which[] = {0, 4, 5}; /* index_decode, index_prefill, index_topk */
  const int pairs[][2] = {{INT_MAX, 2}, {2, INT_MAX}, {INT_MAX, INT_MAX}};
  for (size_t w = 0; w < COUNT(which); w++) {
    const op_desc *op = &ops[which[w]];
    fake_loader f = {0};
    st_handle *h = bare_handle(op->op, &op->variants[0], &f);
    for (size_t p = 0; p < COUNT(pairs); p++) {
      any_args args;
      op->make_valid(&args, 0);
      /* Every selection struct has init_blocks and local_blocks as fields. */
      for (size_t i = 0; i < op->n_fields; i++) {
        if (!strcmp(op->fields[i].name, "init_blocks")) *int_at(&args, op->fields[i].off) = pairs[p][0];
        if (!strcmp(op->fields[i].name, "local_blocks")) *int_at(&args, op->fields[i].off) = pairs[p][1];
      }
      size_t ws = 7;
      assert_int_equal(op->workspace_size(h, &args, &ws), ST_ERR_INVALID_ARG);
      assert_int_equal(ws, 0);
      assert_contains(st_last_error(h), "init_blocks");
      assert_contains(st_last_error(h), "2147483647");
      assert_int_equal(op->prepare(h, &args), ST_ERR_INVALID_ARG);
      assert_int_equal(op->launch(h, &args, FAKE_PTR(60), 1 << 20, NULL), ST_ERR_INVALID_ARG);
      printf("# %s: %s\n", op->name, st_last_error(h));
    }
    assert_int_equal(f.loads, 0);
    st_close(h);
  }
}

/* index_topk with max_context INT_MAX over 16,777,216 score columns (which
 * the documented ranges allow): its block count must not wrap. Refused, or
 * planned with the whole count and shared memory within the device's. */
static void topk_block_count_of_int_max_context_does_not_wrap(void **state) {
  (void)state;
  op_desc ops[N_OPS];
  make_ops(ops);
  st_index_topk_args a;
  index_topk_valid(&a, 0);
  st_tensor_contiguous(&a.score, FAKE_PTR(6), ST_DTYPE_FP32, 3, (int64_t[]){2, 1000, 16777216});
  a.max_context = INT_MAX;
  st_err err = {{0}};
  assert_int_equal(st_index_topk_check_args(&a, &err), ST_OK); /* within the documented ranges */
  for (size_t v = 0; v < ops[5].n_variants; v++) {
    fake_loader f = {0};
    st_handle *h = bare_handle(ST_OP_INDEX_TOPK, &ops[5].variants[v], &f);
    size_t ws = 7;
    const st_status st = st_index_topk_workspace_size(h, &a, &ws);
    printf("# index_topk %s, max_context INT_MAX: %s %s\n", ops[5].variants[v].name, st_status_name(st),
           st_last_error(h));
    st_index_topk_plan plan;
    const st_status planned = st_index_topk_plan_make(&ops[5].variants[v].cfg.index_topk, &a, &plan, &err);
    assert_int_equal(planned == ST_OK, st == ST_OK);
    if (planned == ST_OK) {
      assert_true(plan.params.max_blocks >= 16777216);
      assert_true(plan.smem_bytes <= 227 * 1024);
    } else {
      assert_int_equal(planned, ST_ERR_NO_VARIANT);
    }
    st_close(h);
  }
}

/* ---- the documented ranges -------------------------------------------------- */

/* Dimension `name` of op `o` set to v in `args`, views dense again. */
static void dim(const op_desc *o, void *args, const char *name, int64_t v) {
  for (size_t i = 0; i < o->n_symbols; i++)
    if (!strcmp(o->symbols[i].name, name)) {
      set_symbol(args, &o->symbols[i], v, 1);
      return;
    }
  fail_msg("%s has no dimension %s", o->name, name);
}

#define EXPECT_CHECK(op, args, want)                                                                                   \
  do {                                                                                                                 \
    st_err err_ = {{0}};                                                                                               \
    const st_status got_ = st_##op##_check_args(&(args), &err_);                                                       \
    if (got_ != (want))                                                                                                \
      fail_msg("line %d: %s: %s, expected %s (%s)", __LINE__, #op, st_status_name(got_), st_status_name(want),         \
               err_.msg);                                                                                              \
  } while (0)

enum { CTX_1M_BLOCKS = 8192 }; /* 1M tokens of context, in 128-token blocks */

static void index_decode_range_ends(const op_desc *o) {
  st_index_decode_args a;
  index_decode_valid(&a, 0);
  a.init_blocks = 64, a.local_blocks = 0, dim(o, &a, "topk", 64);
  EXPECT_CHECK(index_decode, a, ST_OK);
  a.init_blocks = 0, a.local_blocks = 64;
  EXPECT_CHECK(index_decode, a, ST_OK);
  a.init_blocks = 1;
  EXPECT_CHECK(index_decode, a, ST_ERR_INVALID_ARG);
  dim(o, &a, "topk", 65), a.local_blocks = 0;
  EXPECT_CHECK(index_decode, a, ST_ERR_INVALID_ARG);
  index_decode_valid(&a, 0);
  a.qlen = 4, dim(o, &a, "R", 32); /* 8 requests of 4 query tokens */
  a.block_table.shape[0] = a.seq_lens.shape[0] = 8;
  EXPECT_CHECK(index_decode, a, ST_OK);
  a.qlen = 5;
  EXPECT_CHECK(index_decode, a, ST_ERR_INVALID_ARG);
  for (int64_t v = 65535; v <= 65536; v++) {
    const st_status want = v == 65535 ? ST_OK : ST_ERR_INVALID_ARG;
    index_decode_valid(&a, 0), dim(o, &a, "R", v);
    EXPECT_CHECK(index_decode, a, want);
    index_decode_valid(&a, 0), dim(o, &a, "H", v);
    EXPECT_CHECK(index_decode, a, want);
  }
  index_decode_valid(&a, 0), dim(o, &a, "max_blocks", CTX_1M_BLOCKS);
  EXPECT_CHECK(index_decode, a, ST_OK);
  a.max_context++;
  EXPECT_CHECK(index_decode, a, ST_ERR_INVALID_ARG);
  dim(o, &a, "max_blocks", (int64_t)1 << 24), a.max_context = INT_MAX;
  EXPECT_CHECK(index_decode, a, ST_OK);
  a.max_context = 0;
  EXPECT_CHECK(index_decode, a, ST_ERR_INVALID_ARG);
}

static void attention_range_ends(const op_desc *dec, const op_desc *pre) {
  st_sparse_attn_decode_args d;
  for (int64_t v = 65535; v <= 65536; v++) {
    sparse_attn_decode_valid(&d, 0), dim(dec, &d, "R", v);
    EXPECT_CHECK(sparse_attn_decode, d, v == 65535 ? ST_OK : ST_ERR_INVALID_ARG);
  }
  sparse_attn_decode_valid(&d, 0), dim(dec, &d, "topk", 64);
  EXPECT_CHECK(sparse_attn_decode, d, ST_OK);
  dim(dec, &d, "topk", 65);
  EXPECT_CHECK(sparse_attn_decode, d, ST_ERR_INVALID_ARG);
  sparse_attn_decode_valid(&d, 0), dim(dec, &d, "Hq", 64); /* 32 q heads a kv head */
  EXPECT_CHECK(sparse_attn_decode, d, ST_OK);
  dim(dec, &d, "Hq", 66);
  EXPECT_CHECK(sparse_attn_decode, d, ST_ERR_UNSUPPORTED);
  sparse_attn_decode_valid(&d, 0), dim(dec, &d, "Hkv", 65535), dim(dec, &d, "Hq", 65535);
  EXPECT_CHECK(sparse_attn_decode, d, ST_OK);
  dim(dec, &d, "Hkv", 65536), dim(dec, &d, "Hq", 65536);
  EXPECT_CHECK(sparse_attn_decode, d, ST_ERR_INVALID_ARG);
  sparse_attn_decode_valid(&d, 0), dim(dec, &d, "max_blocks", CTX_1M_BLOCKS);
  EXPECT_CHECK(sparse_attn_decode, d, ST_OK);
  d.max_context++;
  EXPECT_CHECK(sparse_attn_decode, d, ST_ERR_INVALID_ARG);

  /* Prefill: R x ceil(max_context / 128) blocks up to 2^31 - 1, at 1M tokens. */
  st_sparse_attn_args p;
  sparse_attn_valid(&p, 0), dim(pre, &p, "max_blocks", CTX_1M_BLOCKS), dim(pre, &p, "R", INT32_MAX / CTX_1M_BLOCKS);
  EXPECT_CHECK(sparse_attn, p, ST_OK);
  dim(pre, &p, "R", INT32_MAX / CTX_1M_BLOCKS + 1);
  EXPECT_CHECK(sparse_attn, p, ST_ERR_UNSUPPORTED);
  sparse_attn_valid(&p, 0), dim(pre, &p, "topk", 64);
  EXPECT_CHECK(sparse_attn, p, ST_OK);
  dim(pre, &p, "topk", 65);
  EXPECT_CHECK(sparse_attn, p, ST_ERR_INVALID_ARG);
}

static void indexer_range_ends(const op_desc *score, const op_desc *prefill, const op_desc *topk) {
  st_index_score_args s;
  for (int64_t v = 65535; v <= 65536; v++) {
    const st_status want = v == 65535 ? ST_OK : ST_ERR_INVALID_ARG;
    index_score_valid(&s, 0), dim(score, &s, "H", v);
    EXPECT_CHECK(index_score, s, want);
    index_score_valid(&s, 0), dim(score, &s, "R", v);
    EXPECT_CHECK(index_score, s, want);
  }
  index_score_valid(&s, 0);
  s.score.shape[2] = 256; /* fewer score columns than block-table columns: the lesser bounds */
  densify(&s.score);
  s.max_context = 256 * 128;
  EXPECT_CHECK(index_score, s, ST_OK);
  s.max_context++;
  EXPECT_CHECK(index_score, s, ST_ERR_INVALID_ARG);
  index_score_valid(&s, 0), s.scale = FLT_MAX;
  EXPECT_CHECK(index_score, s, ST_OK);
  s.scale = INFINITY;
  EXPECT_CHECK(index_score, s, ST_ERR_INVALID_ARG);

  st_index_prefill_args p;
  index_prefill_valid(&p, 0), dim(prefill, &p, "max_blocks", CTX_1M_BLOCKS);
  EXPECT_CHECK(index_prefill, p, ST_OK);
  p.max_context++;
  EXPECT_CHECK(index_prefill, p, ST_ERR_INVALID_ARG);
  index_prefill_valid(&p, 0), p.init_blocks = 16, p.local_blocks = 0;
  EXPECT_CHECK(index_prefill, p, ST_OK);
  p.local_blocks = 1;
  EXPECT_CHECK(index_prefill, p, ST_ERR_INVALID_ARG);

  st_index_topk_args k;
  for (int64_t v = 65535; v <= 65536; v++) {
    index_topk_valid(&k, 0), dim(topk, &k, "H", v);
    EXPECT_CHECK(index_topk, k, v == 65535 ? ST_OK : ST_ERR_INVALID_ARG);
  }
}

/* A view's largest element ends at 2^63 - 1 bytes at most: the last stride
 * that keeps it there is accepted, the next refused; so is a stride whose
 * bytes alone pass 2^63, on a dimension of one. */
static void view_extent_ends(void) {
  st_index_topk_args k;
  index_topk_valid(&k, 0); /* score [2, 1000, 512] fp32 */
  const int64_t rest = 999 * 512 + 511;
  k.score.stride[0] = INT64_MAX / 4 - 1 - rest;
  EXPECT_CHECK(index_topk, k, ST_OK);
  k.score.stride[0]++;
  EXPECT_CHECK(index_topk, k, ST_ERR_INVALID_ARG);
  index_topk_valid(&k, 0);
  k.score.shape[0] = k.topk_idx.shape[0] = 1;
  k.score.stride[0] = INT64_MAX / 4;
  EXPECT_CHECK(index_topk, k, ST_OK);
  k.score.stride[0]++;
  EXPECT_CHECK(index_topk, k, ST_ERR_INVALID_ARG);
}

/* The header's documented ranges, end by end: the last value in a range is
 * accepted (contexts of 1M tokens, batches of 65535), the next refused. */
static void documented_range_ends_are_accepted_one_past_refused(void **state) {
  (void)state;
  op_desc ops[N_OPS];
  make_ops(ops);
  index_decode_range_ends(&ops[0]);
  attention_range_ends(&ops[1], &ops[2]);
  indexer_range_ends(&ops[3], &ops[4], &ops[5]);
  view_extent_ends();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(selection_sums_past_int_max_are_refused),
      cmocka_unit_test(topk_block_count_of_int_max_context_does_not_wrap),
      cmocka_unit_test(documented_range_ends_are_accepted_one_past_refused),
      cmocka_unit_test(hostile_arguments_are_refused_or_satisfy_the_contract),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
