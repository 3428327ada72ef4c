/* dispatch.h - choosing the variant of an op for a call.
 *
 * Pure host logic: no CUDA, no database. The handle loads the winners and
 * default variants once (st_open) into an st_dispatch_table; a call turns
 * its arguments into a dispatch key and asks for a choice:
 *   1. a winner recorded for exactly this key whose config fits the call;
 *   2. else the winner of the nearest key that fits, if it is within the
 *      table's nearest_radius (ST_DISPATCH_NEAREST_RADIUS, or 0 for ops
 *      whose winners serve only their own keys) and beat the built-in
 *      choice on its own key by ST_DISPATCH_NEAREST_MARGIN (or that is
 *      not recorded): keys whose text fields (dtype) are the call's, at
 *      the distance of the sum over their numeric fields (batch B, context
 *      ctx, heads, qlen, topk) of |log2 w/c|; ties: the larger B, then the
 *      larger ctx;
 *   3. else the default variants that fit: those meant for the call's load
 *      (st_dispatch_variant.load_lo/hi) first, each group in table order
 *      (the op's rank, e.g. the smallest topk capacity, then the order of
 *      the op's defaults);
 *   4. else the winners beyond the radius, nearest first.
 * Each candidate is then loaded through a hook; one that cannot be loaded
 * because its binary is missing or broken (ST_ERR_NO_VARIANT) is skipped in
 * favour of the next, any other failure ends the search.
 *
 * Decisions are memoized per (dispatch key, max_context, memo tag) in a fixed table,
 * so a repeated call does no allocation and no database or driver work.
 * The fit check and the loader are function pointers so that the tests can
 * drive all of this without a GPU. */
#ifndef ST_DISPATCH_H
#define ST_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "ops/op.h"
#include "params.h"

/* The dispatch key field that holds the batch size (requests per call). */
#define ST_DISPATCH_BATCH_FIELD "B"
/* The field that holds the call's max_context, in the keys of ops whose
 * best variant depends on it (index_decode). */
#define ST_DISPATCH_CONTEXT_FIELD "ctx"
/* Longest dispatch key text, NUL included (as st_winner_row stores it). */
#define ST_DISPATCH_KEY_MAX 256
/* How far (log2 distance) a winner's key may be from the call's for it to
 * go before the built-in choice: 1 = twice or half the batch, or the
 * context, or the two a factor of 1.41 each. Farther, the built-in variants
 * (chosen for the call's own shape) go first. */
#define ST_DISPATCH_NEAREST_RADIUS 1.0
/* A nearby winner goes before the built-in choice only if it was at least
 * this much faster than the op's default variants on its own key (the
 * winners table's default_us): where the built-in choice was about as good,
 * it is the better guess for a shape nobody tuned, being chosen for it. */
#define ST_DISPATCH_NEAREST_MARGIN 1.05
/* Decisions remembered per handle and op; the oldest is replaced when full. */
#define ST_DISPATCH_MEMO_SLOTS 64

/* A loadable variant: identity, the binary it needs, and its parsed config. */
typedef struct st_dispatch_variant {
  char id[40];
  char name[160];
  char source_hash[40];
  st_variant_config cfg;
  int rank;    /* order among defaults, smallest first (index_decode: its topk
                  capacity) */
  int builtin; /* 1 + its index in the built-in catalog (builtin.h); 0: a
                  variant read from the database */
  /* A default is preferred for calls whose load (st_op_desc.load) is in
   * (load_lo, load_hi]; load_hi <= 0: for any. */
  double load_lo, load_hi;
  /* ... and whose query tokens a request (st_op_desc.qlen) are in
   * (qlen_lo, qlen_hi]; qlen_hi <= 0: for any. */
  int qlen_lo, qlen_hi;
} st_dispatch_variant;

/* A winner recorded for one dispatch key of this device model. */
typedef struct st_dispatch_winner {
  st_params fields;  /* the dispatch key's fields (ST_DISPATCH_BATCH_FIELD among
                        them) */
  long long batch;   /* the value of ST_DISPATCH_BATCH_FIELD; 0 when absent     */
  long long context; /* the value of ST_DISPATCH_CONTEXT_FIELD; 0 when absent */
  int64_t run_id;    /* the tuning run that picked it: newer runs win ties      */
  double median_us;
  double default_us; /* the op's best default on the same key; 0: not recorded */
  st_dispatch_variant v;
} st_dispatch_winner;

/* Everything dispatch knows about one op on one handle. Read-only after
 * st_open; the arrays are owned by whoever built the table. */
typedef struct st_dispatch_table {
  st_op_id op;
  const st_dispatch_winner *winners;
  size_t n_winners;
  const st_dispatch_variant *defaults;
  size_t n_defaults;
  const char *source; /* where the variants came from (the database path), for
                         messages */
  const char *note;   /* why some recorded variants were left out at load; NULL if none */
  /* How far a winner's key may be from the call's for the winner to go
   * before the defaults: ST_DISPATCH_NEAREST_RADIUS, or 0 for an op whose
   * winners serve only their own keys (st_op_desc.exact_keys_only; a key
   * that lacks a numeric field of the call's is still at distance 0). */
  double nearest_radius;
} st_dispatch_table;

typedef enum st_dispatch_rule {
  ST_DISPATCH_EXACT = 0,   /* winner of this dispatch key            */
  ST_DISPATCH_NEAREST = 1, /* winner of the nearest key               */
  ST_DISPATCH_DEFAULT = 2  /* the op's fallback variant              */
} st_dispatch_rule;

/* ST_OK if variant `v` of `op` can run the (valid) arguments `args` (the
 * op's st_<op>_args), else ST_ERR_NO_VARIANT (or another status) with the
 * reason: the launcher's fit check and plan on the handle's device, or a
 * test's stand-in. Pure: no allocation, no I/O. */
typedef st_status (*st_dispatch_fit_fn)(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args,
                                        st_err *err);

/* Makes `v` ready to launch and returns what the launch needs in *loaded
 * (the module cache entry). ST_ERR_NO_VARIANT: this variant cannot be used
 * (no binary, failed compile, bad image), try the next; anything else stops. */
typedef st_status (*st_dispatch_load_fn)(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded,
                                         st_err *err);

/* 1 if default `v`, in its load and qlen ranges, is also meant for the
 * call by the op's own rule (st_op_desc.default_meant_for). Pure. */
typedef int (*st_dispatch_meant_fn)(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args);

typedef struct st_dispatch_hooks {
  st_dispatch_fit_fn fit;
  void *fit_ctx;
  st_dispatch_load_fn load;
  void *load_ctx;
  double call_load;               /* the call's load (st_op_desc.load); < 0: unknown */
  int call_qlen;                  /* the call's query tokens a request (st_op_desc.qlen); <= 0: unknown */
  st_dispatch_meant_fn meant_for; /* NULL: the ranges alone decide */
  void *meant_ctx;
} st_dispatch_hooks;

/* Fills the call's fields of *h for `args` of `op` on a device of
 * *sm_count multiprocessors, from the op's descriptor: call_load,
 * call_qlen, and meant_for over st_op_desc.default_meant_for (with
 * sm_count as its context, so *sm_count must outlive the hooks' use). */
void st_dispatch_call_hooks(st_op_id op, const void *args, const int *sm_count, st_dispatch_hooks *h);

typedef struct st_dispatch_candidate {
  const st_dispatch_variant *v;
  st_dispatch_rule rule;
  long long batch;   /* the winner's batch; 0 for a default   */
  long long context; /* the winner's context; 0 when none     */
  double distance;   /* the winner's key from the call's (rule 2); 0 otherwise */
  int supported;     /* a nearest winner that goes before the defaults */
} st_dispatch_candidate;

typedef struct st_dispatch_choice {
  const st_dispatch_variant *v; /* points into the table                 */
  st_dispatch_rule rule;
  void *loaded; /* what the load hook returned           */
} st_dispatch_choice;

typedef struct st_dispatch_memo_entry {
  uint64_t hash; /* of key; 0 marks a free slot */
  int max_context;
  uint32_t tag; /* the op's memo_tag of the call (ops/op.h) */
  char key[ST_DISPATCH_KEY_MAX];
  st_dispatch_choice choice;
} st_dispatch_memo_entry;

typedef struct st_dispatch_memo {
  st_dispatch_memo_entry slot[ST_DISPATCH_MEMO_SLOTS];
  unsigned next; /* the slot the next new key replaces (round robin) */
} st_dispatch_memo;

/* Lists the variants of `t` that fit the call, best first, each once (by
 * id): exact winners (newest run first), nearest-key winners within the
 * radius that beat the defaults on their keys, defaults (those meant for
 * the call's load first, then by rank; a default that is also one of the
 * other winners is listed here), the other winners, nearest first. `fields`
 * are the call's dispatch key fields; only hooks->fit is used. `out` must
 * hold n_winners + n_defaults entries. *n_fit is the count written; when it
 * is 0, `why` (may be NULL) holds the last reason a recorded variant did
 * not fit, or is empty. Never fails. */
void st_dispatch_candidates(const st_dispatch_table *t, const st_params *fields, const void *args,
                            const st_dispatch_hooks *hooks, st_dispatch_candidate *out, size_t *n_fit, st_err *why);

/* Chooses and loads the variant for a call, without the memo: the first
 * candidate that loads. `key` is the call's dispatch key text (named in
 * messages). ST_ERR_NO_VARIANT names the shape and the database when no
 * variant fits or none of those that fit could be loaded. */
st_status st_dispatch_choose(const st_dispatch_table *t, const char *key, const st_params *fields, const void *args,
                             const st_dispatch_hooks *hooks, st_dispatch_choice *choice, st_err *err);

/* The memoized choice, per (key, max_context, tag) (the call's host-known
 * bound on sequence lengths, which the key leaves out, and the op's memo
 * tag: run-time properties outside the key that change which variants
 * fit, such as a scale mode): a hit whose variant still
 * fits is returned with no allocation and no hook but `fit`; a miss runs
 * st_dispatch_choose and remembers a success. The caller serializes access
 * to `memo`. */
st_status st_dispatch_resolve(const st_dispatch_table *t, st_dispatch_memo *memo, const char *key,
                              const st_params *fields, const void *args, int max_context, uint32_t tag,
                              const st_dispatch_hooks *hooks, st_dispatch_choice *choice, st_err *err);

/* Memo primitives (st_dispatch_resolve uses them; exposed for tests).
 * find returns NULL on a miss; put replaces the entry of the same key, else
 * a free slot, else the oldest. Keys longer than ST_DISPATCH_KEY_MAX - 1 are
 * never remembered. */
const st_dispatch_choice *st_dispatch_memo_find(const st_dispatch_memo *memo, const char *key, int max_context,
                                                uint32_t tag);
void st_dispatch_memo_put(st_dispatch_memo *memo, const char *key, int max_context, uint32_t tag,
                          const st_dispatch_choice *choice);

/* Sorts loaded tables into the order dispatch expects: winners newest run
 * first then fastest, defaults by rank then name. */
void st_dispatch_sort_winners(st_dispatch_winner *w, size_t n);
void st_dispatch_sort_defaults(st_dispatch_variant *v, size_t n);

/* The positive integer `name` of a key's fields, 0 when absent or not one. */
long long st_dispatch_key_int(const st_params *fields, const char *name);

/* "exact", "nearest key", "default". */
const char *st_dispatch_rule_name(st_dispatch_rule rule);

#endif
