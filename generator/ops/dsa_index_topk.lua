-- ops/dsa_index_topk.lua - the variant space of dsa_index_topk
-- (DeepSeek-V3.2's indexer top-k for prefill: the topk largest logits of
-- each query row's [ks, ke) range, over dsa_index_logits' output; kernel:
-- templates/dsa_index_topk.cu, launcher: runtime/ops/dsa_index_topk.c).
--
-- A variant is a kernel config only (compile-time, baked into the source):
-- one CTA a row, no launch choice. Parameter names are the ones the C
-- launcher reads (st_dsa_index_topk_config_from_params) and the template
-- expects. Every function is pure.

local space = require("space")

local M = {}

M.name = "dsa_index_topk"
M.template = "dsa_index_topk.cu"

M.kernel_domains = {
  threads = { 256, 512, 1024 }, -- a row's CTA (powers of two: the digit scan)
  filter = { 0, 1 },            -- 1: a long range's candidates staged after one pass
}

local TOPK_MAX = 2048
local TOKENS_MAX = 1 << 24 -- the launcher's ST_DSA_INDEX_TOPK_MAX_TOKENS
local SHAPE_FIELDS = { "B", "kv", "topk", "reqs" }
-- The host-known subset the runtime dispatches on (runtime/ops/
-- dsa_index_topk.c st_dsa_index_topk_dispatch_key builds the same text):
-- B = s_q, kv = s_kv.
local DISPATCH_FIELDS = { "B", "kv", "topk" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)
-- Input patterns rather than shapes (tuner/ops/dsa_index_topk.c): pad=1
-- rows of the logits and of the output further apart than their lengths;
-- ranges=1 ks/ke pairs of every kind (empty, reversed, negative, past
-- s_kv) beside the requests'; ties=1 rows of few distinct logits (whole
-- runs equal to the k-th); nan=1 NaN, +-inf and -0 logits inside the
-- ranges.
SHAPE_FIELD_SET.pad = true
SHAPE_FIELD_SET.ranges = true
SHAPE_FIELD_SET.ties = true
SHAPE_FIELD_SET.nan = true

-- The constraints of the kernel space: every point of the domains is one.
function M.constraint(_k)
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The built-in variants, in the order dispatch tries them: 1024 threads
-- with the filter (two reads of a range longer than the staged 32K, not
-- five; the most threads for one row's passes), then 512 with it, then
-- 512 without it. Every one fits every shape. Not yet measured: a
-- starting point for the tuner.
function M.defaults()
  return {
    { kernel = { threads = 1024, filter = 1 }, launch = {} },
    { kernel = { threads = 512, filter = 1 }, launch = {} },
    { kernel = { threads = 512, filter = 0 }, launch = {} },
  }
end

-- ---- shapes ----------------------------------------------------------------

-- The logits' columns of a varlen batch "q_len:prefix[*count];...": every
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
  local why = space.int_fields_outside(s, { { "B", 1, TOKENS_MAX }, { "kv", 1, TOKENS_MAX }, { "topk", 1, TOPK_MAX } })
  if why then
    return false, why
  end
  for _, f in ipairs({ "pad", "ranges", "ties", "nan" }) do
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
    return false, string.format("shape field kv=%d is not the %s logit columns of reqs=%s", s.kv, tostring(rows),
      s.reqs)
  end
  return true
end

-- ---- which variants run which shapes ------------------------------------

-- Every variant computes every shape.
function M.fits(_k, _s, _is_default)
  return true
end

-- No launch choices.
function M.worth(_k, _l, _s, _is_default)
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names templates/defaults/
-- dsa_index_topk.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    threads = k.threads,
    filter = k.filter,
  }
end

-- "dsa_index_topk.t1024f" ("f": the filtering selection).
function M.variant_name(k, _l)
  return string.format("%s.t%d%s", M.name, k.threads, k.filter == 1 and "f" or "")
end

space.define_checks(M)
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
