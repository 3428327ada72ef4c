/* builtin.h - the built-in variants: what each op runs when the database
 * has no winner for a call, or when there is no database.
 *
 * They are each op's defaults (generator/ops/<op>.lua defaults()), held
 * in the library (builtin_catalog.h) with the sources the generator renders
 * for them, so they have the generator's source hashes and ids: a database
 * that holds one's binary serves it; otherwise the module cache compiles
 * its source with NVRTC at first use and keeps the binary on disk
 * (disk_cache.h). */
#ifndef ST_BUILTIN_H
#define ST_BUILTIN_H

#include <stddef.h>

#include "dispatch.h"
#include "error.h"

/* The built-in variants of `op`, in dispatch order (the op's rank, then the
 * order of its defaults()), as a malloc'ed array (NULL when none). Each
 * has v->builtin set. */
st_status st_builtin_variants(st_op_id op, st_dispatch_variant **out, size_t *n, st_err *err);

/* The built-in variant the library runs for the valid arguments `args` of
 * `op` with no database on a device of `sm_count` multiprocessors, into
 * *out: the op's built-ins in dispatch order (those its load and qlen
 * ranges and its default_meant_for mean for the call first), the first
 * whose launcher plan fits. Needs no device: plans read shapes only.
 * ST_ERR_NO_VARIANT (with the last reason) when none fits. */
st_status st_builtin_choose(st_op_id op, const void *args, int sm_count, st_dispatch_variant *out, st_err *err);

/* The source of built-in variant `v` (v->builtin != 0): malloc'ed text of
 * *len bytes and a NUL. */
st_status st_builtin_source(const st_dispatch_variant *v, char **text, size_t *len, st_err *err);

#endif
