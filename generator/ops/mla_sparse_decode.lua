-- ops/mla_sparse_decode.lua - the variant space of mla_sparse_decode
-- (DeepSeek-V3.2 token-sparse MLA attention for a decode batch; kernel:
-- templates/mla_sparse_decode.cu, launcher: runtime/ops/mla_sparse_decode.c).
--
-- A variant is a kernel config (compile-time, baked into the source) plus a
-- launch config (`splits`: CTAs per (query row, head tile), each taking a
-- range of the row's entries; 0 = the launcher picks). Parameter names here
-- are the ones the C launcher reads (st_mla_sparse_decode_config_from_params)
-- and the template expects. Every function is pure.

local space = require("space")

local M = {}

M.name = "mla_sparse_decode"
M.template = "mla_sparse_decode.cu"

M.kernel_domains = {
  dtype = { "bf16", "fp8" }, -- cache: bf16 rows of 576, or the 656-byte fp8 rows
  heads_per_cta = { 16, 32, 64 }, -- q heads sharing each cache row a CTA reads
  tile_tokens = { 16, 32, 64 }, -- cache rows staged in shared memory at once
  threads = { 128, 256, 512 },
  -- 0: scores and P.V on CUDA cores in fp32 (the correctness baseline);
  -- 1: on tensor cores (mma.sync m16n8k16 bf16, fp32 accumulation), 4
  -- warps an m tile of 16 heads (threads = 8 x heads_per_cta), cache rows
  -- staged as bf16; 2: wgmma, two warpgroups on 64 heads (each scores the
  -- whole 64-token tile and adds P.V for half of o's dims), q and the tile
  -- as wgmma operands in shared memory, the copies always pipelined.
  mma = { 0, 1, 2 },
  -- mma 1 only: 1 copies the next tile's raw rows by cp.async into a
  -- staging buffer while the current tile is scored and weighed, then
  -- widens them from shared memory; 0 reads and widens each tile before
  -- its math.
  pipe = { 0, 1 },
}

-- Launch choices timed: auto and powers of two (bounded per shape below).
M.splits_choices = { 0, 1, 2, 4, 8, 16, 32, 64, 128 }
local SPLITS_MAX = 128

local DIM_V = 512
-- The template's shared rows (templates/mla_sparse_decode.cu): q rows of
-- 584 bf16, cache rows of 577 floats.
local Q_LD, KV_LD = 584, 577
-- Threads covering o's 512 dims of one head (4 each), and the fp32
-- accumulators of o a thread may hold (mma 0).
local DIM_THREADS, MAX_ACC = 128, 64
-- mma 1: threads per head (4 warps an m tile of 16), tiles of whole 8-token
-- n tiles a warp (a quarter of the tile each), the weights' row padding.
local MMA_THREADS_PER_HEAD, MMA_TILE_ALIGN, P_PAD = 8, 32, 8
-- Bytes of a raw cache row: q.k's dims in bf16, or the packed fp8 row.
local DIM_QK, FP8_ROW = 576, 656
-- Bytes of dynamic shared memory one CTA may opt in to (the launcher's).
local SHARED_BUDGET = 220 * 1024
-- Pruning model: an H200 (132 SMs); more than 8 waves of CTAs cannot win.
local SM_COUNT, MAX_WAVES = 132, 8
local MAX_TOPK = 2048
local MAX_HEADS, HEAD_ALIGN = 128, 16
-- B, Hq, qlen, topk: the call. ctx: tokens a request holds in the pool the
-- harness builds (the pool is several times L2 whatever it is). tlen: none
-- (no topk_length) or random (per request in 0..topk). sink, lse: 0 or 1,
-- the optional attn_sink input and lse output. sel: random (distinct slots
-- over the request's pages) or edge (also -1, out-of-range, repeated and
-- page-border slots).
local SHAPE_FIELDS = { "B", "Hq", "ctx", "dtype", "lse", "qlen", "sel", "sink", "tlen", "topk" }
-- The host-known subset the runtime dispatches on
-- (runtime/ops/mla_sparse_decode.c st_mla_sparse_decode_dispatch_key
-- builds the same text); sink, lse and topk_length are run-time arguments of
-- every kernel.
local DISPATCH_FIELDS = { "B", "Hq", "dtype", "qlen", "topk" }
local DTYPES = { bf16 = true, fp8 = true }
local TLENS = { "none", "random" }
local SELS = { "random", "edge" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

-- The kernel's dynamic shared memory (runtime/ops/mla_sparse_decode.c
-- st_mla_sparse_decode_smem_bytes computes the same): the q tile (bf16),
-- the cache tile (fp32), the scores, each head's m, l and rescale factor,
-- the tile's slots.
local function shared_bytes(k)
  local H, T = k.heads_per_cta, k.tile_tokens
  if (k.mma or 0) == 2 then -- q and the tile unpadded, the raw rows, two lists of slots
    return H * DIM_QK * 2 + T * DIM_QK * 2 + T * (k.dtype == "fp8" and FP8_ROW or DIM_QK * 2) + 2 * T * 4
  end
  local mma = (k.mma or 0) == 1
  local kv = mma and T * Q_LD * 2 or T * KV_LD * 4 -- bf16 rows (padded as q's) or fp32
  local p = mma and H * (T + P_PAD) * 2 or 0 -- the weights as bf16
  -- pipe: the raw rows of the tile in flight, a second list of slots
  local pipe = (k.pipe or 0) == 1
  local raw = pipe and T * (k.dtype == "fp8" and FP8_ROW or DIM_QK * 2) or 0
  return H * Q_LD * 2 + kv + raw + H * T * 4 + p + H * 3 * 4 + (pipe and 2 or 1) * T * 4
end

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  if (k.mma or 0) == 2 then
    if k.heads_per_cta ~= 64 or k.tile_tokens ~= 64 or k.threads ~= 256 or (k.pipe or 0) ~= 1 then
      return false, "mma=2 needs heads_per_cta=64, tile_tokens=64, threads=256 and pipe=1"
    end
    return true
  end
  if (k.pipe or 0) == 1 and (k.mma or 0) ~= 1 then
    return false, "pipe=1 needs mma=1"
  end
  if (k.mma or 0) == 1 then
    if k.threads ~= MMA_THREADS_PER_HEAD * k.heads_per_cta or k.tile_tokens % MMA_TILE_ALIGN ~= 0 then
      return false, string.format("mma=1 needs threads = %d x heads_per_cta and tile_tokens a multiple of %d " ..
        "(heads %d, threads %d, tile %d)", MMA_THREADS_PER_HEAD, MMA_TILE_ALIGN, k.heads_per_cta, k.threads,
        k.tile_tokens)
    end
    local smem = shared_bytes(k)
    if smem > SHARED_BUDGET then
      return false, string.format("shared memory of heads_per_cta=%d, tile_tokens=%d is %d bytes, above %d",
        k.heads_per_cta, k.tile_tokens, smem, SHARED_BUDGET)
    end
    return true
  end
  local groups = k.threads // DIM_THREADS
  if k.heads_per_cta % groups ~= 0 then
    return false, string.format("threads=%d make %d head groups, which do not divide heads_per_cta=%d", k.threads,
      groups, k.heads_per_cta)
  end
  local acc = k.heads_per_cta * DIM_V // k.threads
  if acc > MAX_ACC then
    return false, string.format("heads_per_cta=%d over threads=%d leave %d accumulators a thread, above %d",
      k.heads_per_cta, k.threads, acc, MAX_ACC)
  end
  local smem = shared_bytes(k)
  if smem > SHARED_BUDGET then
    return false, string.format("shared memory of heads_per_cta=%d, tile_tokens=%d is %d bytes, above %d",
      k.heads_per_cta, k.tile_tokens, smem, SHARED_BUDGET)
  end
  return true
end

-- The tuned kernel configs: the domains within the constraints.
function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The fallbacks, per dtype in the order dispatch tries them: with fp8
-- caches first the wgmma family (64 heads a CTA, two warpgroups: 1.3-1.5x
-- the mma.sync one at FlashMLA's four fp8 anchors on an H200,
-- docs/kernels/mla_sparse_decode.md, "v3: wgmma"; bf16 not yet timed, and
-- mla_sparse_prefill takes the bf16 ones); then the tensor-core family
-- with 64 heads a CTA (a cache row read once for half of 128 heads), then
-- 32, then 16, which takes every Hq of the contract (a multiple of 16);
-- last the CUDA-core family, the baseline the tensor-core one is checked
-- beside. The launcher picks the split count: one wave over the
-- multiprocessors (32 splits of one request of 128 heads, as the wgmma
-- family's tune picked at B 1).
local DEFAULTS = {
  { heads_per_cta = 64, tile_tokens = 64, threads = 256, mma = 2, pipe = 1, dtype = "fp8" },
  { heads_per_cta = 64, tile_tokens = 64, threads = 512, mma = 1 },
  { heads_per_cta = 32, tile_tokens = 64, threads = 256, mma = 1 },
  { heads_per_cta = 16, tile_tokens = 64, threads = 128, mma = 1 },
  { heads_per_cta = 16, tile_tokens = 32, threads = 128, mma = 0 },
}
function M.defaults()
  local out = {}
  for _, dtype in ipairs(M.kernel_domains.dtype) do
    for _, d in ipairs(DEFAULTS) do
      if (d.dtype or dtype) == dtype then
        local k = { dtype = dtype, heads_per_cta = d.heads_per_cta, tile_tokens = d.tile_tokens, threads = d.threads,
          mma = d.mma, pipe = d.pipe or d.mma }
        -- the copies pipelined wherever the staging buffer fits (not bf16
        -- with 64 heads)
        if not M.constraint(k) then k.pipe = 0 end
        local ok, why = M.constraint(k)
        -- Every shape of the contract needs a fallback: a missing one is a
        -- defect of the space, not a configuration to skip.
        if not ok then
          error(string.format("%s: default %s h%d is outside the space: %s", M.name, dtype, d.heads_per_cta, why), 0)
        end
        out[#out + 1] = { kernel = k, launch = { splits = 0 } }
      end
    end
  end
  return out
end

-- ---- shapes ----------------------------------------------------------------

function M.check_shape(s)
  local fields_ok, fields_why = space.check_shape_fields(s, SHAPE_FIELDS, SHAPE_FIELD_SET, M.name)
  if not fields_ok then
    return false, fields_why
  end
  local why = space.int_fields_outside(s, { { "B", 1, 65535 }, { "Hq", HEAD_ALIGN, MAX_HEADS }, { "qlen", 1, 4 },
    { "topk", 1, MAX_TOPK }, { "ctx", 1, 1 << 24 }, { "lse", 0, 1 }, { "sink", 0, 1 } })
  if why then
    return false, why
  end
  if s.Hq % HEAD_ALIGN ~= 0 then
    return false, string.format("shape field Hq=%d is not a multiple of %d", s.Hq, HEAD_ALIGN)
  end
  if s.B * s.qlen > 65535 then
    return false, string.format("B*qlen = %d*%d query rows exceed 65535", s.B, s.qlen)
  end
  if not DTYPES[s.dtype] then
    return false, string.format("shape field dtype=%s is not bf16 or fp8", tostring(s.dtype))
  end
  if not space.contains(TLENS, s.tlen) then
    return false, string.format("shape field tlen=%s is not none or random", tostring(s.tlen))
  end
  if not space.contains(SELS, s.sel) then
    return false, string.format("shape field sel=%s is not random or edge", tostring(s.sel))
  end
  return space.check_peer(s)
end

-- ---- which variants run which shapes ------------------------------------

-- Compile-time fit: the kernel can compute this shape; defaults and tuned
-- variants fit alike.
function M.fits(k, s, _is_default)
  if k.dtype ~= s.dtype then
    return false, "dtype differs"
  end
  if s.Hq % k.heads_per_cta ~= 0 then
    return false, string.format("heads_per_cta %d does not divide Hq=%d", k.heads_per_cta, s.Hq)
  end
  return true
end

-- Launch choices worth timing for a shape (the variant list is per
-- (kernel, splits)).
function M.worth(k, l, s, _is_default)
  local splits = l.splits
  if splits == 0 then
    return true
  end
  if not space.contains(M.splits_choices, splits) then
    return false, string.format("splits=%d is not a timed choice", splits)
  end
  if splits > 1 and splits * k.tile_tokens > s.topk then
    return false, string.format("splits=%d leave less than a tile of %d of topk=%d each", splits, k.tile_tokens,
      s.topk)
  end
  local ctas = s.B * s.qlen * (s.Hq // k.heads_per_cta) * splits
  if ctas > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", ctas, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names
-- templates/defaults/mla_sparse_decode.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    is_fp8 = k.dtype == "fp8" and 1 or 0,
    heads_per_cta = k.heads_per_cta,
    tile_tokens = k.tile_tokens,
    threads = k.threads,
    mma = k.mma or 0,
    pipe = k.pipe or 0,
  }
end

-- "mla_sparse_decode.fp8.h64.t64.n512.mma/auto" (tensor cores; without
-- ".mma" CUDA cores; ".mma.pipe" with the copies pipelined; ".wg.pipe"
-- wgmma; "/s8" for 8 splits).
function M.variant_name(k, l)
  return M.variant_name_of(M.name, k, l)
end

-- The same for `op` (mla_sparse_prefill names its variants alike).
function M.variant_name_of(op, k, l)
  return string.format("%s.%s.h%d.t%d.n%d%s%s/%s", op, k.dtype, k.heads_per_cta, k.tile_tokens, k.threads,
    (k.mma or 0) == 1 and ".mma" or (k.mma or 0) == 2 and ".wg" or "", (k.pipe or 0) == 1 and ".pipe" or "",
    l.splits == 0 and "auto" or ("s" .. l.splits))
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
