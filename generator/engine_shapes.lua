-- engine_shapes.lua - a fixed design over the range of shapes engines run,
-- to tune dispatch on (the random shapes of random_shapes.lua, drawn from
-- the same ranges with other values, judge it).
--
--   decode()   32 decode steps, each an index_decode shape and the
--              sparse_attn_decode shape that reads its selection: 64 rows
--   prefill()  12 prefill batches, each an index_prefill and a sparse_attn
--              shape over the same requests: 24 rows
--
-- Row i takes level (a*i + b*(i//2) + c) mod n of each dimension, with
-- (a, b, c) per dimension chosen (by a search over them) so that every
-- level of every dimension appears with both dtypes, and most pairs of
-- levels of two dimensions appear (295 of the 353 pairs over the 32 decode
-- steps): dtype bf16
-- and fp8; batch 1-160 (six levels about 2.8x apart); context 2K-256K
-- (five levels, halved until batch x context is at most 4M tokens); full
-- and mixed lengths; 1-4 index / KV heads (16 q heads each); qlen 1-4 (1
-- twice as often); topk 4-32 (five levels). Prefill: 64 to 32K query tokens
-- in 1, 2 or 4 requests, prefixes of none, 4K or 64K tokens (not multiples
-- of 128).

local step_rows = require("step_rows")

local M = {}

local MAX_TOKENS = 4 * 1024 * 1024

local DTYPES = { "bf16", "fp8" }
local BATCHES = { 1, 3, 8, 24, 64, 160 }
local CONTEXTS = { 2048, 8192, 32768, 131072, 262144 }
local HEADS = { 1, 2, 3, 4 }
local QLENS = { 1, 1, 2, 3, 4 }
local TOPKS = { 4, 8, 16, 24, 32 }
local LENS = { "full", "mixed" }

-- Level (a*i + b*(i//2) + c) mod #levels of `levels` for row i (from 0);
-- d = {a, b, c}.
local function level(levels, i, d)
  return levels[(d[1] * i + d[2] * (i // 2) + d[3]) % #levels + 1]
end

-- The decode design's (a, b, c) per dimension.
local DECODE = { dtype = { 1, 0, 0 }, B = { 8, 9, 11 }, ctx = { 5, 3, 5 }, lens = { 11, 11, 8 }, heads = { 9, 7, 8 },
  qlen = { 7, 4, 6 }, topk = { 1, 7, 4 } }

function M.decode()
  local rows = {}
  for i = 0, 31 do
    local dtype = level(DTYPES, i, DECODE.dtype)
    local B = level(BATCHES, i, DECODE.B)
    local ctx = level(CONTEXTS, i, DECODE.ctx)
    while B * ctx > MAX_TOKENS do
      ctx = ctx // 2
    end
    local lens = level(LENS, i, DECODE.lens)
    local heads = level(HEADS, i, DECODE.heads)
    local qlen = level(QLENS, i, DECODE.qlen)
    local topk = level(TOPKS, i, DECODE.topk)
    step_rows.append(rows, step_rows.decode({ dtype = dtype, B = B, ctx = ctx, lens = lens, heads = heads, qlen = qlen,
      topk = topk, lse = i % 3 == 0 and 1 or 0 }))
  end
  return rows
end

local TOTALS = { 64, 1000, 4096, 12000, 32768 }
local REQUESTS = { 1, 2, 4 }
local PREFIXES = { 0, 4096 + 37, 65536 + 111 }
-- The prefill design's (a, b, c) per dimension (the first request's prefix;
-- the next requests take the next levels).
local PREFILL = { dtype = { 1, 0, 0 }, total = { 4, 6, 2 }, requests = { 6, 4, 3 }, heads = { 2, 7, 11 },
  topk = { 4, 3, 10 }, prefix = { 6, 5, 2 } }

function M.prefill()
  local rows = {}
  for i = 0, 11 do
    local dtype = level(DTYPES, i, PREFILL.dtype)
    local total = level(TOTALS, i, PREFILL.total)
    local nreq = level(REQUESTS, i, PREFILL.requests)
    local p = PREFILL.prefix
    local reqs = {}
    for r = 0, nreq - 1 do
      local q = total // nreq + (r < total % nreq and 1 or 0)
      reqs[#reqs + 1] = string.format("%d:%d", q, level(PREFIXES, i, { p[1], p[2], p[3] + r }))
    end
    local text = table.concat(reqs, ";")
    local heads = level(HEADS, i, PREFILL.heads)
    local topk = level(TOPKS, i, PREFILL.topk)
    step_rows.append(rows, step_rows.prefill({ dtype = dtype, reqs = text, heads = heads, topk = topk, lse = i % 2 }))
  end
  return rows
end

return M
