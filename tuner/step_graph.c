/* step_graph.c - see step_graph.h. */
#include "step_graph.h"

#include <string.h>

#include "bench_case.h"
#include "timing.h"

typedef struct step_chain {
  st_bench_case index, attn;
} step_chain;

static st_status chain_launch(void *ctx, CUstream stream, st_err *err) {
  step_chain *c = ctx;
  const st_status s = c->index.h->launch(c->index.bound, stream, err);
  return s != ST_OK ? s : c->attn.h->launch(c->attn.bound, stream, err);
}

/* The op's case on `shape`, bound to the runtime's dispatch and verified. */
static st_status step_op_make(const st_cu *cu, const st_device_info *dev, st_handle *rt, CUstream stream,
                              const st_shape *shape, const st_case_opts *co, st_bench_case *op, st_err *err) {
  const st_op_harness *h = st_harness_find(shape->op);
  if (!h || !h->set_pdl)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s cannot take part in a decode step graph", shape->op);
  int ok = 0;
  char why[300] = "";
  st_status s = st_bench_case_make(h, cu, dev, &shape->params, co, rt, stream, op, &ok, why, sizeof why, err);
  if (s == ST_OK && !ok) s = st_fail(err, ST_ERR_NO_VARIANT, "%s %s is wrong: %s", shape->op, shape->key, why);
  return s;
}

st_status st_step_graph_time(const st_cu *cu, const st_device_info *dev, st_handle *rt, CUstream stream,
                             const st_shape *index, const st_shape *attn, uint64_t seed, int threads,
                             st_step_graph *out, st_err *err) {
  memset(out, 0, sizeof *out);
  step_chain c;
  memset(&c, 0, sizeof c);
  const st_case_opts co = {.seed = seed, .threads = threads, .cold = 0};
  st_status s = step_op_make(cu, dev, rt, stream, index, &co, &c.index, err);
  if (s == ST_OK) s = step_op_make(cu, dev, rt, stream, attn, &co, &c.attn, err);
  const st_timing_opts o = {.warmup = 20,
                            .warmup_ms = 200.0,
                            .reps = 5,
                            .iters = 40,
                            .retry_spread = ST_BENCH_RETRY_SPREAD,
                            .flush_bytes = ST_TIMING_FLUSH_L2 * dev->l2_bytes};
  for (int pdl = 0; pdl < 2 && s == ST_OK; pdl++) {
    c.index.h->set_pdl(c.index.kase, pdl);
    c.attn.h->set_pdl(c.attn.kase, pdl);
    st_timing t;
    s = st_time_graph(cu, stream, chain_launch, &c, &o, &t, err);
    if (s != ST_OK) break;
    *(pdl ? &out->pdl_us : &out->plain_us) = t.median_us;
    *(pdl ? &out->pdl_spread : &out->plain_spread) = t.spread;
  }
  st_bench_case_free(&c.attn);
  st_bench_case_free(&c.index);
  return s;
}
