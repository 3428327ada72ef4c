-- ops/sparse_attn_decode.lua - the variant space of sparse_attn_decode
-- (block-sparse GQA attention over a paged KV cache for a decode batch;
-- kernel: templates/sparse_attn_decode.cu, launcher:
-- runtime/ops/sparse_attn_decode.c).
--
-- A variant is a kernel config (compile-time, baked into the source) plus a
-- launch config (`splits`: CTAs per work item, a work item being one
-- (request, query token, kv head); 0 = the launcher picks). Parameter names
-- here are the ones the C launcher reads
-- (st_sparse_attn_decode_config_from_params) and the template expects.
-- Every function is pure.

local space = require("space")

local M = {}

M.name = "sparse_attn_decode"
M.template = "sparse_attn_decode.cu"

M.kernel_domains = {
  dtype = { "bf16", "fp8" }, -- KV cache dtype; q and o are always bf16
  head_dim = { 64, 128, 256 },
  group = { 1, 2, 4, 8, 16, 32 }, -- q heads per kv head (Hq / Hkv), exact
  warps_n = { 2, 4, 8 }, -- warps splitting a block's tokens, per m tile
  -- KV blocks in flight per CTA (shared memory buffers), as far as the
  -- shared memory allows. 3 and 4 were added for CTAs that stream many
  -- blocks; the tuner takes them at few shapes (docs/kernels/
  -- sparse_attn_decode.md, v2.4).
  stages = { 1, 2, 3, 4 },
  -- single: one launch; the last CTA of the item merges from the
  -- workspace, or with a cluster the item's CTAs merge in their
  -- thread-block cluster (where the splits divide it). split: a merge launch.
  algo = { "single", "split" },
  -- CTAs per thread-block cluster: 16 pays on latency-bound grids (B = 1),
  -- costs large ones 8-68% (docs/kernels/sparse_attn_decode.md, v2.1); 8
  -- (portable: any CTA size) merges 2-8 splits of wider CTAs (B = 8,
  -- v2.8); 4 merges 2 or 4 splits of pv_dims CTAs, placing more easily
  -- than 8 (fp8 B = 32: 13.2 us against 13.6, v2.48): the tuner picks.
  cluster = { 1, 4, 8, 16 },
  -- fp8 only: 1 reads K's raw rows straight into the mma fragments
  -- (converted in registers), so only V is widened in shared memory: one
  -- wide tile instead of two, half the widening. 2 reads V's raw rows too
  -- (no widening, no barrier for it; K and V copied as two groups, as for
  -- bf16) where scales are not per token, and runs as 1 where they are.
  k_regs = { 0, 1, 2 },
  -- bf16 or fp8 k_regs 2, head_dim 128: 1 copies K and V by the bulk
  -- tensor copy engine (one thread issues a block's K and V into a ring of
  -- 2 * stages halves, mbarriers say when they landed) in place of every
  -- thread's cp.async. Where fp8 scales are per token the kernel runs as
  -- k_regs 1 with cp.async.
  tma = { 0, 1 },
  -- tma, group <= 16, 1 or 2 stages, 4 or 8 warps: 1 splits P.V over the
  -- warps by dimensions instead of tokens (P shared through shared
  -- memory, a quarter or an eighth of O a warp: no warps' combine, fewer
  -- registers). fp8 per-token scales take other variants.
  pv_dims = { 0, 1 },
  -- pv_dims with one stage: 1 gives the tma ring a third half slot, so
  -- that V is copied a block ahead (as with two stages) in a CTA small
  -- enough for three an SM with a cluster.
  ring_extra = { 0, 1 },
  -- Every kernel reads one K and one V scale from device memory where the
  -- launcher passes them (scale views of one scale each, shape field
  -- scale=one: vLLM's scalar scale tensors), which it then runs as the
  -- scalar mode. Recorded so that variants from before it (no scale_ptr)
  -- are given such calls as per-token scales, which their kernels read.
  scale_ptr = { 1 },
}

-- Launch choices timed: auto and powers of two (bounded per shape below).
M.splits_choices = { 0, 1, 2, 4, 8, 16, 32, 64 }
-- One split per selected block at most: topk is 1..64.
local SPLITS_MAX = 64

local BLOCK_TOKENS = 128
local DTYPE_BYTES = { bf16 = 2, fp8 = 1 }
-- One mma m tile holds 16 q heads of a kv head: a group of 32 takes two.
local M_TILE_ROWS = 16
-- Bytes of dynamic shared memory one CTA may opt in to (Hopper: 227 KiB,
-- less the kernel's static part); the launcher's limit.
local SHARED_BUDGET = 220 * 1024
-- Entries of a topk_idx row the kernel's block list holds.
local MAX_TOPK = 64
local MAX_THREADS = 512
-- A warp's share of a block is at least one 16-token mma tile.
local MIN_WARP_TOKENS = 16
-- Pruning model: an H100 (132 SMs); more than 8 waves of CTAs cannot win.
local SM_COUNT, MAX_WAVES = 132, 8
local SHAPE_FIELDS = { "B", "D", "Hkv", "Hq", "ctx", "dtype", "layout", "lens", "lse", "qlen", "scale", "sel", "topk" }
-- The host-known subset the runtime dispatches on
-- (runtime/ops/sparse_attn_decode.c st_sparse_attn_decode_dispatch_key
-- builds the same text); the scale mode, layout and lse are run-time
-- arguments of every kernel.
local DISPATCH_FIELDS = { "B", "D", "Hkv", "Hq", "dtype", "qlen", "topk" }
local MAX_GROUP = 32
-- one: per-token scale views with every stride 0 (one K and one V scale
-- in device memory, as vLLM passes its scalar scale tensors).
local SCALES = { "none", "scalar", "tensor", "one" }
-- (pages, 2, 128, Hkv, D) and (pages, Hkv, 128, 2*D): sparsetune.h.
local LAYOUTS = { "pages2", "interleaved" }
local LENS = { "full", "mixed" }
-- random: topk distinct random visible blocks per row; holes: the same with
-- some entries -1; local: the last topk visible blocks.
local SELS = { "random", "holes", "local" }
-- The fields, and the peer's facts (space.shape_field_set).
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)
-- Optional: q drawn from [-2^q_log2, 2^q_log2) instead of [-1, 1) (the GPU
-- test's q beyond f16's range, which the fp8 kernels' f16 q must survive).
SHAPE_FIELD_SET.q_log2 = true

-- mma m tiles of 16 q heads a CTA covers.
local function m_tiles(k)
  return (k.group + M_TILE_ROWS - 1) // M_TILE_ROWS
end

-- The kernel's shared memory (templates/sparse_attn_decode.cu lays it out,
-- runtime/ops/sparse_attn_decode.c st_sparse_attn_decode_smem_bytes computes
-- the same): the q tile (bf16), then the larger of the KV stages and the
-- warps' combine area (fp32 O, m, l per head row), then the block list,
-- then for cluster kernels the push merge's receive area (the item's O
-- once, fp32, and every split's (m, l) of each q head). A stage holds a
-- bf16 K and V tile, or for fp8 the raw K and V rows and their scales,
-- widened into one bf16 K and V tile and the K tile's scales (k_regs 1
-- and 2: the V tile only).
local function shared_bytes(k)
  local tile = BLOCK_TOKENS * k.head_dim * DTYPE_BYTES.bf16
  local fp8 = k.dtype == "fp8"
  local stage = fp8 and (2 * BLOCK_TOKENS * k.head_dim + 2 * BLOCK_TOKENS * 4) or 2 * tile
  local wide_tiles = fp8 and ((k.k_regs or 0) >= 1 and 1 or 2) or 0
  local kv = k.stages * stage + wide_tiles * tile + (wide_tiles == 2 and BLOCK_TOKENS * 4 or 0)
  -- tma with ring_extra: the ring (one slot more than the stages' tiles)
  -- may be the larger
  if (k.tma or 0) == 1 then
    kv = math.max(kv, (2 * k.stages + (k.ring_extra or 0)) * BLOCK_TOKENS * k.head_dim * DTYPE_BYTES[k.dtype])
  end
  -- pv_dims: P twice and the warps' row maxima after the stages
  if (k.pv_dims or 0) == 1 then
    kv = kv + 2 * M_TILE_ROWS * BLOCK_TOKENS * 2 + k.warps_n * m_tiles(k) * M_TILE_ROWS * 4
  end
  -- (pv_dims: the warps hold the dimensions of one O)
  local warps = k.warps_n * m_tiles(k)
  local combine = (((k.pv_dims or 0) == 1 and 1 or warps) * k.head_dim + warps * 2) * M_TILE_ROWS * 4
  local q = m_tiles(k) * M_TILE_ROWS * k.head_dim * DTYPE_BYTES.bf16
  local recv = k.cluster > 1 and (k.group * k.head_dim * 4 + k.cluster * k.group * 8) or 0
  -- tma: room to start the q tile (and so the stages) on a 1024-byte
  -- boundary, which the 128-byte swizzle of the copies needs
  local align = (k.tma or 0) == 1 and 1024 or 0
  return q + math.max(kv, combine) + MAX_TOPK * 8 + recv + align
end

-- pv_dims kernels' shared memory (they run only the raw path): the q
-- tile, the ring of 2 * stages raw halves, P twice and the warps' row
-- maxima (or the combine area, if larger), the block list, the receive
-- area, the alignment.
local function raw_shared_bytes(k)
  local warps = k.warps_n * m_tiles(k)
  local ring = (2 * k.stages + (k.ring_extra or 0)) * BLOCK_TOKENS * k.head_dim * DTYPE_BYTES[k.dtype] +
    2 * M_TILE_ROWS * BLOCK_TOKENS * 2 + warps * M_TILE_ROWS * 4
  local combine = (k.head_dim + warps * 2) * M_TILE_ROWS * 4
  local q = M_TILE_ROWS * k.head_dim * DTYPE_BYTES.bf16
  local recv = k.cluster > 1 and (k.group * k.head_dim * 4 + k.cluster * k.group * 8) or 0
  return q + math.max(ring, combine) + MAX_TOPK * 8 + recv + 1024
end

-- A cluster of 16 (non-portable, Hopper allows it): single kernels of at
-- most 128 threads (pv_dims: 256) of which two fit an SM by shared memory
-- (pv_dims: the raw launch's). A cluster of 8
-- (portable): single kernels of at most 2 stages (they merge 2-8 splits,
-- so a CTA streams few blocks); of 4: single pv_dims kernels. The launcher's
-- st_sparse_attn_decode_check_cluster holds the same rules.
local CLUSTER_MAX_THREADS, SM_SHARED, CTA_RESERVE = 128, 228 * 1024, 1024

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  -- absent in variants recorded before k_regs existed
  if (k.k_regs or 0) >= 1 and k.dtype ~= "fp8" then
    return false, string.format("k_regs=%d reads raw fp8 rows: it needs dtype fp8", k.k_regs)
  end
  if (k.tma or 0) == 1 and (k.head_dim ~= 128 or (k.dtype == "fp8" and k.k_regs ~= 2)) then
    return false, string.format("tma=1 copies whole rows of head_dim 128, bf16 or raw fp8: it needs head_dim 128 " ..
      "and with fp8 k_regs 2 (%s, k_regs %d, head_dim %d)", k.dtype, k.k_regs or 0, k.head_dim)
  end
  if (k.pv_dims or 0) == 1 and ((k.tma or 0) ~= 1 or m_tiles(k) ~= 1 or k.stages > 2 or
      (k.warps_n ~= 4 and k.warps_n ~= 8)) then
    return false, string.format("pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps (tma %d, " ..
      "group %d, %d stages, %d warps)", k.tma or 0, k.group, k.stages, k.warps_n)
  end
  if (k.ring_extra or 0) == 1 and ((k.pv_dims or 0) ~= 1 or k.stages ~= 1) then
    return false, string.format("ring_extra=1 needs pv_dims 1 and 1 stage (pv_dims %d, %d stages)", k.pv_dims or 0,
      k.stages)
  end
  local smem = shared_bytes(k)
  if k.cluster == 8 and (k.algo ~= "single" or k.stages > 2) then
    return false, string.format("cluster 8 needs algo single and <= 2 stages (%s, %d stages)", k.algo, k.stages)
  end
  if k.cluster == 4 and (k.algo ~= "single" or (k.pv_dims or 0) ~= 1) then
    return false, string.format("cluster 4 needs algo single and pv_dims 1 (%s, pv_dims %d)", k.algo, k.pv_dims or 0)
  end
  if k.cluster == 16 then
    local threads = 32 * k.warps_n * m_tiles(k)
    -- pv_dims: up to 256 threads, and the raw launch's shared memory (it
    -- never runs the widening path)
    local pvd = (k.pv_dims or 0) == 1
    local cta_smem = pvd and raw_shared_bytes(k) or smem
    if k.algo ~= "single" or threads > (pvd and 2 or 1) * CLUSTER_MAX_THREADS or
        2 * (cta_smem + CTA_RESERVE) > SM_SHARED then
      return false, string.format("cluster %d needs algo single, <= %d threads and two CTAs per SM (%s, %d threads, " ..
        "%d bytes)", k.cluster, (pvd and 2 or 1) * CLUSTER_MAX_THREADS, k.algo, threads, cta_smem)
    end
  end
  if smem > SHARED_BUDGET then
    return false, string.format("shared memory of stages=%d (%s, head_dim %d, %d m tiles) = %d bytes exceeds %d",
      k.stages, k.dtype, k.head_dim, m_tiles(k), smem, SHARED_BUDGET)
  end
  local threads = 32 * k.warps_n * m_tiles(k)
  if threads > MAX_THREADS then
    return false, string.format("32*warps_n*m_tiles = 32*%d*%d = %d threads exceed %d", k.warps_n, m_tiles(k),
      threads, MAX_THREADS)
  end
  local tokens = BLOCK_TOKENS // k.warps_n
  if tokens < MIN_WARP_TOKENS then
    return false, string.format("warps_n=%d leaves %d tokens per warp, fewer than %d", k.warps_n, tokens,
      MIN_WARP_TOKENS)
  end
  return true
end

-- The tuned kernel configs: the domains within the constraints.
function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The built-in families (docs/kernels/sparse_attn_decode.md, "Built-in
-- variants"), each for the calls whose load it won at: `load` = {lo, hi},
-- the call's (request, query token, KV head) items per multiprocessor in
-- (lo, hi], and the split count (`splits`; nil: the launcher's, which
-- runtime/ops/sparse_attn_decode.c auto_splits picks by the items, topk
-- and dtype). Few items split their blocks, the splits merging in a
-- cluster (16 for the fewest items, where the launcher splits them at
-- least 8 ways; fp8: 4 where a cluster of 16 would split them 2-4 ways,
-- one item a cluster; else 8, where it splits them at all:
-- runtime/ops/sparse_attn_decode.c default_meant_for; so the ranges of
-- the cluster families and of fp8's one-CTA-an-item one start at 0, each
-- after the one before in the table); from 0.4 items an SM (bf16; 0.5
-- with 2-4 query tokens, where the launcher splits them up to there) or
-- 1.25 (fp8, two splits up to there) one CTA an item streams all its blocks
-- with no merge, three blocks in flight where the bf16 CTAs are fewer than
-- the multiprocessors.
-- Past 1.4 bf16 items an SM the kernels without TMA win, one stage for
-- 1-3 query tokens a request and two for 4 (`qlen` = {lo, hi}: the
-- call's qlen in (lo, hi]; docs/kernels/sparse_attn_decode.md, "Built-in
-- family above one item an SM", "Held out again"). `head_dim`: only there
-- (the TMA families need 128 by their constraint; these were measured
-- there).
local FAST = {
  bf16 = {
    { kernel = { warps_n = 4, stages = 1, tma = 1, pv_dims = 1, cluster = 16 }, load = { 0, 0.04 } },
    { kernel = { warps_n = 4, stages = 1, tma = 1, cluster = 8 }, load = { 0, 0.5 } },
    { kernel = { warps_n = 4, stages = 3, tma = 1, cluster = 1 }, splits = 1, load = { 0.4, 1.0 } },
    { kernel = { warps_n = 4, stages = 1, tma = 1, pv_dims = 1, cluster = 1 }, splits = 1, load = { 1.0, 1.4 } },
    { kernel = { warps_n = 4, stages = 1, cluster = 1 }, splits = 1, load = { 1.4, 1e9 }, qlen = { 0, 3 },
      head_dim = 128 },
    { kernel = { warps_n = 4, stages = 2, cluster = 1 }, splits = 1, load = { 1.4, 1e9 }, qlen = { 3, 4 },
      head_dim = 128 },
  },
  fp8 = {
    { kernel = { warps_n = 4, stages = 1, k_regs = 2, tma = 1, pv_dims = 1, ring_extra = 1, cluster = 16 },
      load = { 0, 0.04 } },
    { kernel = { warps_n = 4, stages = 1, k_regs = 2, tma = 1, pv_dims = 1, ring_extra = 1, cluster = 4 },
      load = { 0, 1.25 } },
    { kernel = { warps_n = 4, stages = 1, k_regs = 2, tma = 1, pv_dims = 1, ring_extra = 1, cluster = 8 },
      load = { 0, 1.25 } },
    { kernel = { warps_n = 4, stages = 1, k_regs = 2, tma = 1, pv_dims = 1, cluster = 1 }, splits = 1,
      load = { 0, 1e9 } },
  },
}

-- The fallbacks, per dtype x head_dim x group in the order dispatch tries
-- them: the FAST families where the kind allows them (head_dim 128, the
-- group they take), then one valid for every shape of the kind (any B,
-- qlen, topk, scale mode, layout). The launcher picks the split count.
function M.defaults()
  local out = {}
  for _, dtype in ipairs(M.kernel_domains.dtype) do
    for _, head_dim in ipairs(M.kernel_domains.head_dim) do
      for _, group in ipairs(M.kernel_domains.group) do
        for _, f in ipairs(FAST[dtype]) do
          local k = { dtype = dtype, head_dim = head_dim, group = group, algo = "single", k_regs = 0, tma = 0,
            pv_dims = 0, ring_extra = 0, scale_ptr = 1 }
          for name, v in pairs(f.kernel) do
            k[name] = v
          end
          if M.constraint(k) and (f.head_dim or head_dim) == head_dim then
            out[#out + 1] = { kernel = k, launch = { splits = f.splits or 0 }, load = f.load, qlen = f.qlen }
          end
        end
        local k = { dtype = dtype, head_dim = head_dim, group = group, warps_n = 4, stages = 1, algo = "single",
          cluster = 1, k_regs = 0, tma = 0, pv_dims = 0, ring_extra = 0, scale_ptr = 1 }
        local ok, why = M.constraint(k)
        -- Every shape of the contract needs a fallback: a missing one is a
        -- defect of the space, not a configuration to skip.
        if not ok then
          error(string.format("%s: no default for %s head_dim %d group %d: %s", M.name, dtype, head_dim, group, why), 0)
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
  local why = space.int_fields_outside(s, { { "B", 1, 65535 }, { "D", 16, 512 }, { "Hq", 1, 65535 },
    { "Hkv", 1, 65535 }, { "qlen", 1, 4 }, { "topk", 1, 64 }, { "lse", 0, 1 }, { "ctx", 1 } })
  if why then
    return false, why
  end
  if s.q_log2 ~= nil then
    why = space.int_fields_outside(s, { { "q_log2", -40, 40 } })
    if why then
      return false, why
    end
  end
  if DTYPE_BYTES[s.dtype] == nil then
    return false, string.format("shape field dtype=%s is not bf16 or fp8", tostring(s.dtype))
  end
  if s.Hq % s.Hkv ~= 0 then
    return false, string.format("Hq=%d is not a multiple of Hkv=%d", s.Hq, s.Hkv)
  end
  if s.Hq // s.Hkv > MAX_GROUP then
    return false, string.format("Hq/Hkv = %d/%d = %d q heads per kv head exceed %d", s.Hq, s.Hkv, s.Hq // s.Hkv,
      MAX_GROUP)
  end
  if not space.contains(SCALES, s.scale) then
    return false, string.format("shape field scale=%s is not none, scalar, tensor or one", tostring(s.scale))
  end
  if s.dtype == "bf16" and s.scale ~= "none" then
    return false, string.format("shape field scale=%s needs an fp8 cache (bf16 takes none)", s.scale)
  end
  if not space.contains(LAYOUTS, s.layout) then
    return false, string.format("shape field layout=%s is not pages2 or interleaved", tostring(s.layout))
  end
  if not space.contains(SELS, s.sel) then
    return false, string.format("shape field sel=%s is not random, holes or local", tostring(s.sel))
  end
  if not space.contains(LENS, s.lens) then
    -- An explicit list "1;127;0;4133": one length per request, each <= ctx.
    local n = 0
    for len in string.gmatch(tostring(s.lens) .. ";", "([^;]*);") do
      local v = math.tointeger(tonumber(len))
      if not v or v < 0 or v > s.ctx then
        return false, string.format("shape field lens=%s is not full, mixed or a list of lengths in 0..ctx",
          tostring(s.lens))
      end
      n = n + 1
    end
    if n ~= s.B then
      return false, string.format("shape field lens=%s lists %d lengths for B=%d", tostring(s.lens), n, s.B)
    end
  end
  local peer_ok, peer_why = space.check_peer(s)
  if not peer_ok then
    return false, peer_why
  end
  return true
end

-- ---- which variants run which shapes ------------------------------------

-- Compile-time fit: the kernel can compute this shape. Every config is
-- exact in dtype, head_dim and group, so defaults and tuned variants fit
-- alike.
function M.fits(k, s, _is_default)
  if k.dtype ~= s.dtype then
    return false, "dtype differs"
  end
  if (k.pv_dims or 0) == 1 and (s.scale == "tensor" or (s.scale == "one" and (k.scale_ptr or 0) == 0)) then
    return false, string.format("pv_dims=1 takes no per-token scales (scale %s): another variant runs them", s.scale)
  end
  if k.head_dim ~= s.D then
    return false, "head_dim differs"
  end
  if k.group * s.Hkv ~= s.Hq then
    return false, string.format("group %d is not Hq/Hkv = %d/%d", k.group, s.Hq, s.Hkv)
  end
  return true
end

-- Launch choices worth timing for a shape (the variant list is per
-- (kernel, splits)).
function M.worth(k, l, s, is_default)
  local splits = l.splits
  if splits == 0 then
    if k.algo == "split" then
      return false, "algo split needs explicit splits >= 2"
    end
    -- (a default launches them so: the count its calls want, <= cluster)
    if (k.cluster == 4 or k.cluster == 8) and not is_default then
      return false, string.format("cluster %d merges explicit splits 2 .. %d", k.cluster, k.cluster)
    end
    return true
  end
  if not space.contains(M.splits_choices, splits) then
    return false, string.format("splits=%d is not a timed choice", splits)
  end
  -- A cluster of 4 or 8 is for its merge: other split counts time the
  -- workspace merge again, plus the cluster's launch.
  if (k.cluster == 4 or k.cluster == 8) and (splits < 2 or k.cluster % splits ~= 0) then
    return false, string.format("cluster %d merges 2 .. %d splits, not %d", k.cluster, k.cluster, splits)
  end
  if k.algo == "split" and splits < 2 then
    return false, "algo split needs splits >= 2"
  end
  -- A split of no selected block only writes an empty partial state.
  if splits > s.topk then
    return false, string.format("splits=%d exceed topk=%d", splits, s.topk)
  end
  local ctas = s.B * s.qlen * s.Hkv * splits
  if ctas > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", ctas, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names
-- templates/defaults/sparse_attn_decode.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    is_fp8 = k.dtype == "fp8" and 1 or 0,
    head_dim = k.head_dim,
    group = k.group,
    m_tiles = m_tiles(k),
    warps_n = k.warps_n,
    stages = k.stages,
    algo_split = k.algo == "split" and 1 or 0,
    cluster = k.cluster,
    k_regs = k.k_regs or 0,
    tma = k.tma or 0,
    pv_dims = k.pv_dims or 0,
    ring_extra = k.ring_extra or 0,
  }
end

-- "sparse_attn_decode.bf16.d128.g16.w4.s2.single/s8" ("/auto" for splits 0),
-- "...single.c16/s8" with a cluster of 16 (c8: of 8), "...s2.kr.single/s8" with k_regs 1
-- ("kvr." with 2, "kvr.tma." with tma 1, "kvr.tma.pvd." with pv_dims 1,
-- "kvr.tma.pvd.ring3." with ring_extra 1).
local K_REGS_TAG = { [0] = "", [1] = "kr.", [2] = "kvr." }
local TMA_TAG = { [0] = "", [1] = "tma." }
local PV_DIMS_TAG = { [0] = "", [1] = "pvd." }
local RING_EXTRA_TAG = { [0] = "", [1] = "ring3." }
function M.variant_name(k, l)
  return string.format("%s.%s.d%d.g%d.w%d.s%d.%s%s%s%s%s%s/%s", M.name, k.dtype, k.head_dim, k.group, k.warps_n,
    k.stages, K_REGS_TAG[k.k_regs or 0], TMA_TAG[k.tma or 0], PV_DIMS_TAG[k.pv_dims or 0],
    RING_EXTRA_TAG[k.ring_extra or 0], k.algo,
    k.cluster > 1 and (".c" .. k.cluster) or "", l.splits == 0 and "auto" or ("s" .. l.splits))
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
