/* gpu_db.h - a tuning database for the runtime's GPU tests: the variants of
 * one shape, compiled for the device, and one recorded winner (gpu_db.c). */
#ifndef ST_TEST_GPU_DB_H
#define ST_TEST_GPU_DB_H

#include <stddef.h>

#include "generator.h"

/* Generates `op`'s variants for `shape`, compiles them for GPU 0 into a new
 * database at a temporary path (written to path[cap]) and records as the
 * winner of `dispatch_key` the first non-default variant whose kernel
 * parameter `algo` is `algo` and launch parameter `splits` is `splits`; its
 * id goes to winner_id[40]. Fails the calling test on any error. */
void st_test_make_db(const char *op, const st_shape *shape, const char *dispatch_key, const char *algo,
                     const char *splits, char *path, size_t cap, char *winner_id);

/* Removes the database and its WAL side files. */
void st_test_remove_db(const char *path);

#endif
