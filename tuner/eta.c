/* eta.c - see eta.h. */
#include "eta.h"

#include <stdio.h>
#include <string.h>

static int slot(st_eta *e, const char *op) {
  for (int i = 0; i < e->n; i++)
    if (!strcmp(e->ops[i].op, op)) return i;
  if (e->n == ST_ETA_MAX_OPS) return ST_ETA_MAX_OPS - 1;
  st_eta_op *o = &e->ops[e->n];
  memset(o, 0, sizeof *o);
  snprintf(o->op, sizeof o->op, "%s", op);
  return e->n++;
}

void st_eta_plan(st_eta *e, const char *op, int jobs) { e->ops[slot(e, op)].total += jobs; }

void st_eta_start(st_eta *e, double now) {
  e->mark = now;
  e->shape_op = -1;
}

void st_eta_shape(st_eta *e, const char *op, int jobs) {
  e->shape_op = slot(e, op);
  e->shape_total = jobs;
  e->shape_done = 0;
}

void st_eta_done(st_eta *e, double now) {
  if (e->shape_op < 0) return; /* no shape begun: nothing to charge */
  st_eta_op *o = &e->ops[e->shape_op];
  o->done++;
  if (now > e->mark) o->spent += now - e->mark;
  e->mark = now;
  if (e->shape_done++ == 0) e->shape_first = now;
}

static int rest(int total, int done) { return total > done ? total - done : 0; }

double st_eta_left(const st_eta *e) {
  int done = 0;
  double spent = 0;
  for (int i = 0; i < e->n; i++) {
    done += e->ops[i].done;
    spent += e->ops[i].spent;
  }
  if (done == 0) return -1;
  const double overall = spent / done;
  double left = 0;
  for (int i = 0; i < e->n; i++) {
    const st_eta_op *o = &e->ops[i];
    const double rate = o->done > 0 ? o->spent / o->done : overall;
    int others = rest(o->total, o->done); /* this op's pairs left outside the running shape */
    if (i == e->shape_op) {
      const int here = rest(e->shape_total, e->shape_done);
      others = rest(others, here);
      left += here * (e->shape_done >= 2 ? (e->mark - e->shape_first) / (e->shape_done - 1) : rate);
    }
    left += others * rate;
  }
  return left;
}
