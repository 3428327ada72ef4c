-- step_rows.lua - the suite rows of one engine step: a decode step is the
-- indexer's shape (index_decode) and the attention's (sparse_attn_decode)
-- that reads its selection; a prefill batch, index_prefill and sparse_attn
-- over the same requests. Both share dtype, batch, lengths, heads (index
-- heads = KV heads, 16 q heads each) and topk. Used by the drawn suites
-- (random_shapes.lua) and the fixed design (engine_shapes.lua).

local space = require("space")

local M = {}

-- s: dtype, B, ctx, lens ("full"/"mixed"), heads, qlen, topk, lse (0/1).
function M.decode(s)
  return {
    { op = "index_decode", shape = { dtype = s.dtype, B = s.B, ctx = s.ctx, D = 128, H = s.heads, qlen = s.qlen,
      topk = s.topk, init = 1, ["local"] = 2, lens = s.lens } },
    { op = "sparse_attn_decode", shape = { dtype = s.dtype, B = s.B, ctx = s.ctx, D = 128, Hq = 16 * s.heads,
      Hkv = s.heads, qlen = s.qlen, topk = s.topk, scale = s.dtype == "fp8" and "scalar" or "none",
      layout = "pages2", lens = s.lens, sel = "random", lse = s.lse } },
  }
end

-- s: dtype, reqs ("q_len:prefix;..."), heads, topk, lse (0/1).
function M.prefill(s)
  local tokens = space.request_tokens(s.reqs)
  return {
    { op = "index_prefill", shape = { dtype = s.dtype, B = tokens, reqs = s.reqs, D = 128, H = s.heads,
      topk = s.topk, init = 1, ["local"] = 2 } },
    { op = "sparse_attn", shape = { dtype = s.dtype, B = tokens, reqs = s.reqs, D = 128, Hq = 16 * s.heads,
      Hkv = s.heads, topk = s.topk, scale = s.dtype == "fp8" and "scalar" or "none", layout = "pages2",
      sel = "random", lse = s.lse } },
  }
end

-- Appends the rows of `step` to `rows`.
function M.append(rows, step)
  for _, row in ipairs(step) do
    rows[#rows + 1] = row
  end
end

return M
