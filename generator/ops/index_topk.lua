-- ops/index_topk.lua - the variant space of index_topk (the indexer's block
-- selection for a varlen prefill batch, from index_score's scores; kernel:
-- templates/index_topk.cu, launcher: runtime/ops/index_topk.c).
--
-- A variant is a kernel config only: the grid is one CTA per `rows`
-- consecutive query tokens and index head. Two algorithms
-- (docs/kernels/index_topk.md): "cta" selects for `rows` rows with the
-- whole CTA through shared memory (any max_blocks; `keys` = 0); "warp"
-- gives each row a warp that holds `keys` keys per lane in registers, so
-- it takes rows of up to 32 * keys blocks (`rows` = threads / 32, one row
-- per warp). Parameter names are the ones st_index_topk_config_from_params
-- reads and the template expects. Every function is pure.

local space = require("space")

local M = {}

M.name = "index_topk"
M.template = "index_topk.cu"

M.kernel_domains = {
  algo = { "cta", "warp" },
  keys = { 0, 1, 2, 4, 8, 16, 32 }, -- warp: keys per lane (rows of <= 32*keys blocks); cta: 0
  rows = { 1, 2, 4, 8 },            -- query tokens (score rows) one CTA selects for; warp: threads / 32
  threads = { 128, 256, 512 },
  topk = { 4, 8, 16, 32, 64 },      -- capacity; buckets (cap/2, cap], 4 takes 1..4
}

-- Tuned variants cover topk capacities up to 32; 64 exists as a default only.
local TUNED_TOPK_MAX = 32
local SHAPE_FIELDS = { "B", "H", "init", "local", "reqs", "topk" }
-- The host-known subset the runtime dispatches on (st_index_topk_dispatch_key);
-- B is total_q.
local DISPATCH_FIELDS = { "B", "H", "topk" }
local BLOCK_TOKENS = 128
local LANES = 32
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  if k.algo == "cta" then
    if k.keys ~= 0 then
      return false, string.format("algo cta holds no keys per lane (keys=%d, want 0)", k.keys)
    end
    return true
  end
  if k.keys == 0 then
    return false, "algo warp needs keys >= 1"
  end
  if k.rows * LANES ~= k.threads then
    return false, string.format("algo warp has a row per warp: rows=%d is not threads/32 = %d", k.rows,
      k.threads // LANES)
  end
  return true
end

function M.kernel_space()
  local domains = {}
  for name, domain in pairs(M.kernel_domains) do
    domains[name] = domain
  end
  local topks = {}
  for _, t in ipairs(M.kernel_domains.topk) do
    if t <= TUNED_TOPK_MAX then
      topks[#topks + 1] = t
    end
  end
  domains.topk = topks
  return (space.filter(space.product(domains), M.constraint))
end

-- The fallbacks, per topk capacity in the order dispatch tries them: algo
-- warp with 4 rows of 128 threads and the fewest keys per lane that hold
-- the call's rows (the runtime's fit check refuses too few), the family
-- that won every anchor shape (docs/kernels/index_topk.md); then algo cta,
-- 4 rows of 256 threads, for any max_blocks.
function M.defaults()
  local out = {}
  for _, topk in ipairs(M.kernel_domains.topk) do
    for _, keys in ipairs(M.kernel_domains.keys) do
      if keys > 0 then
        out[#out + 1] = { kernel = { algo = "warp", keys = keys, rows = 4, threads = 128, topk = topk }, launch = {} }
      end
    end
    out[#out + 1] = { kernel = { algo = "cta", keys = 0, rows = 4, threads = 256, topk = topk }, launch = {} }
  end
  return out
end

-- ---- shapes ----------------------------------------------------------------

function M.check_shape(s)
  local fields_ok, fields_why = space.check_shape_fields(s, SHAPE_FIELDS, SHAPE_FIELD_SET, M.name)
  if not fields_ok then
    return false, fields_why
  end
  for _, f in ipairs({ "B", "H", "topk", "init", "local" }) do
    local v, lo = s[f], (f == "init" or f == "local") and 0 or 1
    if math.type(v) ~= "integer" or v < lo or (f == "topk" and v > 64) then
      return false, string.format("shape field %s=%s is out of range", f, tostring(v))
    end
  end
  if s.init + s["local"] > s.topk then
    return false, string.format("init + local = %d + %d exceed topk=%d", s.init, s["local"], s.topk)
  end
  return space.check_varlen(s)
end

-- ---- which variants run which shapes ------------------------------------

-- max_blocks of a shape as the launcher computes it: ceil(max_context / 128),
-- max_context the longest request (at least 1, as tuner/ops/case_inputs.c).
local function max_blocks(s)
  local longest = 1
  for item in string.gmatch(tostring(s.reqs) .. ";", "([^;]*);") do
    local q, prefix = string.match(item, "^(%d+):(%d+)$")
    longest = math.max(longest, math.tointeger(tonumber(q)) + math.tointeger(tonumber(prefix)))
  end
  return (longest + BLOCK_TOKENS - 1) // BLOCK_TOKENS
end

-- The smallest keys per lane of the domain whose warp holds `blocks`, or nil.
local function smallest_keys(blocks)
  for _, n in ipairs(M.kernel_domains.keys) do
    if n > 0 and LANES * n >= blocks then
      return n
    end
  end
  return nil
end

function M.fits(k, s, _is_default)
  if k.topk < s.topk or (k.topk ~= 4 and s.topk <= k.topk // 2) then
    return false, string.format("topk %d is not in the bucket of capacity %d", s.topk, k.topk)
  end
  if k.algo == "warp" then
    local blocks = max_blocks(s)
    if LANES * k.keys < blocks then
      return false, string.format("keys=%d hold rows of %d blocks, the shape has %d", k.keys, LANES * k.keys, blocks)
    end
    -- Tuned: the smallest keys that hold the rows and the next one only
    -- (more keys cost instructions on every searched bit and lane).
    local least = smallest_keys(blocks)
    if k.keys ~= least and k.keys ~= 2 * least then
      return false, string.format("keys=%d: rows of %d blocks take keys %d or %d", k.keys, blocks, least, 2 * least)
    end
  end
  return true
end

function M.worth(_k, _l, _s, _is_default)
  return true
end

-- ---- rendering and naming ------------------------------------------------

function M.render_values(k)
  return { algo_warp = k.algo == "warp" and 1 or 0, keys = k.keys, rows = k.rows, threads = k.threads, topk = k.topk }
end

-- "index_topk.k16.r4.t256" (cta), "index_topk.k16.warp.n4.t256" (warp: n =
-- keys per lane; rows = threads / 32).
function M.variant_name(k, _l)
  if k.algo == "warp" then
    return string.format("%s.k%d.warp.n%d.t%d", M.name, k.topk, k.keys, k.threads)
  end
  return string.format("%s.k%d.r%d.t%d", M.name, k.topk, k.rows, k.threads)
end

space.define_checks(M)
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
