-- random_shapes.lua - engine-like shapes drawn from a seed, which no named
-- suite contains: what dispatch is judged on (held out from tuning).
--
--   decode(seed, n)   n decode steps, each an index_decode shape and the
--                     sparse_attn_decode shape that reads its selection
--                     (same dtype, batch, context, lengths, qlen, topk and
--                     heads): 2n rows
--   prefill(seed, n)  n prefill batches, each an index_prefill and a
--                     sparse_attn shape over the same requests: 2n rows
--
-- The draws: dtype bf16 or fp8; batch 1-256 log-uniform; max context
-- 1K-256K log-uniform (a multiple of 128), with batch x context at most 4M
-- tokens (what one GPU's cache holds); every request at the context, or
-- lengths mixed 1..context with padding rows; topk 4-32; 1-4 index / KV
-- heads of 128 (16 q heads each); qlen 1 (half the steps) to 4; fp8 caches
-- with a scale for K and one for V. Prefill: 1-4 requests of 1 to 32K query
-- tokens in all, each with no prefix or one of 1K-128K tokens (not a
-- multiple of 128).
-- The generator is splitmix64, so the shapes of a seed are the same on
-- every machine and Lua build.

local step_rows = require("step_rows")

local M = {}

local MAX_TOKENS = 4 * 1024 * 1024
local BLOCK = 128

local function rng(seed)
  local state = seed
  local function next_u64()
    state = state + 0x9e3779b97f4a7c15
    local z = state
    z = (z ~ (z >> 30)) * 0xbf58476d1ce4e5b9
    z = (z ~ (z >> 27)) * 0x94d049bb133111eb
    return z ~ (z >> 31)
  end
  local r = {}
  -- Uniform in [0, 1).
  function r.unit()
    return (next_u64() >> 11) * (1.0 / 9007199254740992.0)
  end
  -- Uniform integer in [lo, hi].
  function r.int(lo, hi)
    return lo + math.floor(r.unit() * (hi - lo + 1))
  end
  -- Log-uniform integer in [lo, hi].
  function r.log_int(lo, hi)
    local v = math.floor(math.exp(math.log(lo) + r.unit() * (math.log(hi + 1) - math.log(lo))))
    return math.max(lo, math.min(hi, v))
  end
  function r.pick(list)
    return list[r.int(1, #list)]
  end
  return r
end

local function check_args(seed, n)
  if math.type(seed) ~= "integer" or seed < 0 then
    error(string.format("random shapes: seed %s is not a non-negative integer", tostring(seed)), 0)
  end
  if math.type(n) ~= "integer" or n < 1 or n > 1000 then
    error(string.format("random shapes: count %s is not an integer in 1..1000", tostring(n)), 0)
  end
end

function M.decode(seed, n)
  check_args(seed, n)
  local r = rng(seed)
  local rows = {}
  for _ = 1, n do
    local dtype = r.pick({ "bf16", "fp8" })
    local ctx = r.log_int(1024, 262144)
    ctx = (ctx + BLOCK - 1) // BLOCK * BLOCK
    local B = r.log_int(1, math.min(256, MAX_TOKENS // ctx))
    local lens = r.pick({ "full", "mixed" })
    local topk = r.int(4, 32)
    local heads = r.int(1, 4)
    local qlen = r.unit() < 0.5 and 1 or r.int(2, 4)
    local lse = r.int(0, 1)
    step_rows.append(rows, step_rows.decode({ dtype = dtype, B = B, ctx = ctx, lens = lens, heads = heads, qlen = qlen,
      topk = topk, lse = lse }))
  end
  return rows
end

function M.prefill(seed, n)
  check_args(seed, n)
  local r = rng(seed)
  local rows = {}
  for _ = 1, n do
    local dtype = r.pick({ "bf16", "fp8" })
    local total = r.log_int(1, 32768)
    local nreq = math.min(r.int(1, 4), total)
    local reqs = {}
    local left = total
    for i = 1, nreq do
      local q = i == nreq and left or r.int(1, left - (nreq - i))
      left = left - q
      local prefix = r.unit() < 0.5 and 0 or r.log_int(1024, 131072)
      reqs[#reqs + 1] = string.format("%d:%d", q, prefix)
    end
    local text = table.concat(reqs, ";")
    local topk = r.int(4, 32)
    local heads = r.int(1, 4)
    local lse = r.int(0, 1)
    step_rows.append(rows, step_rows.prefill({ dtype = dtype, reqs = text, heads = heads, topk = topk, lse = lse }))
  end
  return rows
end

-- The rows of a suite name "random-decode:SEED:N" or "random-prefill:SEED:N";
-- nil when the name is not of that form.
function M.suite(name)
  local kind, seed, n = string.match(name, "^random%-(%a+):(%d+):(%d+)$")
  if not kind or (kind ~= "decode" and kind ~= "prefill") then
    return nil
  end
  seed, n = math.tointeger(tonumber(seed)), math.tointeger(tonumber(n))
  if not seed or not n then
    error(string.format("suite '%s': the seed and the count must be integers", name), 0)
  end
  return M[kind](seed, n)
end

return M
