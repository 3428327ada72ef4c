-- ops/sparse_attn.lua - the variant space of sparse_attn (block-sparse GQA
-- attention over a paged KV cache for a varlen prefill batch; kernel:
-- templates/sparse_attn.cu, launcher: runtime/ops/sparse_attn.c).
--
-- A variant is a kernel config only (no launch parameters), of one of two
-- families:
--   tile   one CTA per `tokens` consecutive query tokens and kv head, over
--          the union of their selected blocks (templates/sparse_attn.cu);
--   block  one CTA per selected block and `tokens` of the query tokens that
--          selected it; partial states (`part`: bf16 or f32) merged
--          afterwards, registers budgeted for `ctas` CTAs an SM, `stages`
--          2: the next item loads while this one computes, `mtiles` 2:
--          32 q rows a warp, `mma` wgmma: a warpgroup's 64 q rows a block
--          on Hopper wgmma (common/attn_wgmma.cuh; `mtiles` 2: two such
--          m-tiles in turn, each block read once for both)
--          (templates/sparse_attn_block.cu; needs a workspace).
-- Parameters one family does not use hold one value (tile: part bf16,
-- ctas 1, mma sync; block: topk 16), so no kernel appears twice. `mtiles` 2 (both
-- families): 32 q rows a warp, each K/V fragment feeding two mma. Parameter
-- names here are the ones the C launcher reads
-- (st_sparse_attn_config_from_params) and the templates expect. Every
-- function is pure.

local space = require("space")

local M = {}

M.name = "sparse_attn"
M.template = "sparse_attn.cu"
M.block_template = "sparse_attn_block.cu"

function M.template_of(k)
  return k.algo == "block" and M.block_template or M.template
end

M.kernel_domains = {
  algo = { "tile", "block" },
  dtype = { "bf16", "fp8" }, -- KV cache dtype; q and o are always bf16
  head_dim = { 64, 128, 256 },
  group = { 1, 2, 4, 8, 16, 32 }, -- q heads per kv head (Hq / Hkv), exact
  tokens = { 1, 2, 4, 8, 16 },    -- neighbouring query tokens sharing a CTA (their blocks' union)
  topk = { 16, 32, 64 },          -- capacity of the CTA's selection lists; buckets (cap/2, cap], 16 takes 1..16
  stages = { 1, 2 },              -- KV blocks in flight per CTA
  part = { "bf16", "f32" },       -- block: partial outputs' type
  ctas = { 1, 2 },                -- block: CTAs per SM the registers are budgeted for
  mtiles = { 1, 2 },              -- 16-row m-tiles a warp takes (2: each K/V fragment feeds two; wgmma: 64-row passes)
  mma = { "sync", "wgmma" },      -- block: mma.sync per warp, or wgmma per warpgroup of 64 rows (sm_90a)
}

local BLOCK_TOKENS = 128
local DTYPE_BYTES = { bf16 = 2, fp8 = 1 }
local MAX_GROUP = 32
-- q rows of a CTA (tokens x group, padded to whole 16-row mma tiles): at
-- most 8 warps; with 16 (512 threads, 128 registers each) every head_dim
-- spilled its output accumulators.
local MAX_ROWS = 128
-- Bytes of dynamic shared memory one CTA may opt in to (the launcher's limit).
local SHARED_BUDGET = 220 * 1024
local SHAPE_FIELDS = { "B", "D", "Hkv", "Hq", "dtype", "layout", "lse", "reqs", "scale", "sel", "topk" }
-- The host-known subset the runtime dispatches on (runtime/ops/sparse_attn.c
-- st_sparse_attn_dispatch_key builds the same text); B is total_q.
local DISPATCH_FIELDS = { "B", "D", "Hkv", "Hq", "dtype", "topk" }
local SCALES = { "none", "scalar", "tensor" }
local LAYOUTS = { "pages2", "interleaved" }
-- random: block 0, the query's own block and random other visible blocks;
-- holes: the same with some entries -1 or past the own block; local: the
-- last topk visible blocks; repeats: random with some entries a copy of
-- another entry of the row (a block listed twice counts twice).
local SELS = { "random", "holes", "local", "repeats" }
-- The fields, and the peer's facts (space.shape_field_set).
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

-- The kernel's shared memory (templates/sparse_attn.cu lays it out,
-- st_sparse_attn_smem_bytes computes the same): the q tile, the K/V stages
-- (fp8: raw rows and scales, widened into one bf16 K and V tile), and the
-- lists of the union of the tile's selected blocks.
local function warp_rows(k)
  return 16 * k.mtiles
end

-- Rows are padded to whole warps' m-tiles (wgmma: whole warpgroups of 64
-- rows a pass).
local function padded_rows(k)
  local unit = k.mma == "wgmma" and 64 * k.mtiles or warp_rows(k)
  return (k.tokens * k.group + unit - 1) // unit * unit
end

local function shared_bytes(k)
  local D, T = k.head_dim, k.tokens
  local q = padded_rows(k) * D * 2
  local tile = BLOCK_TOKENS * D * 2
  local fp8 = k.dtype == "fp8"
  local stage = fp8 and (2 * BLOCK_TOKENS * D + 2 * BLOCK_TOKENS * 4) or 2 * tile
  local wide = fp8 and 2 * tile or 0 -- fp8: the widened K and V tiles
  if k.algo == "block" then -- per stage a q tile and a block (wgmma: + 1024 to align the panels;
    -- bf16 wgmma with one stage: two q tiles, templates/sparse_attn_block.cu's SPLIT, or one in two
    -- halves with two passes, its PASSES2)
    if k.mma == "wgmma" and k.mtiles == 2 then -- one q tile; fp8 rows widened in place, and the block's scales
      return q + 2 * tile + (fp8 and 2 * BLOCK_TOKENS * 4 or 0) + 1024
    end
    local q_tiles = k.stages
    if k.mma == "wgmma" and not fp8 and k.stages == 1 then
      q_tiles = 2
    end
    return q_tiles * q + k.stages * stage + wide + (k.mma == "wgmma" and 1024 or 0)
  end
  local kv = k.stages * stage + wide + (fp8 and BLOCK_TOKENS * 4 or 0) -- and K's scales, kept
  local entries = T * k.topk
  local lists = entries * 4 * 4 + 2 * entries * 4 * 3 + entries * T * 4 + T * 8
  return q + kv + lists
end

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  if k.algo == "tile" and (k.part ~= "bf16" or k.ctas ~= 1) then
    return false, "tile variants have no partials and budget one CTA an SM (part bf16, ctas 1)"
  end
  if k.mma == "wgmma" then
    if k.algo ~= "block" then
      return false, "wgmma is a block-major kernel (tile variants: mma sync)"
    end
    if k.head_dim ~= 128 then
      return false, "wgmma variants: head_dim 128 (one m64n128 product for O)"
    end
    if k.mtiles == 2 and k.stages ~= 1 then
      return false, "wgmma passes (mtiles 2): one stage (their q halves are the double buffer)"
    end
    if (k.tokens * k.group) % (64 * k.mtiles) ~= 0 then
      return false, string.format("tokens*group = %d q rows are not whole warpgroups of 64 in %d passes",
        k.tokens * k.group, k.mtiles)
    end
    local threads = k.tokens * k.group * 2 // k.mtiles -- 2 threads a row of a pass
    if k.ctas * threads > 256 then
      return false, string.format("%d CTAs of %d wgmma threads: a thread holds S and O (128 floats), at most 256 "
        .. "threads an SM", k.ctas, threads)
    end
  end
  if k.mtiles == 2 and k.tokens * k.group < 32 then
    return false, string.format("tokens*group = %d q rows fill less than one warp's two m-tiles", k.tokens * k.group)
  end
  if k.mtiles == 2 and k.head_dim > 128 then
    return false, string.format("two m-tiles a warp hold 2 x %d output registers a lane", k.head_dim // 2)
  end
  if k.algo == "block" and k.topk ~= 16 then
    return false, "block variants hold no selection lists (topk 16)"
  end
  if k.algo == "block" and k.tokens < 4 then
    return false, "block variants take at least 4 tokens a block (fewer read each block nearly once a token)"
  end
  if k.algo == "block" and k.ctas == 2 and 2 * (shared_bytes(k) + 1024) > 228 * 1024 then
    return false, string.format("two CTAs of %d bytes of shared memory do not fit an SM", shared_bytes(k))
  end
  local rows = k.tokens * k.group
  if rows > MAX_ROWS then
    return false, string.format("tokens*group = %d*%d = %d q rows exceed %d", k.tokens, k.group, rows, MAX_ROWS)
  end
  local smem = shared_bytes(k)
  if smem > SHARED_BUDGET then
    return false, string.format(
      "shared memory of tokens=%d, topk=%d, stages=%d (%s, head_dim %d) = %d bytes exceeds %d",
      k.tokens, k.topk, k.stages, k.dtype, k.head_dim, smem, SHARED_BUDGET)
  end
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The fallbacks, per dtype x head_dim x group x topk capacity in the order
-- dispatch tries them: the block family that won every anchor shape
-- (docs/kernels/sparse_attn.md; wgmma over two m-tiles, 8 tokens a CTA,
-- chunks of 3072 query tokens overlapped on the side stream) where the kind
-- allows it; then the tile kernel with one stage and the most tokens, up to
-- 64 q rows (4 warps), whose lists fit in shared memory, valid for every
-- shape of the kind. The tile kernel goes first for small calls over short
-- contexts (the call's load, runtime/ops/sparse_attn.c: entries a
-- multiprocessor, at most TILE_MAX_LOAD, contexts of at most 6 blocks):
-- there the block kernel's two launches and its merge cost more than the
-- work (H200: 1 to 256 tokens of 1-2 blocks, 7-21 us against 16-21).
-- Below TILE_FEW_LOAD the tile kernel with half the tokens a CTA goes
-- first: twice the CTAs for a call that fills few SMs (H200, group 16: 8.3-9.2
-- us against 10.4-12.3 for 64 tokens of one block, 18.2 against 21.3 for 16
-- tokens of 5, equal at 7.8 entries a multiprocessor, worse at 15.5).
-- Entries a multiprocessor (8192 / 132 measured better on the tile kernel,
-- 16384 / 132 on the block kernel: 1024 tokens of 8 blocks, 1 and 2 KV
-- heads, H200).
local TILE_MAX_LOAD = 90
local TILE_FEW_LOAD = 6

function M.defaults()
  local out = {}
  for _, dtype in ipairs(M.kernel_domains.dtype) do
    for _, head_dim in ipairs(M.kernel_domains.head_dim) do
      for _, group in ipairs(M.kernel_domains.group) do
        for _, topk in ipairs(M.kernel_domains.topk) do
          local block = { algo = "block", dtype = dtype, head_dim = head_dim, group = group, tokens = 8, topk = topk,
            stages = 1, part = "bf16", ctas = 2, mtiles = 2, mma = "wgmma" }
          if M.constraint(block) then
            -- Where every token selects every block it sees (the call's
            -- max_context within topk blocks: runtime/ops/sparse_attn.c
            -- default_meant_for), dense causal attention in one pass
            -- writes no partials at all (H200, bf16, 1852 tokens of 15
            -- blocks at topk 20: 187 us against 291 on the sparse path).
            if head_dim == 128 then
              out[#out + 1] = { kernel = block, launch = { chunk = 0, dense = 1 }, load = { TILE_MAX_LOAD, 1e9 } }
            end
            out[#out + 1] = { kernel = block, launch = { chunk = 3072, overlap = 1 }, load = { TILE_MAX_LOAD, 1e9 } }
          end
          local within, smallest, why
          for _, tokens in ipairs({ 16, 8, 4, 2, 1 }) do
            local k = { algo = "tile", dtype = dtype, head_dim = head_dim, group = group, tokens = tokens,
              topk = topk, stages = 1, part = "bf16", ctas = 1, mtiles = 1, mma = "sync" }
            local ok, reason = M.constraint(k)
            if ok then
              if within == nil and tokens * group <= 64 then
                within = k
              end
              smallest = k
            end
            why = why or reason
          end
          local chosen = within or smallest
          if not chosen then
            error(string.format("%s: no default for %s head_dim %d group %d topk %d: %s", M.name, dtype, head_dim,
              group, topk, tostring(why)), 0)
          end
          local half = {}
          for key, v in pairs(chosen) do
            half[key] = v
          end
          half.tokens = chosen.tokens // 2
          if half.tokens >= 1 and M.constraint(half) then
            -- After the general tile kernel in the table: where neither
            -- range holds the call, the general one is tried before it.
            out[#out + 1] = { kernel = chosen, launch = {}, load = { TILE_FEW_LOAD, TILE_MAX_LOAD } }
            out[#out + 1] = { kernel = half, launch = {}, load = { 0, TILE_FEW_LOAD } }
          else
            out[#out + 1] = { kernel = chosen, launch = {}, load = { 0, TILE_MAX_LOAD } }
          end
        end
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
  local why = space.int_fields_outside(s, { { "B", 1 }, { "D", 16, 512 }, { "Hq", 1, 65535 },
    { "Hkv", 1, 65535 }, { "topk", 1, 64 }, { "lse", 0, 1 } })
  if why then
    return false, why
  end
  if DTYPE_BYTES[s.dtype] == nil then
    return false, string.format("shape field dtype=%s is not bf16 or fp8", tostring(s.dtype))
  end
  if s.Hq % s.Hkv ~= 0 or s.Hq // s.Hkv > MAX_GROUP then
    return false, string.format("Hq/Hkv = %d/%d must be a whole number of q heads per kv head, at most %d", s.Hq,
      s.Hkv, MAX_GROUP)
  end
  if not space.contains(SCALES, s.scale) then
    return false, string.format("shape field scale=%s is not none, scalar or tensor", tostring(s.scale))
  end
  if s.dtype == "bf16" and s.scale ~= "none" then
    return false, string.format("shape field scale=%s needs an fp8 cache (bf16 takes none)", s.scale)
  end
  if not space.contains(LAYOUTS, s.layout) then
    return false, string.format("shape field layout=%s is not pages2 or interleaved", tostring(s.layout))
  end
  if not space.contains(SELS, s.sel) then
    return false, string.format("shape field sel=%s is not random, holes, local or repeats", tostring(s.sel))
  end
  return space.check_varlen(s)
end

-- ---- which variants run which shapes ------------------------------------

function M.fits(k, s, _is_default)
  if k.dtype ~= s.dtype then
    return false, "dtype differs"
  end
  if k.head_dim ~= s.D then
    return false, "head_dim differs"
  end
  if k.group * s.Hkv ~= s.Hq then
    return false, string.format("group %d is not Hq/Hkv = %d/%d", k.group, s.Hq, s.Hkv)
  end
  if k.algo == "block" then -- any topk: the lists are in the workspace
    return true
  end
  if k.topk < s.topk or (k.topk ~= 16 and s.topk <= k.topk // 2) then
    return false, string.format("topk %d is not in the bucket of capacity %d", s.topk, k.topk)
  end
  return true
end

-- Block-major launches: `chunk` query tokens per pass (lists and partials
-- of one pass in the workspace; 0: as many as ST_SPARSE_ATTN_BLOCK_WS
-- allows). Small passes keep their partials in L2 between the blocks and
-- the merge; large ones make fewer launches. Tile variants have no launch
-- parameter (their names and identities are those of before).
--
-- `overlap` 1: each chunk's merge runs on the caller's stream beside the
-- next chunk's lists and blocks on a side stream (runtime/ops/sparse_attn.c),
-- in two workspace halves of the same budget each; timed with chunk 0 (the
-- automatic chunk), 256 (so that batches smaller than one automatic chunk,
-- the GPU tests' among them, run overlapped), and 2048 and 3072: chunks
-- past the automatic budget (~256 MiB a half), fewer of them, with fuller
-- items and fewer drains (8192:57344 on the H100: 1248 us in 5 chunks,
-- 1224 in 4, 1207 in 3; docs/kernels/sparse_attn.md, v2.20).
M.chunk_choices = { 0, 256, 1024 }
M.overlap_chunks = { 0, 256, 2048, 3072 }
-- `bulk`: the merge by bulk copies (step 3 of templates/sparse_attn_block.cu)
-- with that many slices of partials in flight a CTA (absent or 0: step 2),
-- with overlap; its persistent two-warp CTAs fit beside the next chunk's
-- blocks kernel. Timed with the large overlapped chunks, and with 256 so
-- that the GPU tests' edge shapes verify it. 8 and 12 slots timed the same;
-- chunks of 1024 and 1536 lost on every anchors row (H100,
-- docs/kernels/sparse_attn.md, v2.26).
M.bulk_slots = { 8 }
M.bulk_chunks = { 256, 2048, 3072 }
M.BULK_MAX_SLOTS = 16 -- ST_SPARSE_ATTN_BULK_MAX_SLOTS
-- `first`: the first chunk's tokens, the rest in chunks of `chunk` (with
-- overlap and bulk). The first blocks kernel runs beside no merge, and a
-- request's first tokens select the fewest blocks: a small first chunk
-- shortens that exposed part (16384:0 on the H100: 2137 -> 2109 us; 1024
-- + 1536-token chunks, or a first chunk of 512, lost; v2.27). {chunk,
-- first} pairs; 256 / 128 so that the GPU tests' edge shapes verify it.
M.first_chunks = { { 3072, 1024 }, { 256, 128 } }
-- `dense`: tiles of 128 / group tokens that select every block they see
-- (a request's first topk blocks) run as dense causal attention
-- (templates/sparse_attn_dense.cuh), two-pass kernels only: 1 before
-- the chunks, 2 after them, beside the last merge. {chunk,
-- first} pairs as above (0: none) with overlap and bulk, and chunk 0 alone
-- (no overlap) so that the GPU tests verify both launch orders. A first
-- chunk of 2048 (the tokens that can be dense at topk 16) and chunks of
-- 1024 or 2048 after it timed within 0.3% of these at 4096:0 and 2% slower
-- at 16384:0 (H100, docs/kernels/sparse_attn.md, v2.35): not kept.
M.dense_chunks = { { 3072, 1024 }, { 3072, 0 }, { 256, 128 } }
local CHUNK_MAX = 1 << 20
local SMALL_CHUNK = 256
local CHUNK_BUDGET = 256 << 20 -- ST_SPARSE_ATTN_BLOCK_WS

function M.launch_space(k)
  if k.algo ~= "block" then
    return { {} }
  end
  local out = {}
  for _, c in ipairs(M.chunk_choices) do
    out[#out + 1] = { chunk = c } -- overlap 0 stays absent: the launches (names, identities) of before
  end
  for _, c in ipairs(M.overlap_chunks) do
    out[#out + 1] = { chunk = c, overlap = 1 }
  end
  for _, c in ipairs(M.bulk_chunks) do
    for _, b in ipairs(M.bulk_slots) do
      out[#out + 1] = { chunk = c, overlap = 1, bulk = b }
    end
  end
  for _, cf in ipairs(M.first_chunks) do
    out[#out + 1] = { chunk = cf[1], overlap = 1, bulk = M.bulk_slots[1], first = cf[2] }
  end
  if k.mma == "wgmma" and k.mtiles == 2 and k.head_dim == 128 then
    for _, d in ipairs({ 1, 2 }) do
      for _, cf in ipairs(M.dense_chunks) do
        out[#out + 1] = { chunk = cf[1], overlap = 1, bulk = M.bulk_slots[1], first = cf[2] > 0 and cf[2] or nil,
          dense = d }
      end
    end
    out[#out + 1] = { chunk = 0, dense = 1 }
  end
  return out
end

function M.check_launch(l)
  local unknown = space.unknown_key(l, { chunk = true, overlap = true, bulk = true, first = true, dense = true })
  if unknown then
    return false, string.format("'%s' is not a launch parameter of %s", unknown, M.name)
  end
  local c = l.chunk
  if c ~= nil and (math.type(c) ~= "integer" or c < 0 or c > CHUNK_MAX or c % 64 ~= 0) then
    return false, string.format("launch parameter chunk=%s is not a multiple of 64 in 0..%d", tostring(c), CHUNK_MAX)
  end
  local f = l.first
  if f ~= nil and (math.type(f) ~= "integer" or f < 0 or f > CHUNK_MAX or f % 64 ~= 0) then
    return false, string.format("launch parameter first=%s is not a multiple of 64 in 0..%d", tostring(f), CHUNK_MAX)
  end
  if l.overlap ~= nil and l.overlap ~= 0 and l.overlap ~= 1 then
    return false, string.format("launch parameter overlap=%s is not 0 or 1", tostring(l.overlap))
  end
  local b = l.bulk
  if b ~= nil and (math.type(b) ~= "integer" or b < 0 or b > M.BULK_MAX_SLOTS) then
    return false, string.format("launch parameter bulk=%s is not an integer in 0..%d", tostring(b), M.BULK_MAX_SLOTS)
  end
  if l.dense ~= nil and l.dense ~= 0 and l.dense ~= 1 and l.dense ~= 2 then
    return false, string.format("launch parameter dense=%s is not 0, 1 or 2", tostring(l.dense))
  end
  return true
end

-- Whether a request of reqs ("q_len:prefix[*count];...") starts below
-- `positions`: only there can a token select every block it sees.
local function starts_below(reqs, positions)
  for prefix in string.gmatch(tostring(reqs), "%d+:(%d+)") do
    if tonumber(prefix) < positions then
      return true
    end
  end
  return false
end

-- Workspace bytes a query token takes in a chunk (its partials and list
-- entries; runtime/ops/sparse_attn.c adds the per-key arrays).
local function chunk_bytes_per_token(k, s)
  local part = k.part == "f32" and 4 or 2
  return s.Hkv * s.topk * (k.group * (k.head_dim * part + 8) + 8 + 4)
end

-- A chunk as large as the batch is the same launch as chunk 0; overlap
-- needs two chunks or more.
function M.worth(k, l, s, _is_default)
  if k.algo ~= "block" then
    return true
  end
  local chunk = l.chunk or 0
  if chunk > 0 and chunk >= s.B then
    return false, string.format("chunk %d holds the whole batch of %d tokens (chunk 0 does the same)", chunk, s.B)
  end
  -- Chunks of 256 tokens are in the space for small batches (the GPU
  -- tests' edge shapes run every overlapped path through them); past 2048
  -- tokens their many chunks' fixed costs lost by 30-50% on every anchors
  -- row (H100, 2026-11-26), and they were the slowest launches the
  -- tune timed.
  if chunk > 0 and chunk <= SMALL_CHUNK and s.B > 8 * SMALL_CHUNK then
    return false, string.format("chunk %d of a batch of %d tokens: %d chunks' fixed costs", chunk, s.B,
      (s.B + chunk - 1) // chunk)
  end
  if (l.overlap or 0) == 1 and chunk == 0 and s.B * chunk_bytes_per_token(k, s) <= CHUNK_BUDGET then
    return false, string.format("the batch of %d tokens is one chunk: nothing to overlap", s.B)
  end
  if (l.dense or 0) > 0 and not starts_below(s.reqs, s.topk * BLOCK_TOKENS) then
    return false, string.format("no request of %s starts below position %d: no dense tile", s.reqs,
      s.topk * BLOCK_TOKENS)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The templates' values: every name templates/defaults/sparse_attn.cuh or
-- sparse_attn_block.cuh declares (as ST_P_<NAME>); each family's prelude
-- takes those of its own template.
function M.render_values(k)
  return {
    is_fp8 = k.dtype == "fp8" and 1 or 0,
    head_dim = k.head_dim,
    group = k.group,
    tokens = k.tokens,
    topk = k.topk,
    stages = k.stages,
    warps = math.max(padded_rows(k) // warp_rows(k), 4),
    ctas = k.ctas,
    mtiles = k.mtiles,
    wgmma = k.mma == "wgmma" and 1 or 0,
    part_f32 = k.part == "f32" and 1 or 0,
  }
end

-- "sparse_attn.bf16.d128.g16.t8.k16.s2" (tile, one m-tile a warp: the
-- names of before the block family; ".m2" after two), "sparse_attn.bf16.d128.g16.block.t8.s2.m2.pbf16.c1/q256"
-- (".wg" in place of ".m1": mma wgmma; ".wg2" of ".m2").
function M.variant_name(k, l)
  if k.algo == "block" then
    return string.format("%s.%s.d%d.g%d.block.t%d.s%d.%s.p%s.c%d/%s", M.name, k.dtype, k.head_dim, k.group,
      k.tokens, k.stages, k.mma == "wgmma" and (k.mtiles == 2 and "wg2" or "wg") or ("m" .. k.mtiles), k.part, k.ctas,
      ((l.chunk or 0) == 0 and "auto" or ("q" .. l.chunk)) .. ((l.overlap or 0) == 1 and ".ov" or "")
        .. ((l.bulk or 0) > 0 and (".b" .. l.bulk) or "") .. ((l.first or 0) > 0 and (".f" .. l.first) or "")
        .. ((l.dense or 0) == 1 and ".dn" or (l.dense or 0) == 2 and ".dn2" or ""))
  end
  return string.format("%s.%s.d%d.g%d.t%d.k%d.s%d%s", M.name, k.dtype, k.head_dim, k.group, k.tokens, k.topk, k.stages,
    k.mtiles == 2 and ".m2" or "")
end

local launch_space, check_launch = M.launch_space, M.check_launch
space.define_checks(M)
M.launch_space, M.check_launch = launch_space, check_launch -- the op's own: a launch parameter for one family
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
