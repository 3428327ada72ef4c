/*
 * sparsetune.h - the C ABI of libsparsetune, the runtime dispatch library.
 *
 * An inference engine links libsparsetune, opens a tuning database written by
 * `sparsetune tune` (or none), and calls one function per op. Each call picks
 * the best recorded kernel variant for its shape (exact shape, else the
 * nearest batch size and, for st_index_decode, max_context), else the op's
 * built-in choice for the shape; it loads that variant's binary the first
 * time it is needed (from the database, else, for a built-in variant, from
 * the disk cache or compiled with NVRTC, which st_*_prepare does ahead of a
 * graph capture), and launches it on the caller's stream.
 *
 * Rules every entry point follows:
 *  - It returns an st_status; ST_OK (0) is success. On failure nothing was
 *    launched, and st_last_error() names the argument and value at fault.
 *  - Device memory is always the caller's: tensors, outputs and workspace.
 *    The library allocates no device memory on the launch path and never
 *    synchronizes the host with the device there, so launches can be captured
 *    in a CUDA graph (after st_*_prepare loaded the module for the shape).
 *  - The CUDA driver is loaded at run time; on a machine without a driver or
 *    device st_open fails with ST_ERR_NO_DRIVER or ST_ERR_NO_DEVICE.
 *  - A handle is thread-safe: several threads may launch through one handle.
 */
#ifndef SPARSETUNE_H
#define SPARSETUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARSETUNE_VERSION_MAJOR 0
#define SPARSETUNE_VERSION_MINOR 2
#define SPARSETUNE_VERSION_PATCH 0
#define SPARSETUNE_VERSION_STRING "0.2.0"
/* One number that grows with every version: 10000 x major + 100 x minor +
 * patch (0.2.0 is 200), for comparisons in the preprocessor and at run time
 * (st_version_number). */
#define SPARSETUNE_VERSION_NUMBER \
  (SPARSETUNE_VERSION_MAJOR * 10000 + SPARSETUNE_VERSION_MINOR * 100 + SPARSETUNE_VERSION_PATCH)

/* ST_API marks the functions of this header, the library's whole ABI: the
 * library is built with hidden visibility, so nothing else it holds is
 * exported (GCC and Clang; other compilers export as they do by default). */
#if defined(__GNUC__) || defined(__clang__)
#define ST_API __attribute__((visibility("default")))
#else
#define ST_API
#endif

typedef enum st_status {
  ST_OK = 0,
  ST_ERR_INVALID_ARG = 1, /* a shape, stride, dtype, pointer or limit is wrong */
  ST_ERR_NO_DRIVER = 2,   /* libcuda.so.1 could not be loaded */
  ST_ERR_NO_DEVICE = 3,   /* the driver loaded but the device ordinal is absent */
  ST_ERR_CUDA = 4,        /* a CUDA driver call failed; the message has its name */
  ST_ERR_DB = 5,          /* the database is missing, corrupt, foreign or too new */
  ST_ERR_NO_VARIANT = 6,  /* no compiled variant in the database fits the shape */
  ST_ERR_WORKSPACE = 7,   /* the workspace is smaller than the op needs */
  ST_ERR_NOMEM = 8,       /* host memory ran out */
  ST_ERR_UNSUPPORTED = 9  /* valid by the op contract, but not built (yet) */
} st_status;

typedef enum st_dtype {
  ST_DTYPE_BF16 = 1,
  ST_DTYPE_FP8_E4M3 = 2,
  ST_DTYPE_INT32 = 3,
  ST_DTYPE_FP32 = 4
} st_dtype;

#define ST_MAX_DIMS 6

/* The op contract's sparse block: 128 tokens, one page of a paged cache
 * (a block_table entry names a page of this many tokens). */
#define ST_BLOCK_TOKENS 128

/* A strided view of device memory. Shapes and strides are in elements; the
 * last dimension must have stride 1. The library never frees `data`.
 * Every view an op reads must have: a dtype of st_dtype; each shape in
 * 1..2^31-1; non-negative strides, each below 2^63 bytes; a largest
 * element ending below 2^63 bytes from data, that is (1 + the sum of
 * stride[i] x (shape[i] - 1)) x element bytes < 2^63; and data aligned to
 * its element size (st_<op> checks data; the workspace and prepare calls
 * read no pointer). */
typedef struct st_tensor {
  void *data;
  st_dtype dtype;
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  int64_t stride[ST_MAX_DIMS];
} st_tensor;

/* Opaque handle: one open database (or none) bound to one CUDA device. */
typedef struct st_handle st_handle;

/* Opens `db_path` read-only (the file is never modified) and binds the handle
 * to the primary context of CUDA device `device_ordinal`, which it retains
 * until st_close. Loads the winners recorded for this device model.
 * db_path NULL: no database; every call runs the op's built-in variant for
 * its shape, compiled at first use (NVRTC, loaded at run time) and kept in
 * the disk cache: $SPARSETUNE_CACHE_DIR ("off": none), else
 * $XDG_CACHE_HOME/sparsetune, else $HOME/.cache/sparsetune.
 * On success *out owns a handle the caller releases with st_close. */
ST_API st_status st_open(const char *db_path, int device_ordinal, st_handle **out);

/* Unloads modules, releases the primary context and frees the handle.
 * NULL is accepted. No launch may be in flight on another thread. */
ST_API void st_close(st_handle *handle);

/* The message of the calling thread's last failed call on `handle` (NULL: the
 * last failed st_open of this thread), or "" if there is none. The string is
 * owned by the library and valid until the thread's next call. */
ST_API const char *st_last_error(const st_handle *handle);

/* A short name for a status code ("ST_ERR_INVALID_ARG"); never NULL. */
ST_API const char *st_status_name(st_status status);

/* The library's version, its SPARSETUNE_VERSION_STRING ("0.2.0"); a static
 * string, never NULL. Lets a program check that the header it was built with
 * matches the library it runs with. */
ST_API const char *st_version(void);

/* The library's SPARSETUNE_VERSION_NUMBER. */
ST_API unsigned st_version_number(void);

/* Zero-fills `bytes` of `workspace` on `stream`. A workspace must be zeroed
 * once before its first use. One workspace may then serve every op, and
 * every shape of each, one call after another on a stream (not two calls
 * at once): the counters the kernels need zero live in its first 64 KiB,
 * which every launch leaves zeroed, and all else a launch writes lies past
 * them, where the next call expects nothing. Graph replays need no further
 * clearing. Size it as the largest st_<op>_workspace_size of the calls it
 * serves. */
ST_API st_status st_workspace_clear(st_handle *handle, void *workspace, size_t bytes, void *stream);

/* ---- argument blocks ------------------------------------------------------
 *
 * Each op takes its arguments in one struct, st_<op>_args, which begins
 * with `struct_size`. Call st_<op>_args_init on a block first: it sets
 * struct_size and every other field to zero (views NULL, pdl 0, lse not
 * wanted, scale mode none), then fill in the fields. Every entry point
 * refuses (ST_ERR_INVALID_ARG) a block whose struct_size is not one this
 * library knows, so a block that was never initialized is caught, and a
 * later version of the library can add fields at the end of a block and
 * still take blocks of the sizes before.
 */

/* ---- index_decode: lightning-indexer block selection for a decode batch ---
 *
 * For R requests with `qlen` query tokens each (the last qlen positions of
 * the request), selects per index head h and query token the ids of
 * min(topk, nb) visible 128-token KV blocks: the `init_blocks` first and the
 * `local_blocks` last visible ones, then those with the highest block score
 * (max over the block's visible positions of dot(q, k)). Unused slots are -1;
 * a request with seq_len 0 gets a row of -1 and its memory is not touched.
 *
 * Programmatic dependent launch (`pdl` = 1, Hopper): the op's first kernel
 * is launched so that its CTAs may be placed while the kernel before it on
 * the stream finishes; they wait for that kernel's end and writes before
 * they touch memory, so results are those of a plain launch, and a CUDA
 * graph captures the pair as a programmatic edge. The ops' kernels do not
 * signal the launch after them early: a caller's kernel launched with the
 * attribute after them is placed as they exit. 0 launches as usual.
 */
typedef struct st_index_decode_args {
  size_t struct_size;    /* set by st_index_decode_args_init */
  st_tensor q;           /* [R*qlen, H, D], bf16 or fp8 e4m3; R and H 1..65535;
                            rows (D elements) 16-byte aligned: data, D x element
                            bytes and the outer strides' bytes multiples of 16 */
  st_tensor k_cache;     /* [pages, 128, D], same dtype as q, rows as q's     */
  st_tensor block_table; /* [R, max_blocks] int32: page of each 128-token block */
  st_tensor seq_lens;    /* [R] int32, tokens per request, 0 = padding row   */
  st_tensor topk_idx;    /* out: [H, R*qlen, topk] int32                      */
  int qlen;              /* 1..4 query tokens per request                     */
  int topk;              /* 1..64                                             */
  int init_blocks;       /* forced first blocks, 0..topk                      */
  int local_blocks;      /* forced last blocks (the query's own included),
                            0..topk - init_blocks                             */
  int max_context;       /* host-known bound on every seq_len, 1..max_blocks*128 */
  int pdl;               /* 0 or 1: programmatic dependent launch (below)      */
} st_index_decode_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_index_decode_args_init(st_index_decode_args *args);

/* Bytes of workspace st_index_decode needs for these arguments (pointers in
 * `args` are not read). */
ST_API st_status st_index_decode_workspace_size(st_handle *handle, const st_index_decode_args *args, size_t *bytes);

/* Loads the module that st_index_decode would launch for these arguments, so
 * a later call can be captured in a CUDA graph without loading anything. */
ST_API st_status st_index_decode_prepare(st_handle *handle, const st_index_decode_args *args);

/* Launches index_decode on `stream` (a CUstream; NULL = legacy default).
 * Asynchronous; no host synchronization, no allocation. `workspace` must hold
 * st_index_decode_workspace_size bytes and have been cleared once. */
ST_API st_status st_index_decode(st_handle *handle, const st_index_decode_args *args, void *workspace,
                                 size_t workspace_bytes, void *stream);

/* ---- dsa_index_decode: DeepSeek-V3.2 lightning indexer for a decode batch -
 *
 * For R requests with `qlen` query tokens each (row r*qlen + t of q,
 * weights and topk_idx; query token t of request r sits at position
 * p = seq_lens[r] - qlen + t and sees tokens 0..p), selects per row the
 * logical positions of the min(topk, p + 1) tokens with the highest logit
 *   logit(k) = sum over heads h of weights[row][h] * relu(dot(q[row][h], k))
 * where k is token k's index key dequantized: its 128 fp8 values times its
 * fp32 scale. relu(x) = x < 0 ? 0 : x; the GPU multiplies fp8 values exactly
 * and accumulates in fp32. The weights carry whatever the caller folds in
 * (q's quantization scale, the softmax scale, 1/sqrt(H)), and may have
 * either sign. Fused: the logits are not an output (they pass through the
 * workspace).
 *
 * Output rows hold the chosen positions in no particular order, no position
 * twice, and -1 in the slots past min(topk, p + 1). NaN logits rank as -inf.
 * Among tokens whose logits tie with the k-th selected one (to rounding),
 * which are taken is unspecified; elsewhere the set is the exact top-k. A
 * request with seq_len 0 is padding: its rows are -1 and it touches no other
 * memory; a query token with p < 0 (seq_len < qlen) gets a row of -1.
 * seq_lens above max_context are read as max_context.
 *
 * The index-K cache is paged, `page_size` tokens a page: a page is
 * page_size x 128 fp8 e4m3 values, token-major ([page_size][128]), followed
 * at byte page_size * 128 by page_size fp32 scales, one per token:
 * page_size * 132 bytes (DeepSeek-V3.2: 64 tokens, 8448 bytes). It is given
 * as a 2-D byte view (dtype fp8_e4m3): shape [pages, page_size * 132],
 * stride[0] the bytes from one page to the next (a multiple of 16, at least
 * the page's bytes), stride[1] 1, data 16-byte aligned.
 *
 * CUDA-graph safe: the grids depend on R, qlen, topk and max_context only.
 * `pdl` as for st_index_decode.
 */
typedef struct st_dsa_index_decode_args {
  size_t struct_size;    /* set by st_dsa_index_decode_args_init */
  st_tensor q;           /* [R*qlen, H, 128] fp8 e4m3; R 1..65535, H 1..64; rows
                            16-byte aligned: data and both outer strides
                            multiples of 16 bytes                              */
  st_tensor weights;     /* [R*qlen, H] fp32 (any row stride)                 */
  st_tensor k_cache;     /* [pages, page_size*132] fp8 e4m3 bytes (above)     */
  st_tensor block_table; /* [R, max_pages] int32: physical page of each of a
                            request's logical pages                           */
  st_tensor seq_lens;    /* [R] int32, tokens per request, 0 = padding row    */
  st_tensor topk_idx;    /* out: [R*qlen, topk] int32 (any row stride)        */
  int qlen;              /* 1..4 query tokens per request                     */
  int topk;              /* 1..2048 (DeepSeek-V3.2: 2048)                     */
  int page_size;         /* 1..1024 tokens per page                           */
  int max_context;       /* host-known bound on every seq_len,
                            1..min(max_pages * page_size, 2^24)               */
  int pdl;               /* 0 or 1: programmatic dependent launch             */
} st_dsa_index_decode_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_dsa_index_decode_args_init(st_dsa_index_decode_args *args);

/* Bytes of workspace st_dsa_index_decode needs for these arguments
 * (pointers in `args` are not read): R x qlen x max_context fp32 logits,
 * rounded up. */
ST_API st_status st_dsa_index_decode_workspace_size(st_handle *handle, const st_dsa_index_decode_args *args,
                                                    size_t *bytes);

/* Loads the module that st_dsa_index_decode would launch for these
 * arguments, so a later call can be captured in a CUDA graph without loading
 * anything. */
ST_API st_status st_dsa_index_decode_prepare(st_handle *handle, const st_dsa_index_decode_args *args);

/* Launches dsa_index_decode on `stream` (a CUstream; NULL = legacy default).
 * Asynchronous; no host synchronization, no allocation. `workspace` must
 * hold st_dsa_index_decode_workspace_size bytes; every launch writes the
 * scratch it reads, so it needs no clearing between launches. */
ST_API st_status st_dsa_index_decode(st_handle *handle, const st_dsa_index_decode_args *args, void *workspace,
                                     size_t workspace_bytes, void *stream);

/* ---- dsa_index_logits: DeepSeek-V3.2 lightning indexer logits for prefill
 *
 * For s_q query tokens and s_kv index-K rows (the tokens of a varlen batch,
 * one row each), writes
 *   logits[i][j] = sum over heads h of weights[i][h] * relu(dot(q[i][h], k[j]) * k_scale[j])
 * for ks[i] <= j < ke[i], and -inf for every other j < s_kv (vLLM's
 * fp8_mqa_logits contract). ks and ke are read clamped to 0..s_kv; ke <= ks
 * means the row sees no token (all -inf). A varlen batch or a causal
 * prefix is expressed this way: request r's queries see its own tokens up
 * to their position. relu(x) = x < 0 ? 0 : x; a NaN stays NaN (an fp8 NaN
 * in q or k, or a product 0 x inf, makes the logit NaN). The scale
 * multiplies the dot product before relu, whatever its sign (a token with
 * k_scale <= 0 gives relu(dot * k_scale), as st_dsa_index_decode). The GPU
 * multiplies fp8 values exactly and accumulates in fp32. The weights carry
 * what the caller folds in (q's quantization scale, the softmax scale) and
 * may have either sign. Elements of a row past s_kv (up to its stride) are
 * not written.
 *
 * No workspace. CUDA-graph safe: the grid depends on s_q, H and s_kv only,
 * never on ks or ke.
 */
typedef struct st_dsa_index_logits_args {
  size_t struct_size; /* set by st_dsa_index_logits_args_init */
  st_tensor q;        /* [s_q, H, 128] fp8 e4m3; s_q 1..2^24, H 1..64; rows
                         16-byte aligned: data and both outer strides
                         multiples of 16 bytes                              */
  st_tensor k;        /* [s_kv, 128] fp8 e4m3, s_kv 1..2^24; data and
                         stride[0] multiples of 16 bytes                     */
  st_tensor k_scale;  /* [s_kv] fp32: row j dequantizes to k[j] x k_scale[j] */
  st_tensor weights;  /* [s_q, H] fp32 (any row stride)                      */
  st_tensor ks;       /* [s_q] int32: first token each query sees (device)   */
  st_tensor ke;       /* [s_q] int32: one past its last (device)             */
  st_tensor logits;   /* out: [s_q, s_kv] fp32; data 16-byte aligned,
                         stride[0] a multiple of 4 elements                  */
} st_dsa_index_logits_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_dsa_index_logits_args_init(st_dsa_index_logits_args *args);

/* Bytes of workspace st_dsa_index_logits needs (0 for the current kernels;
 * pointers in `args` are not read). */
ST_API st_status st_dsa_index_logits_workspace_size(st_handle *handle, const st_dsa_index_logits_args *args,
                                                    size_t *bytes);

/* Loads the module that st_dsa_index_logits would launch for these
 * arguments, so a later call can be captured in a CUDA graph without loading
 * anything. */
ST_API st_status st_dsa_index_logits_prepare(st_handle *handle, const st_dsa_index_logits_args *args);

/* Launches dsa_index_logits on `stream` (a CUstream; NULL = legacy default).
 * Asynchronous; no host synchronization, no allocation. */
ST_API st_status st_dsa_index_logits(st_handle *handle, const st_dsa_index_logits_args *args, void *workspace,
                                     size_t workspace_bytes, void *stream);

/* ---- dsa_index_topk: DeepSeek-V3.2 indexer top-k for prefill -----------
 *
 * For s_q query rows of fp32 logits over s_kv positions (as
 * st_dsa_index_logits writes them), writes to row i of topk_idx the
 * positions j of the min(topk, n_i) largest logits[i][j] with
 * ks[i] <= j < ke[i] (ks and ke read clamped to 0..s_kv; ke <= ks means
 * none; n_i = the range's length), in no particular order, each once, then
 * -1 in the row's remaining slots. Positions outside the range are never
 * chosen, whatever their logits hold. A NaN logit ranks as -inf and -0 as
 * +0; a row still fills min(topk, n_i) slots, so -inf and NaN positions of
 * its range are chosen when fewer than topk rank above them. Equal logits
 * go by the lower position: the result is exactly the reference's set,
 * except that positions whose logit equals the k-th largest may be
 * exchanged among themselves. A row with n_i <= topk is written as
 * ks..ke-1 in increasing order, then -1s, without reading its logits.
 * Slots past topk (up to the row stride) are not written.
 *
 * No workspace. CUDA-graph safe: the grid depends on s_q only, never on ks
 * or ke.
 */
typedef struct st_dsa_index_topk_args {
  size_t struct_size; /* set by st_dsa_index_topk_args_init */
  st_tensor logits;   /* [s_q, s_kv] fp32, s_q and s_kv 1..2^24; data
                         16-byte aligned, stride[0] a multiple of 4
                         elements (st_dsa_index_logits' output)            */
  st_tensor ks;       /* [s_q] int32: first candidate position (device)     */
  st_tensor ke;       /* [s_q] int32: one past the last (device)            */
  st_tensor topk_idx; /* out: [s_q, topk] int32 (any row stride >= topk)     */
  int topk;           /* 1..2048 (DeepSeek-V3.2: 2048)                      */
} st_dsa_index_topk_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_dsa_index_topk_args_init(st_dsa_index_topk_args *args);

/* Bytes of workspace st_dsa_index_topk needs (0 for the current kernels;
 * pointers in `args` are not read). */
ST_API st_status st_dsa_index_topk_workspace_size(st_handle *handle, const st_dsa_index_topk_args *args,
                                                  size_t *bytes);

/* Loads the module that st_dsa_index_topk would launch for these
 * arguments, so a later call can be captured in a CUDA graph without loading
 * anything. */
ST_API st_status st_dsa_index_topk_prepare(st_handle *handle, const st_dsa_index_topk_args *args);

/* Launches dsa_index_topk on `stream` (a CUstream; NULL = legacy default).
 * Asynchronous; no host synchronization, no allocation. The logits must be
 * complete when the stream reaches the launch (st_dsa_index_logits earlier
 * on the same stream). */
ST_API st_status st_dsa_index_topk(st_handle *handle, const st_dsa_index_topk_args *args, void *workspace,
                                   size_t workspace_bytes, void *stream);

/* ---- sparse_attn_decode: block-sparse GQA attention for a decode batch --
 *
 * For R requests with `qlen` query tokens each (query token t of request r
 * sits at position p = seq_lens[r] - qlen + t), q head h attends, with
 * softmax(sm_scale * q.k), to the keys of kv head g = h / (Hq / Hkv) in the
 * blocks topk_idx[g][r*qlen + t][:] lists, those positions <= p only; o is
 * that softmax times v. Entries < 0 and blocks past the query's own are
 * skipped; a block listed twice counts twice. A row with no key left (a
 * padding request, seq_len 0, or nothing selected) gets o = 0 and lse = -inf.
 *
 * Paged KV caches are read through two strided views of shape
 * [pages, Hkv, 128, D], which covers both layouts in use:
 *   (pages, 2, 128, Hkv, D): k strides [2*128*Hkv*D, D, Hkv*D, 1],
 *                            v = k + 128*Hkv*D, same strides;
 *   (pages, Hkv, 128, 2*D):  k strides [Hkv*128*2*D, 128*2*D, 2*D, 1],
 *                            v = k + D, same strides.
 * An fp8 cache is dequantized as value * scale by `scale_mode`.
 */
typedef enum st_kv_scale_mode {
  ST_KV_SCALE_NONE = 0,   /* the cache values as they are                     */
  ST_KV_SCALE_SCALAR = 1, /* one scale for K (k_scale), one for V (v_scale)   */
  ST_KV_SCALE_TENSOR = 2  /* k_scales / v_scales: one per (page, kv head, slot) */
} st_kv_scale_mode;

typedef struct st_sparse_attn_decode_args {
  size_t struct_size;    /* set by st_sparse_attn_decode_args_init */
  st_tensor q;           /* [R*qlen, Hq, D] bf16, R*qlen 1..65535, D 64, 128 or
                            256 (else ST_ERR_UNSUPPORTED); Hq a multiple of Hkv,
                            Hq / Hkv <= 32 (else ST_ERR_UNSUPPORTED); rows
                            16-byte aligned (as st_index_decode_args' q)      */
  st_tensor k_cache;     /* [pages, Hkv, 128, D] bf16 or fp8 e4m3, Hkv 1..65535
                            (any strides, innermost 1, rows 16-byte aligned); */
  st_tensor v_cache;     /*   v_cache: same shape and dtype, its own strides    */
  st_kv_scale_mode scale_mode; /* fp8 caches only; NONE for bf16               */
  float k_scale, v_scale;      /* SCALAR: positive, finite                     */
  st_tensor k_scales;    /* TENSOR: [pages, Hkv, 128] fp32 (any non-negative   */
  st_tensor v_scales;    /*   strides, innermost too); other modes: ignored     */
  st_tensor topk_idx;    /* [Hkv, R*qlen, topk] int32 block ids, -1 = none;
                            topk 1..64                                         */
  st_tensor block_table; /* [R, max_blocks] int32: page of each 128-token block */
  st_tensor seq_lens;    /* [R] int32, tokens per request, 0 = padding row      */
  st_tensor o;           /* out: [R*qlen, Hq, D] bf16                           */
  st_tensor lse;         /* out, optional: [R*qlen, Hq] fp32, natural log of the
                            softmax denominator; data NULL = not wanted         */
  float sm_scale;        /* positive, finite                                    */
  int qlen;              /* 1..4 query tokens per request                       */
  int max_context;       /* host-known bound on every seq_len, 1..max_blocks*128 */
  int pdl;               /* 0 or 1: programmatic dependent launch (see
                            st_index_decode_args)                              */
} st_sparse_attn_decode_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_sparse_attn_decode_args_init(st_sparse_attn_decode_args *args);

/* Bytes of workspace st_sparse_attn_decode needs for these arguments
 * (pointers in `args` are not read, except whether lse.data is NULL). */
ST_API st_status st_sparse_attn_decode_workspace_size(st_handle *handle, const st_sparse_attn_decode_args *args,
                                                      size_t *bytes);

/* Loads the module that st_sparse_attn_decode would launch for these
 * arguments, so a later call can be captured in a CUDA graph. */
ST_API st_status st_sparse_attn_decode_prepare(st_handle *handle, const st_sparse_attn_decode_args *args);

/* Launches sparse_attn_decode on `stream` (a CUstream; NULL = legacy
 * default). Asynchronous; no host synchronization, no allocation.
 * `workspace` must hold st_sparse_attn_decode_workspace_size bytes and have
 * been cleared once (st_workspace_clear: one workspace serves every op). */
ST_API st_status st_sparse_attn_decode(st_handle *handle, const st_sparse_attn_decode_args *args, void *workspace,
                                       size_t workspace_bytes, void *stream);

/* ---- mla_sparse_decode: DeepSeek-V3.2 token-sparse MLA attention, decode --
 *
 * MLA with one latent KV head: a cache row holds K, 576 values (512 latent
 * "NoPE" dims, then 64 RoPE dims), and V is its first 512 values. For B
 * requests of `qlen` query tokens (row b*qlen + t), each of the Hq q heads
 * of a row attends to the tokens its row of `indices` lists: physical token
 * slots page * page_size + offset into the cache (no block table). An entry
 * < 0 or >= pages * page_size is none and is skipped; a slot listed twice
 * counts twice; with topk_length only the first clamp(topk_length[b], 0,
 * topk) entries of request b's rows count. Indices and lengths are device
 * data: they are not checked on the host and never make the op read outside
 * the cache.
 *
 * s_j = sm_scale * dot(q, k_j) over the 576 dims; o = softmax(s) . v (the
 * first 512 dims of each row); lse = ln(sum_j exp(s_j)). With attn_sink, o
 * is scaled by exp(lse) / (exp(lse) + exp(sink[h])) and lse is left as is
 * (+inf: o = 0; -inf: no change). A row with no valid entry gets o = 0 and
 * lse = -inf.
 *
 * The cache, pages of page_size tokens (kv_cache.shape[1]), one of:
 *   bf16: [pages, page_size, 576] bf16 (K = all 576, V = the first 512);
 *   fp8:  [pages, page_size, 656] with dtype ST_DTYPE_FP8_E4M3, the bytes
 *         of DeepSeek-V3.2's token row: 512 e4m3 latent values, 4 fp32
 *         scales (scale i multiplies values 128*i .. 128*i+127), 64 bf16
 *         RoPE values (not quantized). K = [latent * scale, rope], V =
 *         latent * scale.
 * The grid depends on B, qlen, Hq, topk and the device only; splitting the
 * entries over CTAs keeps partial states in the workspace, which needs no
 * clearing.
 */
typedef struct st_mla_sparse_decode_args {
  size_t struct_size;    /* set by st_mla_sparse_decode_args_init */
  st_tensor q;           /* [B*qlen, Hq, 576] bf16, B*qlen 1..65535, Hq 16, 32,
                            48, ... 128 (a multiple of 16); rows 16-byte
                            aligned (as st_index_decode_args' q)             */
  st_tensor kv_cache;    /* [pages, page_size, 576] bf16 or [pages, page_size,
                            656] fp8 e4m3 (the packed rows above); page_size
                            a multiple of 16 in 16..1024, pages * page_size
                            <= 2^31 - 1; any page and token strides with
                            rows 16-byte aligned                             */
  st_tensor indices;     /* [B*qlen, topk] int32 token slots, topk 1..2048   */
  st_tensor topk_length; /* optional [B] int32; data NULL = every entry      */
  st_tensor attn_sink;   /* optional [Hq] fp32; data NULL = no sink          */
  st_tensor o;           /* out: [B*qlen, Hq, 512] bf16                      */
  st_tensor lse;         /* out, optional: [B*qlen, Hq] fp32, natural log;
                            data NULL = not wanted                           */
  float sm_scale;        /* positive, finite                                 */
  int qlen;              /* 1..4 query tokens per request                    */
  int pdl;               /* 0 or 1: programmatic dependent launch (see
                            st_index_decode_args)                            */
} st_mla_sparse_decode_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_mla_sparse_decode_args_init(st_mla_sparse_decode_args *args);

/* Bytes of workspace st_mla_sparse_decode needs for these arguments
 * (pointers in `args` are not read, except whether the optional ones are
 * NULL): the split CTAs' partial states, 0 when a variant does not split. */
ST_API st_status st_mla_sparse_decode_workspace_size(st_handle *handle, const st_mla_sparse_decode_args *args,
                                                     size_t *bytes);

/* Loads the module that st_mla_sparse_decode would launch for these
 * arguments, so a later call can be captured in a CUDA graph. */
ST_API st_status st_mla_sparse_decode_prepare(st_handle *handle, const st_mla_sparse_decode_args *args);

/* Launches mla_sparse_decode on `stream` (a CUstream; NULL = legacy
 * default). Asynchronous; no host synchronization, no allocation.
 * `workspace` must hold st_mla_sparse_decode_workspace_size bytes; this op
 * reads none of its contents but writes only where st_workspace_clear says
 * scratch lies, so the workspace may serve other ops too. */
ST_API st_status st_mla_sparse_decode(st_handle *handle, const st_mla_sparse_decode_args *args, void *workspace,
                                      size_t workspace_bytes, void *stream);

/* ---- mla_sparse_prefill: DeepSeek-V3.2 token-sparse MLA attention, prefill
 *
 * mla_sparse_decode's attention for s_q query tokens over kv rows, as
 * FlashMLA's sparse prefill (flash_mla_sparse_fwd) is called: each query
 * token i and each of its h_q heads attends to the rows of kv its row of
 * `indices` lists (no pages, no causal mask: the indices say what a token
 * sees). K is a row's 576 values (512 latent "NoPE" dims, then 64 RoPE
 * dims), V its first 512. An entry < 0 or >= s_kv is none and is skipped;
 * a row listed twice counts twice; with topk_length only the first
 * clamp(topk_length[i], 0, topk) entries of token i count. Indices and
 * lengths are device data: they are not checked on the host and never make
 * the op read outside kv.
 *
 * s_j = sm_scale * dot(q, k_j) over the 576 dims; o = softmax(s) . v; lse
 * = ln(sum_j exp(s_j)); max_logits = max_j s_j. With attn_sink, o is
 * scaled by exp(lse) / (exp(lse) + exp(sink[h])) and lse and max_logits are
 * left as they are (+inf: o = 0; -inf: no change). A token with no valid
 * entry gets o = 0, lse = -inf and max_logits = -inf.
 *
 * The grid depends on s_q, h_q, topk and the device only; splitting the
 * entries over CTAs keeps partial states in the workspace, which needs no
 * clearing.
 */
typedef struct st_mla_sparse_prefill_args {
  size_t struct_size;    /* set by st_mla_sparse_prefill_args_init            */
  st_tensor q;           /* [s_q, h_q, 576] bf16, s_q 1..2^20, h_q 16, 32, 48,
                            ... 128 (a multiple of 16); rows 16-byte aligned */
  st_tensor kv;          /* [s_kv, 1, 576] bf16, s_kv 1..2^31 - 1; rows
                            16-byte aligned                                  */
  st_tensor indices;     /* [s_q, 1, topk] int32 rows of kv, topk 1..2048    */
  st_tensor topk_length; /* optional [s_q] int32; data NULL = every entry    */
  st_tensor attn_sink;   /* optional [h_q] fp32; data NULL = no sink         */
  st_tensor o;           /* out: [s_q, h_q, 512] bf16                        */
  st_tensor lse;         /* out, optional: [s_q, h_q] fp32, natural log;
                            data NULL = not wanted                           */
  st_tensor max_logits;  /* out, optional: [s_q, h_q] fp32; data NULL = not
                            wanted                                           */
  float sm_scale;        /* positive, finite                                 */
  int pdl;               /* 0 or 1: programmatic dependent launch (see
                            st_index_decode_args)                            */
} st_mla_sparse_prefill_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_mla_sparse_prefill_args_init(st_mla_sparse_prefill_args *args);

/* Bytes of workspace st_mla_sparse_prefill needs for these arguments
 * (pointers in `args` are not read, except whether the optional ones are
 * NULL): the split CTAs' partial states, 0 when a variant does not split. */
ST_API st_status st_mla_sparse_prefill_workspace_size(st_handle *handle, const st_mla_sparse_prefill_args *args,
                                                      size_t *bytes);

/* Loads the module that st_mla_sparse_prefill would launch for these
 * arguments, so a later call can be captured in a CUDA graph. */
ST_API st_status st_mla_sparse_prefill_prepare(st_handle *handle, const st_mla_sparse_prefill_args *args);

/* Launches mla_sparse_prefill on `stream` (a CUstream; NULL = legacy
 * default). Asynchronous; no host synchronization, no allocation.
 * `workspace` must hold st_mla_sparse_prefill_workspace_size bytes; this op
 * reads none of its contents but writes only where st_workspace_clear says
 * scratch lies, so the workspace may serve other ops too. */
ST_API st_status st_mla_sparse_prefill(st_handle *handle, const st_mla_sparse_prefill_args *args, void *workspace,
                                       size_t workspace_bytes, void *stream);

/* ---- sparse_attn: block-sparse GQA attention for a varlen prefill batch --
 *
 * Request r has q_len[r] = cu_seqlens_q[r+1] - cu_seqlens_q[r] query tokens,
 * its last q_len[r] positions: query token i (cu_seqlens_q[r] <= i <
 * cu_seqlens_q[r+1]) sits at p = seq_lens[r] - q_len[r] + (i -
 * cu_seqlens_q[r]). Otherwise as sparse_attn_decode, per query token: q head
 * h attends to the keys at positions <= p of the blocks topk_idx[g][i][:]
 * lists (g = h / (Hq / Hkv); entries < 0 and blocks past the query's own
 * skipped, a block listed twice counts twice), over the same two K/V cache
 * views and scale modes. A token with no key gets o = 0 and lse = -inf.
 */
typedef struct st_sparse_attn_args {
  size_t struct_size;    /* set by st_sparse_attn_args_init */
  st_tensor q;            /* [total_q, Hq, D] bf16: D, Hq / Hkv and the rows'
                             alignment as in st_sparse_attn_decode_args         */
  st_tensor k_cache;      /* [pages, Hkv, 128, D] as st_sparse_attn_decode_args' */
  st_tensor v_cache;      /*   v_cache: same shape and dtype, its own strides    */
  st_kv_scale_mode scale_mode; /* fp8 caches only; NONE for bf16                */
  float k_scale, v_scale;      /* SCALAR: positive, finite                      */
  st_tensor k_scales;     /* TENSOR: [pages, Hkv, 128] fp32 (any non-negative    */
  st_tensor v_scales;     /*   strides, innermost too); other modes: ignored     */
  st_tensor topk_idx;     /* [Hkv, total_q, topk] int32 block ids, -1 = none;
                             topk 1..64                                         */
  st_tensor block_table;  /* [R, max_blocks] int32: page of each 128-token block */
  st_tensor cu_seqlens_q; /* [R+1] int32: 0, then running sums of q_len; the last
                             equals total_q (q.shape[0])                        */
  st_tensor seq_lens;     /* [R] int32, tokens per request (prefix + q_len)      */
  st_tensor o;            /* out: [total_q, Hq, D] bf16                          */
  st_tensor lse;          /* out, optional: [total_q, Hq] fp32; data NULL = not wanted */
  float sm_scale;         /* positive, finite                                    */
  int max_context;        /* host-known bound on every seq_len, 1..max_blocks*128;
                             R x ceil(max_context / 128) blocks at most 2^31 - 1
                             (else ST_ERR_UNSUPPORTED)                           */
} st_sparse_attn_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_sparse_attn_args_init(st_sparse_attn_args *args);

/* Bytes of workspace st_sparse_attn needs for these arguments (pointers in
 * `args` are not read, except whether lse.data is NULL): 0 for the
 * token-tile kernels; the block-major kernels keep one chunk of query
 * tokens' selection lists and partial results there, at most about 256 MiB
 * (the batch runs in as many chunks as that takes) unless the winner was
 * tuned with a larger chunk (launch parameter `chunk`: 3072 tokens of 2 kv
 * heads x 16 q heads, topk 16, take ~400 MiB), and twice that for variants
 * that overlap one chunk's merge with the next chunk. The
 * workspace must be cleared once (st_workspace_clear: one workspace
 * serves every op). */
ST_API st_status st_sparse_attn_workspace_size(st_handle *handle, const st_sparse_attn_args *args, size_t *bytes);

/* Loads the module that st_sparse_attn would launch for these arguments,
 * and for variants that overlap chunks creates the handle's side stream.
 * Call it before capturing st_sparse_attn in a CUDA graph. */
ST_API st_status st_sparse_attn_prepare(st_handle *handle, const st_sparse_attn_args *args);

/* Launches sparse_attn on `stream` (a CUstream; NULL = legacy default).
 * Asynchronous; no host synchronization, no allocation; the grids depend on
 * total_q, Hkv, topk and the block table's shape only, never on the
 * device-side lengths. Variants that overlap chunks also run work on the
 * handle's side stream (greatest priority), forked from and joined back
 * into `stream` by events, so `stream` alone orders what follows; calls
 * with such variants enqueue one at a time per handle. Captured in a CUDA
 * graph, the side stream's priority holds only if the graph is
 * instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY, as
 * `sparsetune tune` and `bench` do (without it every node runs at the
 * launch stream's priority). */
ST_API st_status st_sparse_attn(st_handle *handle, const st_sparse_attn_args *args, void *workspace,
                                size_t workspace_bytes, void *stream);

/* ---- index_score: the indexer's block scores for a varlen prefill batch --
 *
 * For request r (its q_len = cu_seqlens_q[r+1] - cu_seqlens_q[r] query
 * tokens are its last positions: query token i of r sits at p = seq_lens[r]
 * - q_len + (i - cu_seqlens_q[r])), index head h and each visible block
 * j < nb = p / 128 + 1: score[h][i][j] = scale * the max over the positions
 * pos <= p of block j of dot(q[i][h], k[pos]), k rows found through
 * block_table[r][j]. Entries j >= nb are left as they were. H must be a
 * power of two (every head of a token is scored in one CTA); D 64 or 128
 * in bf16, 128 in fp8 e4m3 (q and k_cache share the dtype).
 */
typedef struct st_index_score_args {
  size_t struct_size;    /* set by st_index_score_args_init */
  st_tensor q;            /* [total_q, H, D] bf16 or fp8 e4m3, H and R 1..65535,
                             rows 16-byte aligned (as st_index_decode_args' q)     */
  st_tensor k_cache;      /* [pages, 128, D], the dtype of q, rows as q's           */
  st_tensor block_table;  /* [R, max_blocks] int32: page of each 128-token block    */
  st_tensor cu_seqlens_q; /* [R+1] int32: 0, then running sums of q_len             */
  st_tensor seq_lens;     /* [R] int32, tokens per request (prefix + q_len)         */
  st_tensor score;        /* out: [H, total_q, >= ceil(max_context/128)] fp32       */
  float scale;            /* > 0 and finite: multiplies every score                 */
  int max_context;        /* host-known bound on every seq_len, 1..128 x the lesser
                             of max_blocks and score.shape[2]                       */
} st_index_score_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_index_score_args_init(st_index_score_args *args);

/* Bytes of workspace st_index_score needs (0 for the current kernels). */
ST_API st_status st_index_score_workspace_size(st_handle *handle, const st_index_score_args *args, size_t *bytes);

/* Loads the module that st_index_score would launch for these arguments. */
ST_API st_status st_index_score_prepare(st_handle *handle, const st_index_score_args *args);

/* Launches index_score on `stream`; asynchronous, no host synchronization,
 * no allocation; the grid depends on total_q, R, H and max_context only. */
ST_API st_status st_index_score(st_handle *handle, const st_index_score_args *args, void *workspace,
                                size_t workspace_bytes, void *stream);

/* ---- index_prefill: index_score and index_topk fused -------------------
 *
 * The top-k of index_topk over the scores of index_score (same inputs,
 * same rules: init_blocks first and local_blocks last visible blocks
 * forced, then the highest-scoring others, NaN as -inf, ties either way,
 * unused slots -1), without the score matrix: each scoring CTA keeps its
 * rows' best blocks, a second kernel merges them. Use it when only the
 * selection is wanted. Scale is not an argument: a positive scale changes
 * no order. topk 1..64; a variant holds up to 512 candidates per row
 * (chunks of the context x topk), so very long contexts with topk 64 may
 * find no variant (ST_ERR_NO_VARIANT): then call index_score and
 * index_topk.
 */
typedef struct st_index_prefill_args {
  size_t struct_size;    /* set by st_index_prefill_args_init */
  st_tensor q;            /* [total_q, H, D] as st_index_score_args' q              */
  st_tensor k_cache;      /* [pages, 128, D], the dtype of q, rows as q's           */
  st_tensor block_table;  /* [R, max_blocks] int32                                  */
  st_tensor cu_seqlens_q; /* [R+1] int32                                            */
  st_tensor seq_lens;     /* [R] int32                                              */
  st_tensor topk_idx;     /* out: [H, total_q, topk] int32                          */
  int topk;               /* 1..64                                                  */
  int init_blocks;        /* forced first blocks, 0..topk                           */
  int local_blocks;       /* forced last blocks (the query's own included),
                             0..topk - init_blocks                                  */
  int max_context;        /* host-known bound on every seq_len, 1..max_blocks*128   */
} st_index_prefill_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_index_prefill_args_init(st_index_prefill_args *args);

/* Bytes of workspace st_index_prefill needs (each scoring CTA's row lists;
 * pointers in `args` are not read). */
ST_API st_status st_index_prefill_workspace_size(st_handle *handle, const st_index_prefill_args *args, size_t *bytes);

/* Loads the module that st_index_prefill would launch for these arguments. */
ST_API st_status st_index_prefill_prepare(st_handle *handle, const st_index_prefill_args *args);

/* Launches index_prefill (two kernels) on `stream`; asynchronous, no host
 * synchronization, no allocation; the workspace needs no clearing. */
ST_API st_status st_index_prefill(st_handle *handle, const st_index_prefill_args *args, void *workspace,
                                  size_t workspace_bytes, void *stream);

/* ---- index_topk: the indexer's block selection for a varlen prefill batch
 *
 * From block scores score[h][i][j] (index_score's output, fp32), picks per
 * index head h and query token i (of request r, at position p as in
 * sparse_attn) the ids of min(topk, nb) of its nb = p / 128 + 1 visible
 * blocks: the init_blocks first and local_blocks last visible ones, then the
 * highest-scoring others (NaN counts as -inf; entries j >= nb are not read).
 * Unused slots are -1; ids within a row are in no particular order.
 */
typedef struct st_index_topk_args {
  size_t struct_size;    /* set by st_index_topk_args_init */
  st_tensor score;        /* [H, total_q, max_blocks] fp32 (any strides, innermost 1),
                             H 1..65535                                             */
  st_tensor cu_seqlens_q; /* [R+1] int32: 0, then running sums of q_len            */
  st_tensor seq_lens;     /* [R] int32, tokens per request (prefix + q_len)        */
  st_tensor topk_idx;     /* out: [H, total_q, topk] int32                         */
  int topk;               /* 1..64                                                 */
  int init_blocks;        /* forced first blocks, 0..topk                          */
  int local_blocks;       /* forced last blocks (the query's own included),
                             0..topk - init_blocks                                 */
  int max_context;        /* host-known bound on every seq_len, 1..max_blocks*128   */
} st_index_topk_args;

/* Sets args->struct_size and every other field to zero. */
ST_API void st_index_topk_args_init(st_index_topk_args *args);

/* Bytes of workspace st_index_topk needs (0 for the current kernels). */
ST_API st_status st_index_topk_workspace_size(st_handle *handle, const st_index_topk_args *args, size_t *bytes);

/* Loads the module that st_index_topk would launch for these arguments. */
ST_API st_status st_index_topk_prepare(st_handle *handle, const st_index_topk_args *args);

/* Launches index_topk on `stream`; asynchronous, no host synchronization,
 * no allocation; the grid depends on total_q and H only. */
ST_API st_status st_index_topk(st_handle *handle, const st_index_topk_args *args, void *workspace,
                               size_t workspace_bytes, void *stream);

/* The variant id and name the last successful st_<op> call of this
 * thread on `handle` launched (for logs and tests); "" if none. */
ST_API const char *st_last_variant(const st_handle *handle);

#ifdef __cplusplus
}
#endif

#endif /* SPARSETUNE_H */
