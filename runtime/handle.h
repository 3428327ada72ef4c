/* handle.h - what an st_handle holds (private to libsparsetune and its tests).
 *
 * A handle binds one read-only database to the primary context of one
 * device. Everything it loads at st_open (winners and defaults) is read-only
 * afterwards; the memo tables, the module cache and the database connection
 * change later and are guarded by `lock`. Launches happen outside the lock.
 *
 * Ownership: the handle owns every array and pointer below; st_handle_free
 * releases them in reverse order of acquisition, whatever state they are in,
 * so st_open can fail at any step and clean up with it. */
#ifndef ST_HANDLE_H
#define ST_HANDLE_H

#include <pthread.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "dispatch.h"
#include "module_cache.h"
#include "ops/side_stream.h"
#include "st_db.h"

/* What dispatch knows about one op on a handle: the variants loaded at
 * st_open and the views dispatch reads, and the memo of its decisions. */
typedef struct st_op_tables {
  st_dispatch_winner *winners;
  size_t n_winners;
  st_dispatch_variant *defaults;
  size_t n_defaults;
  st_err note; /* why recorded variants were left out; "" if none */
  st_dispatch_table table;
  st_dispatch_memo memo;
} st_op_tables;

struct st_handle {
  uint64_t serial; /* unique per process: tells a reused address apart */
  const st_cu *cu; /* NULL for a handle made without a driver (tests)  */
  st_device_info dev;
  CUdevice device;
  CUcontext ctx; /* retained primary context; NULL until retained    */
  st_db *db;     /* NULL: no database (built-in variants only) */
  char *db_path; /* NULL with db                                */
  pthread_mutex_t lock;

  st_op_tables ops[ST_OP_COUNT]; /* indexed by st_op_id */

  st_module_cache modules;

  /* The side stream of launches that fork (sparse_attn with overlap),
   * created by st_sparse_attn_prepare or the first such launch; `side_lock`
   * is held while one of them enqueues, so its events serve one launch at a
   * time. */
  pthread_mutex_t side_lock;
  st_side_stream side;

  /* How dispatch checks a fit and loads a variant: the launcher (fit check
   * and plan on this device) and the module cache, or a test's stand-ins.
   * `reserve_smem` gets what `load` returned and lets its kernels use the
   * plan's dynamic shared memory. `fit` gets `fit_ctx` (the handle), the
   * others `hook_ctx` (the handle). */
  st_dispatch_fit_fn fit;
  void *fit_ctx;
  st_dispatch_load_fn load;
  /* The stream of the call whose choice is being loaded, and whether to
   * check it for a capture before compiling (the launch path sets them,
   * under `lock`; module_cache.h). */
  CUstream load_stream;
  int load_stream_checked;
  st_status (*reserve_smem)(void *ctx, void *loaded, unsigned main_bytes, unsigned merge_bytes, st_err *err);
  void *hook_ctx;
};

/* A handle bound to nothing: no driver, no device, no database, empty
 * tables, the default hooks. st_open fills it in; tests use it bare. */
st_status st_handle_alloc(st_handle **out, st_err *err);

/* Releases whatever `h` holds (NULL accepted). */
void st_handle_free(st_handle *h);

/* Points every op's table at the handle's arrays (after they change). */
void st_handle_bind_tables(st_handle *h);

/* ---- per-thread results of the public calls (last_error.c) ----------- */

/* Records `err` as the calling thread's last error on `h` (NULL: the
 * handle-less slot, which st_last_error(NULL) reads) and returns `status`. */
st_status st_api_fail(const st_handle *h, st_status status, const st_err *err);

/* Records the variant the calling thread's last launch on `h` used. `v`
 * must live as long as `h`; only the pointer is stored (no string work). */
void st_api_set_variant(const st_handle *h, const st_dispatch_variant *v);

/* Forgets the calling thread's records about `h` (at st_close). */
void st_api_forget(const st_handle *h);

#endif
