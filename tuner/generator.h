/* generator.h - the tuner's bridge to the Lua generator (generator/).
 *
 * The generator owns the variant spaces, their constraints, the template
 * renderer and the named shape suites. This bridge runs it in an embedded
 * Lua 5.4 state and hands the results to C as plain structs; it also computes
 * the content hashes (XXH3-128, hex) that identify sources and variants:
 *   source_hash = H(rendered source text)
 *   variant id  = H(op "\n" kernel-params JSON "\n" launch-params JSON "\n" source_hash)
 * (JSON = st_params_to_json, canonical). */
#ifndef ST_GENERATOR_H
#define ST_GENERATOR_H

#include "error.h"
#include "identity.h"
#include "params.h"
#include "st_db.h"

typedef struct st_gen st_gen;

/* A shape of a suite. `key` is the canonical text of every parameter
 * ("index_decode:B=8,D=128,H=2,ctx=32768,..."); `dispatch_key` that of the
 * host-known subset the runtime dispatches on (for index_decode: dtype, D, H,
 * qlen, topk, B). */
typedef struct st_shape {
  char op[32];
  char key[256];
  char dispatch_key[256];
  st_params params;
} st_shape;

/* A generated variant: its row plus the rendered, self-contained source. */
typedef struct st_gen_variant {
  st_variant_row row;
  char *source; /* owned; freed by st_gen_free_variants */
} st_gen_variant;

/* Where `sub` ("generator" or "templates") is read from: `explicit` if not
 * NULL, else $SPARSETUNE_HOME/<sub> if that is set, else
 * <the binary's folder>/../share/sparsetune/<sub> if ../share/sparsetune
 * exists (an installed tree, wherever it was moved: both folders come from
 * it or neither), else the source tree this binary was built from. The path
 * goes to `out`; *why says which of the four ("installed beside the binary";
 * a static string). A folder that does not exist is ST_ERR_INVALID_ARG with
 * a message saying where it was looked for. */
st_status st_gen_locate(const char *explicit, const char *sub, char *out, size_t cap, const char **why, st_err *err);

/* Loads generator/main.lua from `generator_dir`; templates are read from
 * `templates_dir`. Either NULL: found by st_gen_locate. */
st_status st_gen_open(const char *generator_dir, const char *templates_dir, st_gen **out, st_err *err);
void st_gen_close(st_gen *g);

/* The folders `g` reads main.lua and the templates from, as located when it
 * was opened; owned by `g`, valid until st_gen_close. */
const char *st_gen_generator_dir(const st_gen *g);
const char *st_gen_templates_dir(const st_gen *g);

/* Names of the ops the generator knows, and of its suites (static strings
 * valid until st_gen_close). */
st_status st_gen_ops(st_gen *g, const char ***names, int *n, st_err *err);
st_status st_gen_suites(st_gen *g, const char ***names, int *n, st_err *err);

/* The shapes of `suite` for `op` (op NULL: every op). *shapes is malloc'ed. */
st_status st_gen_suite(st_gen *g, const char *suite, const char *op, st_shape **shapes, int *n,
                       st_err *err);

/* Every variant of `op` worth timing on at least one of `shapes`, plus the
 * op's default variants (row.is_default = 1), rendered and hashed; no
 * duplicates. Free with st_gen_free_variants. */
st_status st_gen_variants(st_gen *g, const char *op, const st_shape *shapes, int nshapes,
                          st_gen_variant **out, int *n, st_err *err);
void st_gen_free_variants(st_gen_variant *v, int n);

/* Whether variant `v` is to be timed on shape `s` (the Lua space's
 * `applies`: compile-time fit plus the launch-time choices worth trying). */
st_status st_gen_applies(st_gen *g, const st_variant_row *v, const st_shape *s, int *applies, st_err *err);

/* Renders one variant from its kernel parameters alone (used by tests and
 * `sparsetune generate --print`). *source is malloc'ed. */
st_status st_gen_render(st_gen *g, const char *op, const st_params *kernel, char **source, st_err *err);

#endif
