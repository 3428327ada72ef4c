/* step_graph.c - see step_graph.h. */
#include "step_graph.h"

#include <string.h>

#include "op_harness.h"
#include "timing.h"

typedef struct step_op {
  const st_op_harness *h;
  void *kase, *bound;
} step_op;

typedef struct step_chain {
  step_op index, attn;
} step_chain;

static st_status chain_launch(void *ctx, CUstream stream, st_err *err) {
  step_chain *c = ctx;
  const st_status s = c->index.h->launch(c->index.bound, stream, err);
  return s != ST_OK ? s : c->attn.h->launch(c->attn.bound, stream, err);
}

/* The op's case on `shape`, bound to the runtime's dispatch and verified. */
static st_status step_op_make(const st_cu *cu, const st_device_info *dev, st_handle *rt, CUstream stream,
                              const st_shape *shape, const st_case_opts *co, step_op *op, st_err *err) {
  op->h = st_harness_find(shape->op);
  if (!op->h || !op->h->set_pdl)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s cannot take part in a decode step graph", shape->op);
  st_status s = op->h->case_create(cu, dev, &shape->params, co, &op->kase, err);
  if (s == ST_OK) s = op->h->bind_runtime(op->kase, rt, &op->bound, err);
  if (s != ST_OK) return s;
  int ok = 0;
  double max_err = 0;
  char why[300] = "";
  s = op->h->verify(op->bound, stream, &ok, &max_err, why, sizeof why, err);
  if (s == ST_OK && !ok) s = st_fail(err, ST_ERR_NO_VARIANT, "%s %s is wrong: %s", shape->op, shape->key, why);
  return s;
}

static void step_op_free(step_op *op) {
  if (op->bound) op->h->unbind(op->bound);
  if (op->kase) op->h->case_destroy(op->kase);
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
  const st_timing_opts o = {.warmup = 20, .warmup_ms = 200.0, .reps = 5, .iters = 40};
  for (int pdl = 0; pdl < 2 && s == ST_OK; pdl++) {
    c.index.h->set_pdl(c.index.kase, pdl);
    c.attn.h->set_pdl(c.attn.kase, pdl);
    st_timing t;
    s = st_time_graph(cu, stream, chain_launch, &c, &o, &t, err);
    if (s != ST_OK) break;
    *(pdl ? &out->pdl_us : &out->plain_us) = t.median_us;
    *(pdl ? &out->pdl_spread : &out->plain_spread) = t.spread;
  }
  step_op_free(&c.attn);
  step_op_free(&c.index);
  return s;
}
