/* cmd_builtin.c - `sparsetune builtin`: the built-in variant the library
 * runs for each shape of a suite with no database, on a device of a given
 * number of multiprocessors. Needs no GPU: the runtime's arguments for a
 * shape come from its harness (dispatch_args), the choice from
 * st_builtin_choose, both host arithmetic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cli.h"
#include "commands.h"
#include "generator.h"
#include "op_harness.h"
#include "ops/op.h"
#include "report.h"

static const char usage[] = "usage: sparsetune builtin [--suite NAME] [--op OP] [--sms N] [--json]\n"
                            "\n"
                            "For every shape of the suite, the built-in variant libsparsetune runs with\n"
                            "no database (st_open(NULL, ...)) on a device of N multiprocessors, as its\n"
                            "dispatch picks it: the op's built-in variants in order, those the call's\n"
                            "load, query tokens and the op's own rules mean for it first, the first whose\n"
                            "launch plan fits, with the split count its launcher picks where the op has\n"
                            "one (\"auto\" resolved). Needs no GPU and no database; what a database's\n"
                            "winners would change is for `tune` and `eval` to say.\n"
                            "\n"
                            "  --suite NAME  suite to list (default m3-decode; random-decode:SEED:N and\n"
                            "                random-prefill:SEED:N draw shapes as `eval` does)\n"
                            "  --op OP       only this op (or a comma-separated list)\n"
                            "  --sms N       the device's multiprocessors (default 132: H100 and H200 SXM)\n"
                            "  --json        one JSON document instead of the table\n";

static int op_id(const char *name, st_op_id *out) {
  for (int i = 0; i < ST_OP_COUNT; i++)
    if (!strcmp(st_op_name((st_op_id)i), name)) {
      *out = (st_op_id)i;
      return 1;
    }
  return 0;
}

/* The choice for one shape into *v and its launch plan's facts into
 * *info, or the reason into err. */
static st_status choose(const st_shape *s, int sms, st_dispatch_variant *v, st_plan_info *info, double *load,
                        st_err *err) {
  st_op_id op;
  const st_op_harness *h = st_harness_find(s->op);
  if (!h || !op_id(s->op, &op)) return st_fail(err, ST_ERR_INVALID_ARG, "op %s has no harness", s->op);
  st_op_args args;
  memset(&args, 0, sizeof args);
  st_status st = h->dispatch_args(&s->params, &args, err);
  if (st != ST_OK) return st;
  const st_op_desc *d = st_op_desc_of(op);
  *load = d->load ? d->load(&args, sms) : -1;
  if ((st = st_builtin_choose(op, &args, sms, v, err)) != ST_OK) return st;
  st_op_plan plan;
  return d->plan(&v->cfg, &args, sms, &plan, info, err);
}

int st_cmd_builtin(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_SUITE | ST_OPT_OP | ST_OPT_SMS | ST_OPT_JSON, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  st_gen *gen = NULL;
  st_shape *shapes = NULL;
  int n = 0;
  st_err err = {{0}};
  if (st_gen_open(NULL, NULL, &gen, &err) != ST_OK) { /* a missing or broken generator: not the user's input */
    st_cli_error(&cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  if (st_gen_suite(gen, cli.suite, cli.op, &shapes, &n, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    st_gen_close(gen);
    return ST_EXIT_USAGE;
  }
  st_gen_close(gen);
  if (cli.json) {
    printf("{\"suite\":");
    st_json_str(stdout, cli.suite);
    printf(",\"sms\":%d,\"shapes\":[", cli.sms);
  } else {
    printf("built-in variants with no database, suite %s, a device of %d multiprocessors\n%-18s %-8s %s\n", cli.suite,
           cli.sms, "op", "load", "shape / variant");
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    st_dispatch_variant v;
    st_plan_info info = {0};
    double load = -1;
    st_err why = {{0}};
    const st_status st = choose(&shapes[i], cli.sms, &v, &info, &load, &why);
    failed += st != ST_OK;
    if (cli.json) {
      printf("%s{\"op\":", i ? "," : "");
      st_json_str(stdout, shapes[i].op);
      printf(",\"shape\":");
      st_json_str(stdout, shapes[i].key);
      if (load >= 0) printf(",\"load\":%.6g", load);
      printf(st == ST_OK ? ",\"variant\":" : ",\"error\":");
      st_json_str(stdout, st == ST_OK ? v.name : why.msg);
      if (st == ST_OK && info.splits > 0) printf(",\"splits\":%d", info.splits);
      if (st == ST_OK) printf(",\"workspace_bytes\":%zu", info.workspace_bytes);
      putchar('}');
      continue;
    }
    /* An op may mark a call "past every range but the last" with a huge
     * load (sparse_attn: contexts past the tile kernel's blocks). */
    char load_text[32] = "-";
    if (load >= 1e8)
      snprintf(load_text, sizeof load_text, "many");
    else if (load >= 0)
      snprintf(load_text, sizeof load_text, "%.3g", load);
    char launch[48] = "";
    if (st == ST_OK && info.splits > 0)
      snprintf(launch, sizeof launch, " (%d split%s)", info.splits, info.splits > 1 ? "s" : "");
    const char *colon = strchr(shapes[i].key, ':');
    printf("%-18s %-8s %s\n%-27s -> %s%s\n", shapes[i].op, load_text, colon ? colon + 1 : shapes[i].key, "",
           st == ST_OK ? v.name : "no variant: ", st == ST_OK ? launch : why.msg);
  }
  if (cli.json) printf("]}\n");
  free(shapes);
  if (failed) st_cli_error(&cli, "%d of %d shapes have no built-in variant that fits", failed, n);
  return failed ? ST_EXIT_FAIL : ST_EXIT_OK;
}
