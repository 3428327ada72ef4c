-- ops/index_topk.lua - the variant space of index_topk (the indexer's block
-- selection for a varlen prefill batch, from index_score's scores; kernel:
-- templates/index_topk.cu, launcher: runtime/ops/index_topk.c).
--
-- A variant is a kernel config only: the grid is one CTA per `rows`
-- consecutive query tokens and index head. Parameter names are the ones
-- st_index_topk_config_from_params reads and the template expects. Every
-- function is pure.

local space = require("space")

local M = {}

M.name = "index_topk"
M.template = "index_topk.cu"

M.kernel_domains = {
  rows = { 1, 2, 4, 8 },           -- query tokens (score rows) one CTA selects for, in lock step
  threads = { 128, 256, 512 },
  topk = { 4, 8, 16, 32, 64 },     -- capacity; buckets (cap/2, cap], 4 takes 1..4
}

-- Tuned variants cover topk capacities up to 32; 64 exists as a default only.
local TUNED_TOPK_MAX = 32
local SHAPE_FIELDS = { "B", "H", "init", "local", "reqs", "topk" }
-- The host-known subset the runtime dispatches on (st_index_topk_dispatch_key);
-- B is total_q.
local DISPATCH_FIELDS = { "B", "H", "topk" }
local SHAPE_FIELD_SET = { peer_us = true }
for _, f in ipairs(SHAPE_FIELDS) do
  SHAPE_FIELD_SET[f] = true
end

function M.constraint(_k)
  return true
end

function M.check_kernel(k)
  return space.check_kernel(k, M.kernel_domains, M.constraint, M.name)
end

function M.check_launch(l)
  return space.check_no_launch(l, M.name)
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

function M.launch_space(_kernel)
  return { {} }
end

-- The fallbacks: one per topk capacity, 4 rows of 256 threads.
function M.defaults()
  local out = {}
  for _, topk in ipairs(M.kernel_domains.topk) do
    out[#out + 1] = { kernel = { rows = 4, threads = 256, topk = topk }, launch = {} }
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
  local total, bad = space.request_tokens(s.reqs)
  if not total then
    return false, bad
  end
  if total ~= s.B then
    return false, string.format("shape field B=%d is not the %d query tokens of reqs=%s", s.B, total, s.reqs)
  end
  local peer_ok, peer_why = space.check_peer(s)
  if not peer_ok then
    return false, peer_why
  end
  return true
end

function M.shape_key(s)
  return M.name .. ":" .. space.canonical(s, SHAPE_FIELDS)
end

function M.dispatch_key(s)
  return M.name .. ":" .. space.canonical(s, DISPATCH_FIELDS)
end

-- ---- which variants run which shapes ------------------------------------

function M.fits(k, s, _is_default)
  if k.topk < s.topk or (k.topk ~= 4 and s.topk <= k.topk // 2) then
    return false, string.format("topk %d is not in the bucket of capacity %d", s.topk, k.topk)
  end
  return true
end

function M.worth(_k, _l, _s, _is_default)
  return true
end

function M.applies(k, l, s, is_default)
  return space.applies(M, k, l, s, is_default)
end

-- ---- rendering and naming ------------------------------------------------

function M.render_values(k)
  return { rows = k.rows, threads = k.threads, topk = k.topk }
end

-- "index_topk.k16.r4.t256".
function M.variant_name(k, _l)
  return string.format("%s.k%d.r%d.t%d", M.name, k.topk, k.rows, k.threads)
end

return M
