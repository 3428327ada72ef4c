-- ops/dsa_index_decode.lua - the variant space of dsa_index_decode
-- (DeepSeek-V3.2's lightning indexer for a decode batch: token logits over
-- the paged fp8 index-K cache and their top-k; kernel:
-- templates/dsa_index_decode.cu, launcher: runtime/ops/dsa_index_decode.c).
--
-- A variant is a kernel config (compile-time, baked into the source) plus a
-- launch config (`splits`: CTAs per request; 0 = the launcher picks).
-- Parameter names are the ones the C launcher reads
-- (st_dsa_index_decode_config_from_params) and the template expects. topk
-- is no kernel parameter: the merge's radix select costs the same for any
-- k up to 2048, so a capacity would only multiply the binaries.
-- Every function is pure.

local space = require("space")

local M = {}

M.name = "dsa_index_decode"
M.template = "dsa_index_decode.cu"

M.kernel_domains = {
  max_heads = { 32, 64 },     -- heads whose q a CTA holds (H <= max_heads)
  max_qlen = { 1, 2, 4 },     -- query tokens a CTA holds (qlen <= max_qlen)
  threads = { 128, 256 },     -- main kernel
  tiles_in_flight = { 1, 2 }, -- 16-token tiles a warp loads before computing
  merge_threads = { 256, 512, 1024 },
  -- 1: the merge stages a long row's candidates after its first pass; 0:
  -- every pass reads the row from L2.
  merge_filter = { 0, 1 },
}

-- Launch choices timed: auto and powers of two (bounded per shape below).
M.splits_choices = { 0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 }
local SPLITS_MAX = 1024

local HEAD_DIM = 128
local TILE = 16
-- The main kernel's dynamic shared memory: per query token and 8 heads, q
-- widened to f16 (8 x 128 x 2 bytes), and the weights (4 bytes a head).
-- Kept under 96 KiB so that two CTAs of 256 threads share a multiprocessor
-- (the launcher's one-wave rule counts on it).
local Q_BYTES_PER_8_HEADS = 8 * HEAD_DIM * 2
local SMEM_BUDGET = 96 * 1024
-- Registers of K fragments in flight per thread: a tile is 16 bytes of each
-- 64-byte chunk of two rows (4 registers each), widened to f16 (twice
-- that) one tile at a time.
local FRAGMENT_REGISTER_BUDGET = 64
-- Pruning model: an H200 (132 SMs); more than 8 waves of CTAs cannot win.
local SM_COUNT, MAX_WAVES = 132, 8
local SHAPE_FIELDS = { "B", "H", "ctx", "lens", "page", "qlen", "topk" }
-- The host-known subset the runtime dispatches on (runtime/ops/
-- dsa_index_decode.c st_dsa_index_decode_dispatch_key builds the same text).
local DISPATCH_FIELDS = { "B", "H", "ctx", "page", "qlen", "topk" }
local LENS = { "full", "mixed" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)
-- ties=1 (GPU tests): every index-K token the same, so all logits of a row
-- tie; ties=2: logits tie in runs of a page; nan=1: every 4099th index-K
-- value a NaN. Input patterns, not shapes.
SHAPE_FIELD_SET.ties = true
SHAPE_FIELD_SET.nan = true

local function smem_bytes(k)
  return k.max_qlen * (k.max_heads // 8) * Q_BYTES_PER_8_HEADS + k.max_qlen * k.max_heads * 4
end

local function fragment_registers(k)
  return k.tiles_in_flight * 2 * (HEAD_DIM // 64) * 4
end

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  if smem_bytes(k) > SMEM_BUDGET then
    return false, string.format("max_qlen=%d x max_heads=%d need %d bytes of shared memory, over %d", k.max_qlen,
      k.max_heads, smem_bytes(k), SMEM_BUDGET)
  end
  if fragment_registers(k) > FRAGMENT_REGISTER_BUDGET then
    return false, string.format("tiles_in_flight=%d hold %d registers of K, over %d", k.tiles_in_flight,
      fragment_registers(k), FRAGMENT_REGISTER_BUDGET)
  end
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The built-in variants, in the order dispatch tries them (the launcher
-- picks the split count): the fewest query tokens that fit first (the
-- least q to stage per CTA), all with 64 heads (DeepSeek-V3.2's), 256
-- threads, two tiles in flight and a 512-thread filtering merge (two reads
-- of a long row, not five); the last, qlen 4, fits every shape. Not yet
-- measured: a starting point for the tuner.
function M.defaults()
  local out = {}
  for _, q in ipairs(M.kernel_domains.max_qlen) do
    local k = { max_heads = 64, max_qlen = q, threads = 256, tiles_in_flight = 2, merge_threads = 512,
      merge_filter = 1 }
    if M.constraint(k) then
      out[#out + 1] = { kernel = k, launch = { splits = 0 } }
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
  local why = space.int_fields_outside(s, { { "B", 1, 65535 }, { "H", 1, 64 }, { "qlen", 1, 4 }, { "topk", 1, 2048 },
    { "page", 1, 1024 }, { "ctx", 1, 1 << 24 } })
  if why then
    return false, why
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
  return space.check_peer(s)
end

-- ---- which variants run which shapes ------------------------------------

-- The smallest value of `domain` (ascending) that holds n, or nil.
local function bucket(domain, n)
  for _, v in ipairs(domain) do
    if v >= n then
      return v
    end
  end
  return nil
end

-- Compile-time fit: the kernel can compute this shape (and, for tuned
-- variants, is the one of its family sized for it: the smallest max_qlen
-- and max_heads that hold the shape).
function M.fits(k, s, is_default)
  if k.max_qlen < s.qlen then
    return false, string.format("max_qlen %d < qlen %d", k.max_qlen, s.qlen)
  end
  if k.max_heads < s.H then
    return false, string.format("max_heads %d < H %d", k.max_heads, s.H)
  end
  if not is_default then
    if k.max_qlen ~= bucket(M.kernel_domains.max_qlen, s.qlen) then
      return false, string.format("tuned max_qlen %d is not the smallest that holds qlen %d", k.max_qlen, s.qlen)
    end
    if k.max_heads ~= bucket(M.kernel_domains.max_heads, s.H) then
      return false, string.format("tuned max_heads %d is not the smallest that holds H %d", k.max_heads, s.H)
    end
  end
  return true
end

-- Launch choices worth timing for a shape.
function M.worth(k, l, s, _is_default)
  local splits = l.splits
  if splits == 0 then
    return true
  end
  if not space.contains(M.splits_choices, splits) then
    return false, string.format("splits=%d is not a timed choice", splits)
  end
  -- Every warp of every CTA gets at least one tile.
  local warps = k.threads // 32
  if splits > 1 and splits * warps * TILE > s.ctx then
    return false, string.format("splits=%d x %d warps x %d tokens exceed ctx %d", splits, warps, TILE, s.ctx)
  end
  if s.B * splits > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", s.B * splits, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names templates/defaults/
-- dsa_index_decode.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    max_heads = k.max_heads,
    max_qlen = k.max_qlen,
    threads = k.threads,
    tiles_in_flight = k.tiles_in_flight,
    merge_threads = k.merge_threads,
    merge_filter = k.merge_filter,
  }
end

-- "dsa_index_decode.h64.q1.t256.u2.m512f/s8" ("/auto" for splits 0; "f":
-- the filtering merge).
function M.variant_name(k, l)
  return string.format("%s.h%d.q%d.t%d.u%d.m%d%s/%s", M.name, k.max_heads, k.max_qlen, k.threads, k.tiles_in_flight,
    k.merge_threads, k.merge_filter == 1 and "f" or "", l.splits == 0 and "auto" or ("s" .. l.splits))
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
