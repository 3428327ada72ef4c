-- peer_decode_cases.lua - the decode steps of drawn suites as cases for the
-- peer's side-by-side harness (its `--cases FILE`: a JSON list of
-- {case, B, qlen, Hkv, topk, idx_dtype, kv_dtype, seq_lens}), so that the
-- steps `sparsetune eval` judges can be run beside vLLM's kernels on the
-- same tensors.
--
--   lua5.4 scripts/peer_decode_cases.lua random-decode:201:34 [SUITE ...] > cases.json
--
-- Lengths: "full" gives every request the context; "mixed" draws them as
-- the tuner's inputs do (tuner/ops/case_inputs.c: the first request at the
-- context, every eighth a padding row, the rest uniform in 1..context),
-- from a generator seeded by the suite's seed, with padding rows of one
-- token instead of none. Steps with 3 heads are left out, each named on
-- stderr: vLLM's index kernel takes a power of two of heads only.

local here = arg[0]:match("^(.*)/scripts/[^/]*$") or "."
package.path = here .. "/generator/?.lua;" .. package.path
local random_shapes = require("random_shapes")

-- A 64-bit linear congruential generator: uniform integers in 1..n.
local function lengths_rng(seed)
  local state = seed
  return function(n)
    state = state * 6364136223846793005 + 1442695040888963407
    return 1 + (state >> 33) % n
  end
end

local function lengths(shape, draw)
  local out = {}
  for r = 0, shape.B - 1 do
    local len = shape.ctx
    if shape.lens == "mixed" and r > 0 then
      len = r % 8 == 7 and 1 or draw(shape.ctx)
    end
    out[#out + 1] = tostring(len)
  end
  return table.concat(out, ",")
end

if #arg == 0 then
  io.stderr:write("usage: lua5.4 scripts/peer_decode_cases.lua random-decode:SEED:N [SUITE ...] > cases.json\n")
  os.exit(2)
end
local cases = {}
for _, suite in ipairs(arg) do
  local seed = tonumber(suite:match("^random%-decode:(%d+):%d+$"))
  local ok, rows = pcall(random_shapes.suite, suite)
  if not seed or not ok or not rows then
    io.stderr:write(string.format("peer_decode_cases: '%s' is not a suite random-decode:SEED:N%s\n", suite,
      ok and "" or (": " .. tostring(rows))))
    os.exit(2)
  end
  local draw = lengths_rng(seed)
  for i = 1, #rows, 2 do
    local s = rows[i].shape -- the step's index_decode row; the attention row shares its fields
    local name = string.format("%d.%d %s B%d %d H%d qlen %d topk %d %s", seed, (i + 1) // 2, s.dtype, s.B, s.ctx, s.H,
      s.qlen, s.topk, s.lens)
    if s.H == 3 then
      io.stderr:write("left out (3 heads): " .. name .. "\n")
    else
      cases[#cases + 1] = string.format('  {"case": "%s", "B": %d, "qlen": %d, "Hkv": %d, "topk": %d, ' ..
        '"idx_dtype": "%s", "kv_dtype": "%s", "seq_lens": [%s]}', name, s.B, s.qlen, s.H, s.topk, s.dtype, s.dtype,
        lengths(s, draw))
    end
  end
end
io.write("[\n" .. table.concat(cases, ",\n") .. "\n]\n")
