/* ops/dsa_index_logits.c - validation, fit, launch math and launch of
 * dsa_index_logits. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/dsa_index_logits.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/launch.h"
#include "ops/tensor_check.h"

#define HEAD_DIM ST_DSA_INDEX_LOGITS_HEAD_DIM
/* Heads of one mma row tile (templates/dsa_index_logits.cu). */
#define HEADS_PER_TILE 16
/* Tokens a warp scores at a time: two mma column tiles of 8. */
#define WARP_STEP 16
/* CTAs the automatic split aims for per multiprocessor: about two waves
 * of two resident CTAs, so that query tiles of uneven (causal) work even
 * out. Not yet measured. */
#define AUTO_CTAS_PER_SM 4

/* Warps scoring one query's heads: each holds head_tiles row tiles. */
static int warps_per_query(const st_dsa_index_logits_config *c) {
  return c->max_heads / HEADS_PER_TILE / c->head_tiles;
}

st_status st_dsa_index_logits_config_from_params(const st_params *kernel, const st_params *launch,
                                                 st_dsa_index_logits_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  long long v;
  st_status s;
#define GET(ps, key, lo, hi, field)                                                                                    \
  if ((s = st_params_get_int(ps, key, lo, hi, &v, err)) != ST_OK) return s;                                            \
  cfg->field = (int)v;
  GET(kernel, "max_heads", HEADS_PER_TILE, ST_DSA_INDEX_LOGITS_MAX_HEADS, max_heads)
  GET(kernel, "queries", 1, 8, queries)
  GET(kernel, "head_tiles", 1, 2, head_tiles)
  GET(kernel, "tokens", WARP_STEP, 256, tokens)
  GET(kernel, "threads", 32, 1024, threads)
  GET(kernel, "stages", 2, 4, stages)
  GET(launch, "splits", 0, ST_DSA_INDEX_LOGITS_MAX_SPLITS, splits)
#undef GET
  if (cfg->max_heads % (HEADS_PER_TILE * cfg->head_tiles))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter max_heads=%d is not a multiple of head_tiles=%d x %d heads (mma row tiles)",
                   cfg->max_heads, cfg->head_tiles, HEADS_PER_TILE);
  if (cfg->tokens % WARP_STEP)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter tokens=%d is not a multiple of %d", cfg->tokens,
                   WARP_STEP);
  const int groups = cfg->queries * warps_per_query(cfg);
  if (cfg->threads % 32 || (cfg->threads / 32) % groups || (cfg->tokens / WARP_STEP) % (cfg->threads / 32 / groups))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter threads=%d does not divide into queries=%d x %d head groups x token groups "
                   "of whole %d-token steps of tokens=%d",
                   cfg->threads, cfg->queries, warps_per_query(cfg), WARP_STEP, cfg->tokens);
  return ST_OK;
}

size_t st_dsa_index_logits_smem_bytes(const st_dsa_index_logits_config *cfg) {
  return (size_t)cfg->stages * (size_t)cfg->tokens * (HEAD_DIM + 4) +
         (size_t)cfg->queries * (size_t)warps_per_query(cfg) * (size_t)cfg->tokens * 4;
}

/* k [s_kv, 128] fp8 rows 16-byte aligned, and its scales [s_kv] fp32. */
static st_status check_keys(const st_dsa_index_logits_args *a, st_err *err) {
  st_status s = st_check_tensor(&a->k, "k", ST_DTYPE_FP8_E4M3, 2, err);
  if (s != ST_OK) return s;
  if (a->k.shape[1] != HEAD_DIM)
    return st_fail(err, ST_ERR_INVALID_ARG, "k.shape[1]=%lld must be the head dim %d", (long long)a->k.shape[1],
                   HEAD_DIM);
  const int64_t s_kv = a->k.shape[0];
  if (s_kv > ST_DSA_INDEX_LOGITS_MAX_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "k.shape[0]=%lld tokens exceed 2^24", (long long)s_kv);
  /* cp.async copies 16 bytes of a row at a time. */
  if ((s = st_check_vector_rows(&a->k, "k", 16, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->k_scale, "k_scale", ST_DTYPE_FP32, 1, err)) != ST_OK) return s;
  if (a->k_scale.shape[0] != s_kv)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_scale.shape[0]=%lld must equal k's %lld tokens",
                   (long long)a->k_scale.shape[0], (long long)s_kv);
  return ST_OK;
}

/* ks and ke: [s_q] int32 each. */
static st_status check_ranges(const st_dsa_index_logits_args *a, int64_t s_q, st_err *err) {
  const st_tensor *t[] = {&a->ks, &a->ke};
  const char *name[] = {"ks", "ke"};
  for (int i = 0; i < 2; i++) {
    const st_status s = st_check_tensor(t[i], name[i], ST_DTYPE_INT32, 1, err);
    if (s != ST_OK) return s;
    if (t[i]->shape[0] != s_q)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape[0]=%lld must equal q's %lld query tokens", name[i],
                     (long long)t[i]->shape[0], (long long)s_q);
  }
  return ST_OK;
}

/* logits [s_q, s_kv] fp32, rows 16-byte aligned (float4 stores). */
static st_status check_logits(const st_dsa_index_logits_args *a, int64_t s_q, int64_t s_kv, st_err *err) {
  const st_status s = st_check_tensor(&a->logits, "logits", ST_DTYPE_FP32, 2, err);
  if (s != ST_OK) return s;
  if (a->logits.shape[0] != s_q || a->logits.shape[1] != s_kv)
    return st_fail(err, ST_ERR_INVALID_ARG, "logits.shape=[%lld,%lld] must be [s_q=%lld, s_kv=%lld]",
                   (long long)a->logits.shape[0], (long long)a->logits.shape[1], (long long)s_q, (long long)s_kv);
  if (s_q > 1 && a->logits.stride[0] < s_kv)
    return st_fail(err, ST_ERR_INVALID_ARG, "logits.stride[0]=%lld is less than s_kv=%lld",
                   (long long)a->logits.stride[0], (long long)s_kv);
  if ((uintptr_t)a->logits.data % 16 || a->logits.stride[0] % 4)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "logits.data=%p and logits.stride[0]=%lld must be 16-byte aligned (the stride a multiple of 4)",
                   a->logits.data, (long long)a->logits.stride[0]);
  return ST_OK;
}

st_status st_dsa_index_logits_check_args(const st_dsa_index_logits_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if ((s = st_check_tensor(&a->q, "q", ST_DTYPE_FP8_E4M3, 3, err)) != ST_OK) return s;
  const int64_t s_q = a->q.shape[0], H = a->q.shape[1];
  if (a->q.shape[2] != HEAD_DIM)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[2]=%lld must be the head dim %d", (long long)a->q.shape[2],
                   HEAD_DIM);
  if (H > ST_DSA_INDEX_LOGITS_MAX_HEADS)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[1]=%lld heads exceed %d", (long long)H,
                   ST_DSA_INDEX_LOGITS_MAX_HEADS);
  if (s_q > ST_DSA_INDEX_LOGITS_MAX_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld query tokens exceed 2^24", (long long)s_q);
  /* 16-byte loads of q's head rows. */
  if ((s = st_check_vector_rows(&a->q, "q", 16, err)) != ST_OK) return s;
  if ((s = check_keys(a, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->weights, "weights", ST_DTYPE_FP32, 2, err)) != ST_OK) return s;
  if (a->weights.shape[0] != s_q || a->weights.shape[1] != H)
    return st_fail(err, ST_ERR_INVALID_ARG, "weights.shape=[%lld,%lld] must be [s_q=%lld, H=%lld]",
                   (long long)a->weights.shape[0], (long long)a->weights.shape[1], (long long)s_q, (long long)H);
  if ((s = check_ranges(a, s_q, err)) != ST_OK) return s;
  return check_logits(a, s_q, a->k.shape[0], err);
}

st_status st_dsa_index_logits_check_fit(const st_dsa_index_logits_config *cfg, const st_dsa_index_logits_args *a,
                                        st_err *err) {
  const int64_t H = a->q.shape[1];
  if (H > cfg->max_heads)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds H <= %d heads, call has %lld", cfg->max_heads, (long long)H);
  return ST_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Token slices per query tile: the variant's, or (0) as many as bring the
 * grid to AUTO_CTAS_PER_SM CTAs a multiprocessor; never more than the
 * tiles there are. */
static int choose_splits(const st_dsa_index_logits_config *cfg, int64_t query_tiles, int64_t tiles, int sm_count) {
  int64_t s = cfg->splits;
  if (s == 0) s = ceil_div((int64_t)AUTO_CTAS_PER_SM * sm_count, query_tiles);
  if (s > tiles) s = tiles;
  if (s > ST_DSA_INDEX_LOGITS_MAX_SPLITS) s = ST_DSA_INDEX_LOGITS_MAX_SPLITS;
  return (int)(s < 1 ? 1 : s);
}

st_status st_dsa_index_logits_plan_make(const st_dsa_index_logits_config *cfg, const st_dsa_index_logits_args *a,
                                        int sm_count, st_dsa_index_logits_plan *plan, st_err *err) {
  st_status st = st_dsa_index_logits_check_fit(cfg, a, err);
  if (st != ST_OK) return st;
  memset(plan, 0, sizeof *plan);
  const int64_t s_q = a->q.shape[0], s_kv = a->k.shape[0];
  const int64_t query_tiles = ceil_div(s_q, cfg->queries), tiles = ceil_div(s_kv, cfg->tokens);
  const int splits = choose_splits(cfg, query_tiles, tiles, sm_count > 0 ? sm_count : 1);

  st_dsa_index_logits_params *p = &plan->params;
  p->q = a->q.data;
  p->k = a->k.data;
  p->k_scale = a->k_scale.data;
  p->weights = a->weights.data;
  p->ks = a->ks.data;
  p->ke = a->ke.data;
  p->logits = a->logits.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->k_stride = a->k.stride[0];
  p->w_stride_row = a->weights.stride[0];
  p->logit_stride = a->logits.stride[0];
  p->s_q = (int32_t)s_q;
  p->s_kv = (int32_t)s_kv;
  p->num_heads = (int32_t)a->q.shape[1];
  p->tiles_per_split = (int32_t)ceil_div(tiles, splits);

  /* s_q <= 2^24: the query tiles fit the grid's x dimension. */
  plan->grid[0] = (unsigned)query_tiles;
  plan->grid[1] = (unsigned)splits;
  plan->grid[2] = 1;
  plan->block = (unsigned)cfg->threads;
  plan->smem_bytes = (unsigned)st_dsa_index_logits_smem_bytes(cfg);
  plan->splits = splits;
  return ST_OK;
}

st_status st_dsa_index_logits_launch(const st_cu *cu, CUfunction fn, const st_dsa_index_logits_plan *plan,
                                     CUstream stream, st_err *err) {
  if (!fn) return st_fail(err, ST_ERR_INVALID_ARG, "dsa_index_logits needs its kernel");
  /* Past 48 KiB of static + dynamic shared memory a kernel must opt in;
   * the kernel's static part is the queries' ranges (64 bytes at most). */
  if (plan->smem_bytes > 47 * 1024)
    ST_CU_TRY(cu, cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  st_dsa_index_logits_params params = plan->params;
  void *kargs[] = {&params};
  return st_launch_kernel(cu, fn, plan->grid, plan->block, plan->smem_bytes, stream, kargs, 0, err);
}

st_status st_dsa_index_logits_dispatch_key(const st_dsa_index_logits_args *a, char *key, size_t cap, st_params *fields,
                                           st_err *err) {
  const long long s_q = a->q.shape[0], H = a->q.shape[1], s_kv = a->k.shape[0];
  int n = snprintf(key, cap, "%s:B=%lld,H=%lld,kv=%lld", ST_DSA_INDEX_LOGITS_OP, s_q, H, s_kv);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", s_q, err)) || (s = st_params_set_int(fields, "H", H, err)) ||
      (s = st_params_set_int(fields, "kv", s_kv, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_dsa_index_logits_config_from_params(kernel, launch, &c->dsa_index_logits, why);
  /* The fewest heads that fit: the least wasted math. */
  *rank = c->dsa_index_logits.max_heads;
  return st;
}

static st_status check_args(const void *args, st_err *err) { return st_dsa_index_logits_check_args(args, err); }

/* The call's bound on what a row sees: its s_kv index-K rows. */
static int max_context(const void *args) { return (int)((const st_dsa_index_logits_args *)args)->k.shape[0]; }

static st_status dispatch_key(const void *args, char *key, size_t cap, st_params *fields, st_err *err) {
  return st_dsa_index_logits_dispatch_key(args, key, cap, fields, err);
}

static void shape_only(const void *args, st_op_args *copy) {
  const st_dsa_index_logits_args *a = args;
  st_dsa_index_logits_args *c = &copy->dsa_index_logits;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->k, &c->k_scale, &c->weights, &c->ks, &c->ke, &c->logits};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  st_dsa_index_logits_plan *p = &plan->dsa_index_logits;
  const st_status st = st_dsa_index_logits_plan_make(&cfg->dsa_index_logits, args, sm_count, p, err);
  if (st != ST_OK) return st;
  *info = (st_plan_info){.workspace_bytes = 0, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0,
      .splits = p->splits};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)merge_fn;
  (void)workspace;
  (void)workspace_bytes;
  (void)side;
  return st_dsa_index_logits_launch(cu, main_fn, &plan->dsa_index_logits, stream, err);
}

const st_op_desc st_dsa_index_logits_op = {.name = ST_DSA_INDEX_LOGITS_OP,
                                           .main_kernel = ST_DSA_INDEX_LOGITS_MAIN_KERNEL,
                                           .params_bytes = sizeof(st_dsa_index_logits_params),
                                           .merge_kernel = NULL,
                                           .parse_config = parse_config,
                                           .needs_merge = NULL,
                                           .check_args = check_args,
                                           .shape_only = shape_only,
                                           .max_context = max_context,
                                           .load = NULL,
                                           .dispatch_key = dispatch_key,
                                           .plan = plan,
                                           .launch = launch,
                                           .exact_keys_only = 1};
