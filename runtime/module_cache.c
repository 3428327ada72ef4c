#include "module_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk_cache.h"
#include "nvrtc_loader.h"
#include "sparsetune.h"

void st_module_cache_init(st_module_cache *c, const st_cu *cu, CUcontext ctx, st_db *db, const char *arch,
                          const char *db_path) {
  *c = (st_module_cache){.cu = cu, .ctx = ctx, .db = db, .arch = arch, .db_path = db_path ? db_path : "no database"};
  st_disk_cache_dir(c->cache_dir, sizeof c->cache_dir);
}

/* Driver results that condemn the image itself, not the machine's state:
 * the variant is unusable here, dispatch may fall through to the next. */
static int is_image_fault(CUresult rc) {
  switch (rc) {
  case CUDA_ERROR_INVALID_IMAGE:
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_INVALID_PTX:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
  case CUDA_ERROR_INVALID_SOURCE:
  case CUDA_ERROR_NOT_FOUND:
  case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
  case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED: return 1;
  default: return 0;
  }
}

/* Fails a driver call; an image fault becomes ST_ERR_NO_VARIANT. */
static st_status driver_fail(const st_module_cache *c, CUresult rc, const char *what, const char *hash, st_err *err) {
  st_err e;
  st_cu_fail(c->cu, rc, what, &e);
  if (!is_image_fault(rc)) {
    if (err) *err = e;
    return ST_ERR_CUDA;
  }
  return st_fail(err, ST_ERR_NO_VARIANT, "the %s binary of source %.12s in %s does not load: %s", c->arch, hash,
                 c->db_path, e.msg);
}

static st_status push_ctx(const st_module_cache *c, st_err *err) {
  CUresult rc = c->cu->cuCtxPushCurrent(c->ctx);
  return rc == CUDA_SUCCESS ? ST_OK : st_cu_fail(c->cu, rc, "cuCtxPushCurrent", err);
}

static void pop_ctx(const st_module_cache *c) {
  CUcontext popped = NULL;
  (void)c->cu->cuCtxPopCurrent(&popped); /* cannot fail after a successful push */
}

/* The first line of a compiler log, for a one-line message. */
static void first_line(const char *log, char *buf, size_t cap) {
  size_t i = 0;
  for (; log && log[i] && log[i] != '\n' && i + 1 < cap; i++) buf[i] = log[i];
  buf[i] = '\0';
  if (i == 0) snprintf(buf, cap, "no compiler log recorded");
}

/* Reads the binary of m->source_hash for this arch; on ST_OK *row must be
 * freed. *found is 0 when the database (if any) has none. */
static st_status read_binary(st_module_cache *c, const st_module *m, st_binary_row *row, int *found, st_err *err) {
  *found = 0;
  memset(row, 0, sizeof *row);
  st_status st = c->db ? st_db_get_binary(c->db, m->source_hash, c->arch, NULL, row, found, err) : ST_OK;
  if (st != ST_OK) return st;
  if (!*found)
    return st_fail(err, ST_ERR_NO_VARIANT, "source %.12s has no binary for %s in %s; run sparsetune compile",
                   m->source_hash, c->arch, c->db_path);
  if (!row->ok || !row->cubin || row->cubin_size == 0) {
    char line[200];
    first_line(row->log, line, sizeof line);
    st_db_binary_free(row);
    return st_fail(err, ST_ERR_NO_VARIANT, "the %s binary of source %.12s in %s failed to compile: %s", c->arch,
                   m->source_hash, c->db_path, line);
  }
  return ST_OK;
}

static st_status get_function(st_module_cache *c, st_module *m, const char *name, CUfunction *fn, st_err *err) {
  CUresult rc = c->cu->cuModuleGetFunction(fn, m->module, name);
  if (rc == CUDA_SUCCESS) return ST_OK;
  char what[160];
  snprintf(what, sizeof what, "cuModuleGetFunction(%s)", name);
  return driver_fail(c, rc, what, m->source_hash, err);
}

/* Called with the context pushed. */
static st_status load_functions(st_module_cache *c, st_module *m, int need_merge, st_err *err) {
  st_status st;
  if (!m->main_fn && (st = get_function(c, m, m->main_name, &m->main_fn, err)) != ST_OK) return st;
  if (need_merge && !m->merge_fn && (st = get_function(c, m, m->merge_name, &m->merge_fn, err)) != ST_OK) return st;
  return ST_OK;
}

/* 1 when `src` may not compile now: its stream is being captured. */
static int capturing(st_module_cache *c, const st_module_source *src) {
  if (!src->check_capture) return 0;
  if (push_ctx(c, NULL) != ST_OK) return 1;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = c->cu->cuStreamIsCapturing(src->stream, &status);
  pop_ctx(c);
  return rc != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The binary of a built-in variant: from the disk cache, else compiled
 * (and then kept there). *later is set when it cannot be had now but may
 * be later (during a capture). */
static st_status builtin_binary(st_module_cache *c, const st_module *m, const st_module_source *src, void **cubin,
                                size_t *size, int *later, st_err *err) {
  const st_nvrtc *nvrtc = NULL;
  st_status st = st_nvrtc_load(&nvrtc, err);
  if (st != ST_OK) return st;
  char path[4352], compiler[96];
  snprintf(compiler, sizeof compiler, "%s sparsetune %s", st_nvrtc_name(nvrtc), SPARSETUNE_VERSION_STRING);
  st_disk_cache_path(c->cache_dir, m->source_hash, c->arch, compiler, path, sizeof path);
  if (c->cache_dir[0] && st_disk_cache_read(path, cubin, size)) return ST_OK;
  if (capturing(c, src)) {
    *later = 1;
    return st_fail(err, ST_ERR_NO_VARIANT,
                   "built-in variant %s is not compiled yet, and compiling it during a CUDA graph capture would "
                   "stall the capture: call %s with these arguments before capturing",
                   src->name, src->prepare_fn);
  }
  char *text = NULL;
  size_t len = 0;
  if ((st = src->text(src->ctx, &text, &len, err)) != ST_OK) return st;
  st = st_nvrtc_compile(nvrtc, text, src->name, c->arch, cubin, size, err);
  free(text);
  if (st == ST_OK && c->cache_dir[0]) (void)st_disk_cache_write(path, *cubin, *size); /* a convenience only */
  return st;
}

void st_params_gate_name(size_t params_bytes, char *buf, size_t cap) {
  snprintf(buf, cap, "_Z15st_params_bytesILy%zuEEvv", params_bytes);
}

/* Whether the module was compiled for the argument block this library
 * fills: it holds st_params_bytes<m->params_bytes>
 * (templates/common/params_gate.cuh). Called with the context pushed. */
static st_status check_params_gate(st_module_cache *c, st_module *m, st_err *err) {
  char name[64];
  st_params_gate_name(m->params_bytes, name, sizeof name);
  CUfunction gate = NULL;
  CUresult rc = c->cu->cuModuleGetFunction(&gate, m->module, name);
  if (rc == CUDA_SUCCESS) return ST_OK;
  if (rc != CUDA_ERROR_NOT_FOUND) return driver_fail(c, rc, "cuModuleGetFunction(st_params_bytes)", m->source_hash, err);
  return st_fail(err, ST_ERR_NO_VARIANT,
                 "the %s binary of source %.12s in %s was compiled for other kernel arguments than this library's "
                 "%zu-byte block (another version's templates): tune again with this version",
                 c->arch, m->source_hash, c->db_path, m->params_bytes);
}

static st_status load_image(st_module_cache *c, st_module *m, const void *image, int need_merge, st_err *err) {
  st_status st = push_ctx(c, err);
  if (st != ST_OK) return st;
  CUresult rc = c->cu->cuModuleLoadData(&m->module, image);
  if (rc != CUDA_SUCCESS) {
    m->module = NULL;
    st = driver_fail(c, rc, "cuModuleLoadData", m->source_hash, err);
  } else if ((st = check_params_gate(c, m, err)) == ST_OK) {
    st = load_functions(c, m, need_merge, err);
  }
  pop_ctx(c);
  return st;
}

static st_status load_module(st_module_cache *c, st_module *m, int need_merge, const st_module_source *src,
                             int *later, st_err *err) {
  st_binary_row row;
  int found = 0;
  st_status st = read_binary(c, m, &row, &found, err);
  if (st == ST_OK) {
    st = load_image(c, m, row.cubin, need_merge, err);
    st_db_binary_free(&row);
    return st;
  }
  if (found || !src || st != ST_ERR_NO_VARIANT) return st; /* a failed compile recorded, or no source */
  void *cubin = NULL;
  size_t size = 0;
  if ((st = builtin_binary(c, m, src, &cubin, &size, later, err)) == ST_OK) st = load_image(c, m, cubin, need_merge, err);
  free(cubin);
  return st;
}

static st_module *find(const st_module_cache *c, const char *hash) {
  for (size_t i = 0; i < c->n; i++)
    if (strcmp(c->entries[i]->source_hash, hash) == 0) return c->entries[i];
  return NULL;
}

static void unload(const st_module_cache *c, st_module *m) {
  if (!m->module) return;
  if (push_ctx(c, NULL) != ST_OK) return; /* the context is gone: so is the module */
  (void)c->cu->cuModuleUnload(m->module); /* at close: nothing better to do on failure */
  pop_ctx(c);
  m->module = NULL;
}

static st_status add_entry(st_module_cache *c, st_module *m, st_err *err) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    st_module **grown = realloc(c->entries, cap * sizeof *grown); // NOLINT(bugprone-sizeof-expression): pointers
    if (!grown) return st_fail(err, ST_ERR_NOMEM, "out of host memory growing the module cache to %zu", cap);
    c->entries = grown;
    c->cap = cap;
  }
  c->entries[c->n++] = m;
  return ST_OK;
}

st_status st_module_cache_get(st_module_cache *c, const char *source_hash, const char *main_name,
                              const char *merge_name, size_t params_bytes, int need_merge,
                              const st_module_source *src, st_module **out, st_err *err) {
  st_module *m = find(c, source_hash);
  if (m && m->status != ST_OK) {
    if (err) *err = m->why;
    return m->status;
  }
  if (m) { /* loaded; a variant of the same source may still need the merge
              kernel */
    st_status st = ST_OK;
    if (need_merge && !m->merge_fn && (st = push_ctx(c, err)) == ST_OK) {
      st = load_functions(c, m, need_merge, err);
      pop_ctx(c);
    }
    if (st == ST_OK) *out = m;
    return st;
  }

  if (strlen(source_hash) >= sizeof m->source_hash)
    return st_fail(err, ST_ERR_NO_VARIANT, "source hash '%.60s' is longer than %zu characters", source_hash,
                   sizeof m->source_hash - 1);
  if (!(m = calloc(1, sizeof *m))) return st_fail(err, ST_ERR_NOMEM, "out of host memory loading a module");
  snprintf(m->source_hash, sizeof m->source_hash, "%s", source_hash);
  m->main_name = main_name;
  m->merge_name = merge_name;
  m->params_bytes = params_bytes;
  m->smem_limit = m->merge_smem_limit = ST_DEFAULT_DYNAMIC_SMEM_LIMIT;
  int later = 0;
  st_status st = load_module(c, m, need_merge, src, &later, &m->why);
  if (err && st != ST_OK) *err = m->why;
  if (st != ST_OK && (st != ST_ERR_NO_VARIANT || later)) goto cleanup; /* not the binary's fault: retried later */
  m->status = st;
  if (add_entry(c, m, err) != ST_OK) {
    st = ST_ERR_NOMEM;
    goto cleanup;
  }
  if (st == ST_OK) *out = m;
  return st;

cleanup:
  unload(c, m);
  free(m);
  return st;
}

static st_status allow_smem(st_module_cache *c, CUfunction fn, const char *kernel, unsigned bytes, unsigned *limit,
                            const char *hash, st_err *err) {
  if (bytes <= *limit) return ST_OK;
  st_status st = push_ctx(c, err);
  if (st != ST_OK) return st;
  CUresult rc = c->cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
  pop_ctx(c);
  if (rc != CUDA_SUCCESS) {
    st_err e;
    st_cu_fail(c->cu, rc, "cuFuncSetAttribute", &e);
    return st_fail(err, ST_ERR_CUDA, "allowing %s of source %.12s %u bytes of dynamic shared memory: %s", kernel, hash,
                   bytes, e.msg);
  }
  *limit = bytes;
  return ST_OK;
}

st_status st_module_reserve_smem(st_module_cache *c, st_module *m, unsigned main_bytes, unsigned merge_bytes,
                                 st_err *err) {
  st_status st = allow_smem(c, m->main_fn, m->main_name, main_bytes, &m->smem_limit, m->source_hash, err);
  if (st != ST_OK || !m->merge_fn) return st;
  return allow_smem(c, m->merge_fn, m->merge_name, merge_bytes, &m->merge_smem_limit, m->source_hash, err);
}

void st_module_cache_free(st_module_cache *c) {
  for (size_t i = 0; i < c->n; i++) {
    unload(c, c->entries[i]);
    free(c->entries[i]);
  }
  free(c->entries);
  c->entries = NULL;
  c->n = c->cap = 0;
}
