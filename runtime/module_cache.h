/* module_cache.h - binaries from the database, or compiled from the
 * built-in sources, loaded as CUmodules once.
 *
 * A binary comes from the database when it holds one for the source hash;
 * else, for a built-in variant (st_module_source), from the disk cache
 * (disk_cache.h), else from NVRTC (nvrtc_loader.h), after which the disk cache
 * keeps it. A compile is never started while the launch stream is being
 * captured into a CUDA graph (it would hold the capture for seconds): such
 * a call fails, is not remembered, and the message says to prepare first.
 *
 * One entry per source hash (the binary is a function of the source and the
 * device arch, which is fixed per handle). An entry is created on the first
 * request and lives until st_module_cache_free: the CUfunctions in it stay
 * valid while other threads launch them, so callers may keep pointers to
 * entries. A binary that is missing, failed to compile or does not load is
 * remembered as such (ST_ERR_NO_VARIANT and the reason), so a broken variant
 * costs one database read, not one per call. Driver and database failures
 * that are not the binary's fault are not remembered.
 *
 * Not thread-safe: the handle's lock serializes every call. */
#ifndef ST_MODULE_CACHE_H
#define ST_MODULE_CACHE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "st_db.h"

/* Dynamic shared memory a kernel may use without opting in. */
#define ST_DEFAULT_DYNAMIC_SMEM_LIMIT (48u * 1024u)

typedef struct st_module {
  char source_hash[40];
  st_status status; /* ST_OK: loaded; else why it cannot be (in `why`) */
  st_err why;
  CUmodule module;
  const char *main_name, *merge_name; /* the op's kernel names (static strings) */
  size_t params_bytes;                /* the argument block the module must name */
  CUfunction main_fn;                 /* main_name                                       */
  CUfunction merge_fn;                /* merge_name, once needed                         */
  unsigned smem_limit;                /* dynamic shared memory main_fn is allowed        */
  unsigned merge_smem_limit;          /* and merge_fn                               */
} st_module;

/* Where a binary the database lacks comes from: a built-in variant's
 * source. */
typedef struct st_module_source {
  const char *name; /* the variant's, for messages and the compiler */
  /* Writes the malloc'ed source text (the variant's) into *text. */
  st_status (*text)(const void *ctx, char **text, size_t *len, st_err *err);
  const void *ctx;
  /* Compiling is allowed unless `check_capture` is set and `stream` is
   * being captured (or the query fails). */
  int check_capture;
  CUstream stream;
  const char *prepare_fn; /* "st_index_decode_prepare": what to call first */
} st_module_source;

typedef struct st_module_cache {
  const st_cu *cu;
  CUcontext ctx; /* the primary context modules are loaded into     */
  st_db *db;     /* NULL: no database, built-in variants only       */
  char cache_dir[4096]; /* disk_cache.h; "" keeps nothing              */
  const char *arch;    /* "sm_90a": which binary to read                   */
  const char *db_path; /* for messages                                    */
  st_module **entries;
  size_t n, cap;
} st_module_cache;

/* Binds an empty cache (db may be NULL) and names its disk cache folder;
 * nothing is loaded yet. The pointers must outlive it. */
void st_module_cache_init(st_module_cache *c, const st_cu *cu, CUcontext ctx, st_db *db, const char *arch,
                          const char *db_path);

/* The loaded module of `source_hash`, whose kernels are called `main_name`
 * and `merge_name` (static strings: a source is one op's) and take an
 * argument block of `params_bytes`, with the merge kernel resolved too when
 * `need_merge`; `src` (NULL: none) is where a binary the database lacks may
 * come from. ST_ERR_NO_VARIANT: no usable binary (the message says why: a
 * binary compiled for another argument block is one,
 * templates/common/params_gate.cuh); ST_ERR_CUDA / ST_ERR_DB / ST_ERR_NOMEM:
 * could not tell. */
st_status st_module_cache_get(st_module_cache *c, const char *source_hash, const char *main_name,
                              const char *merge_name, size_t params_bytes, int need_merge,
                              const st_module_source *src, st_module **out, st_err *err);

/* The mangled name of the kernel by which a module says it was compiled for
 * an argument block of `params_bytes` (templates/common/params_gate.cuh);
 * 64 bytes always suffice. */
void st_params_gate_name(size_t params_bytes, char *buf, size_t cap);

/* Lets m->main_fn use `main_bytes` and m->merge_fn `merge_bytes` of dynamic
 * shared memory (above 48 KiB a kernel must opt in); a no-op when they
 * already may, so prepare does the driver call and the launch path does not. */
st_status st_module_reserve_smem(st_module_cache *c, st_module *m, unsigned main_bytes, unsigned merge_bytes,
                                 st_err *err);

/* Unloads every module and frees the entries. The cache may be re-used
 * after st_module_cache_init. */
void st_module_cache_free(st_module_cache *c);

#endif
