/* eta.c - see eta.h. */
#include "eta.h"

#include <stdio.h>
#include <string.h>

static st_eta_op *slot(st_eta *e, const char *op) {
  for (int i = 0; i < e->n; i++)
    if (!strcmp(e->ops[i].op, op)) return &e->ops[i];
  if (e->n == ST_ETA_MAX_OPS) return &e->ops[ST_ETA_MAX_OPS - 1];
  st_eta_op *o = &e->ops[e->n++];
  memset(o, 0, sizeof *o);
  snprintf(o->op, sizeof o->op, "%s", op);
  return o;
}

void st_eta_plan(st_eta *e, const char *op, int jobs) { slot(e, op)->total += jobs; }

void st_eta_start(st_eta *e, double now) { e->mark = now; }

void st_eta_done(st_eta *e, const char *op, double now) {
  st_eta_op *o = slot(e, op);
  o->done++;
  if (now > e->mark) o->spent += now - e->mark;
  e->mark = now;
}

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
    const int rest = o->total > o->done ? o->total - o->done : 0;
    left += rest * (o->done > 0 ? o->spent / o->done : overall);
  }
  return left;
}
