/* disk_cache.h - binaries of built-in variants kept on disk between runs.
 *
 * A binary compiled at first use is kept in the cache folder:
 * $SPARSETUNE_CACHE_DIR if set (the value "off" keeps nothing), else
 * $XDG_CACHE_HOME/sparsetune, else $HOME/.cache/sparsetune. A file is named
 * by what decides its content: the source hash, the architecture, the
 * compiler and the library, whose version fixes the compile options
 * ("<hash>.sm_90a.nvrtc-13.0-sparsetune-0.2.0.cubin"). It holds a header (magic,
 * length, hash of the payload) that a read checks, so a truncated or
 * altered file is ignored and compiled again, never loaded. Writes go to a
 * temporary file in the folder and are renamed into place, so concurrent
 * processes see a whole file or none. The cache is a convenience: a folder
 * that cannot be made or written costs a compile per process, never an
 * error. */
#ifndef ST_DISK_CACHE_H
#define ST_DISK_CACHE_H

#include <stddef.h>

/* The cache folder, or "" when caching is off or no folder can be named
 * (no HOME). */
void st_disk_cache_dir(char *buf, size_t cap);

/* The file of (source_hash, arch, compiler) in `dir` (spaces in `compiler`
 * become dashes); "" if it does not fit. */
void st_disk_cache_path(const char *dir, const char *source_hash, const char *arch, const char *compiler,
                        char *buf, size_t cap);

/* 1 and a malloc'ed copy of the binary when `path` holds a whole, intact
 * one; else 0 (absent, unreadable, corrupt: the caller compiles). */
int st_disk_cache_read(const char *path, void **data, size_t *size);

/* Stores a binary at `path` (making its folder, mode 0700, as needed);
 * 0 on success, -1 when it could not (nothing is left behind). */
int st_disk_cache_write(const char *path, const void *data, size_t size);

#endif
