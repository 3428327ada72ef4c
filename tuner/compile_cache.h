/* compile_cache.h - the tuner's compile results kept on disk, shared by every
 * database on the machine.
 *
 * A database keeps the binaries of its own sources; a tune into another
 * database (an eval's oracle, a second suite, a fresh file) compiled them
 * all again. So each compile result, the cubin with what the database
 * stores beside it (ok, the ptxas resource report, the log), is also kept
 * in the runtime's cache folder (runtime/disk_cache.h: $SPARSETUNE_CACHE_DIR,
 * "off" for none, else $XDG_CACHE_HOME/sparsetune or ~/.cache/sparsetune)
 * as "<hash>.<arch>.<compiler>-sparsetune-<version>.row", and taken from
 * there before compiling. The file carries the disk cache's integrity
 * check, and its payload is read field by field with every length checked:
 * a damaged or foreign file is ignored (the source is compiled again),
 * never trusted. Like the runtime's cache, a folder that cannot be written
 * costs a compile, never an error. */
#ifndef ST_COMPILE_CACHE_H
#define ST_COMPILE_CACHE_H

#include <stddef.h>

#include "st_db.h"

/* The row file of (source_hash, arch, compiler) in `dir`; "" when `dir`
 * is "" (caching off) or the name does not fit. */
void st_compile_cache_path(const char *dir, const char *source_hash, const char *arch, const char *compiler, char *buf,
                           size_t cap);

/* 1 with *out filled (source_hash, arch and compiler from the arguments;
 * cubin and log malloc'ed, free them as st_compiled_free does) when `path`
 * holds an intact result; else 0 and *out untouched. */
int st_compile_cache_get(const char *path, const char *source_hash, const char *arch, const char *compiler,
                         st_binary_row *out);

/* Keeps `b` at `path`; 0 on success, -1 when it could not (nothing is left
 * behind). */
int st_compile_cache_put(const char *path, const st_binary_row *b);

#endif
