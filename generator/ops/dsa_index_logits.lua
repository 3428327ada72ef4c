-- ops/dsa_index_logits.lua - the variant space of dsa_index_logits
-- (DeepSeek-V3.2's lightning indexer logits for prefill: every query token
-- against the fp8 index-K rows of its [ks, ke) range; kernel:
-- templates/dsa_index_logits.cu, launcher: runtime/ops/dsa_index_logits.c).
--
-- A variant is a kernel config (compile-time, baked into the source) plus a
-- launch config (`splits`: token slices per query tile; 0 = the launcher
-- picks). Parameter names are the ones the C launcher reads
-- (st_dsa_index_logits_config_from_params) and the template expects.
-- Every function is pure.

local space = require("space")

local M = {}

M.name = "dsa_index_logits"
M.template = "dsa_index_logits.cu"

M.kernel_domains = {
  max_heads = { 16, 32, 64 },  -- heads scored per query (H <= max_heads)
  queries = { 1, 2, 4, 8 },    -- query tokens a CTA scores (q held in registers)
  head_tiles = { 1, 2 },       -- 16-head mma row tiles a warp holds (32 registers each)
  tokens = { 64, 128 },        -- index-K rows of one shared-memory tile
  threads = { 128, 256, 512 },
  stages = { 2, 3, 4 },        -- K tiles in flight (cp.async)
}

-- Launch choices timed: auto and powers of two (bounded per shape below).
M.splits_choices = { 0, 1, 2, 4, 8, 16, 32, 64 }
local SPLITS_MAX = 65535

local HEAD_DIM = 128
local HEADS_PER_TILE = 16
local WARP_STEP = 16 -- tokens a warp scores at a time
-- What one CTA may opt in to on sm_90 (227 KiB); kept to half of it so
-- that two CTAs share a multiprocessor, as the registers' cap assumes.
local SMEM_BUDGET = 113 * 1024
-- Pruning model: an H200 (132 SMs); more than 16 waves of CTAs cannot win.
local SM_COUNT, MAX_WAVES = 132, 16
local SHAPE_FIELDS = { "B", "H", "kv", "reqs" }
-- The host-known subset the runtime dispatches on (runtime/ops/
-- dsa_index_logits.c st_dsa_index_logits_dispatch_key builds the same text):
-- B = s_q, kv = s_kv.
local DISPATCH_FIELDS = { "B", "H", "kv" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)
-- GPU tests only, input patterns rather than shapes: pad=1 rows of k and
-- of the logits further apart than their lengths; ranges=1 ks/ke pairs of
-- every kind (empty, reversed, negative, past s_kv) beside the requests';
-- nan=1 NaN values in k.
SHAPE_FIELD_SET.pad = true
SHAPE_FIELD_SET.ranges = true
SHAPE_FIELD_SET.nan = true

local function head_groups(k)
  return k.max_heads // (HEADS_PER_TILE * k.head_tiles)
end

-- The launcher's st_dsa_index_logits_smem_bytes.
function M.smem_bytes(k)
  return k.stages * k.tokens * (HEAD_DIM + 4) + k.queries * head_groups(k) * k.tokens * 4
end

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  if k.max_heads % (HEADS_PER_TILE * k.head_tiles) ~= 0 then
    return false, string.format("max_heads=%d is not whole head_tiles=%d of %d heads", k.max_heads, k.head_tiles,
      HEADS_PER_TILE)
  end
  local warps, groups = k.threads // 32, k.queries * head_groups(k)
  if warps % groups ~= 0 then
    return false, string.format("threads=%d make %d warps, not a multiple of queries=%d x %d head groups", k.threads,
      warps, k.queries, head_groups(k))
  end
  local token_groups = warps // groups
  if (k.tokens // WARP_STEP) % token_groups ~= 0 then
    return false, string.format("%d token groups do not divide the %d steps of tokens=%d", token_groups,
      k.tokens // WARP_STEP, k.tokens)
  end
  if M.smem_bytes(k) > SMEM_BUDGET then
    return false, string.format("stages=%d x tokens=%d need %d bytes of shared memory, over %d", k.stages, k.tokens,
      M.smem_bytes(k), SMEM_BUDGET)
  end
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The built-in variants, in the order dispatch tries them (the launcher
-- picks the split count): the fewest heads that hold H first (no math on
-- absent heads), each with 8 warps of 256 threads, 128-token tiles three
-- deep and as many queries as 8 warps hold with each warp's q in
-- registers; the last, 64 heads (DeepSeek-V3.2's), fits every shape. Not
-- yet measured: a starting point for the tuner.
function M.defaults()
  local out = {}
  local function add(k)
    if M.constraint(k) then
      out[#out + 1] = { kernel = k, launch = { splits = 0 } }
    end
  end
  add({ max_heads = 16, queries = 8, head_tiles = 1, tokens = 128, threads = 256, stages = 3 })
  add({ max_heads = 32, queries = 8, head_tiles = 2, tokens = 128, threads = 256, stages = 3 })
  add({ max_heads = 64, queries = 4, head_tiles = 2, tokens = 128, threads = 256, stages = 3 })
  return out
end

-- ---- shapes ----------------------------------------------------------------

-- The index-K rows of a varlen batch "q_len:prefix[*count];...": every
-- request's prefix and query tokens, one after another.
local function request_rows(reqs)
  local total = 0
  for item in string.gmatch(tostring(reqs) .. ";", "([^;]*);") do
    local q, prefix, rest = string.match(item, "^(%d+):(%d+)(.*)$")
    local count = rest == "" and 1 or math.tointeger(tonumber(string.match(rest or "", "^%*(%d+)$")))
    if not q or not count then
      return nil
    end
    total = total + (math.tointeger(tonumber(q)) + math.tointeger(tonumber(prefix))) * count
  end
  return total
end

function M.check_shape(s)
  local fields_ok, fields_why = space.check_shape_fields(s, SHAPE_FIELDS, SHAPE_FIELD_SET, M.name)
  if not fields_ok then
    return false, fields_why
  end
  local why = space.int_fields_outside(s, { { "B", 1, 1 << 24 }, { "H", 1, 64 }, { "kv", 1, 1 << 24 } })
  if why then
    return false, why
  end
  for _, f in ipairs({ "pad", "ranges", "nan" }) do
    if s[f] ~= nil and s[f] ~= 0 and s[f] ~= 1 then
      return false, string.format("shape field %s=%s is not 0 or 1", f, tostring(s[f]))
    end
  end
  local ok, bad = space.check_varlen(s)
  if not ok then
    return false, bad
  end
  local rows = request_rows(s.reqs)
  if rows ~= s.kv then
    return false, string.format("shape field kv=%d is not the %s index-K rows of reqs=%s", s.kv, tostring(rows),
      s.reqs)
  end
  return true
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
-- variants, is the one of its family sized for it: the smallest max_heads
-- that holds H).
function M.fits(k, s, is_default)
  if k.max_heads < s.H then
    return false, string.format("max_heads %d < H %d", k.max_heads, s.H)
  end
  if not is_default and k.max_heads ~= bucket(M.kernel_domains.max_heads, s.H) then
    return false, string.format("tuned max_heads %d is not the smallest that holds H %d", k.max_heads, s.H)
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
  -- Every slice gets at least one tile.
  if splits > 1 and splits * k.tokens > s.kv then
    return false, string.format("splits=%d x tokens=%d exceed kv %d", splits, k.tokens, s.kv)
  end
  local query_tiles = (s.B + k.queries - 1) // k.queries
  if splits > 1 and query_tiles * splits > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", query_tiles * splits, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names templates/defaults/
-- dsa_index_logits.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    max_heads = k.max_heads,
    queries = k.queries,
    head_tiles = k.head_tiles,
    tokens = k.tokens,
    threads = k.threads,
    stages = k.stages,
  }
end

-- "dsa_index_logits.h64.q4.m2.k128.t256.s3/auto" ("/s8" for 8 splits).
function M.variant_name(k, l)
  return string.format("%s.h%d.q%d.m%d.k%d.t%d.s%d/%s", M.name, k.max_heads, k.queries, k.head_tiles, k.tokens,
    k.threads, k.stages, l.splits == 0 and "auto" or ("s" .. l.splits))
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
