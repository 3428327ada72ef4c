/* builtin_catalog.h - the built-in variants of every op, as the build
 * generated them (generator/builtin_catalog.lua writes builtin_catalog.c
 * from each op's defaults() and the templates).
 *
 * A built-in variant's source is st_builtin_parts[part].head, then its
 * prelude, then st_builtin_parts[part].tail: the text the generator renders
 * for it, byte for byte (runtime/builtin.c joins them). */
#ifndef ST_BUILTIN_CATALOG_H
#define ST_BUILTIN_CATALOG_H

#include <stddef.h>

typedef struct st_builtin_param {
  const char *key, *val; /* {NULL, NULL} ends a list */
} st_builtin_param;

/* The text of one template before and after its prelude. */
typedef struct st_builtin_part {
  const char *head;
  size_t head_len;
  const char *tail;
  size_t tail_len;
} st_builtin_part;

typedef struct st_builtin_entry {
  const char *op;   /* "index_decode" */
  const char *name; /* the generator's variant name */
  const st_builtin_param *kernel, *launch;
  int part; /* index into st_builtin_parts */
  /* The loads it is preferred at, (lo, hi] (the op's load function,
   * ops/op.h); hi < 0: any. */
  double load_lo, load_hi;
  /* And the query tokens a request it is preferred at, (lo, hi]; hi < 0:
   * any. */
  int qlen_lo, qlen_hi;
  const char *prelude; /* the variant's #define lines, with their markers */
} st_builtin_entry;

extern const st_builtin_part st_builtin_parts[];
extern const int st_builtin_part_count;
/* In the order of each op's defaults(): earlier is preferred among equals. */
extern const st_builtin_entry st_builtin_entries[];
extern const int st_builtin_entry_count;

#endif
