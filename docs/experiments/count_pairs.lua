-- count_pairs.lua - the (variant, shape) pairs a tune of SUITE times for
-- OP, counted from the generator alone (no build, no GPU): what the
-- README's main job's time scales with.
--   lua5.4 docs/experiments/count_pairs.lua generator m3-prefill sparse_attn
-- (Debian: apt-get install lua5.4.)
local dir, suite, op_name = arg[1], arg[2], arg[3]
package.path = dir .. "/?.lua;" .. package.path
local suites = require("suites")
local variants = require("variants")
local op = require("ops." .. op_name)
local shapes = {}
for _, row in ipairs(suites.get(suite)) do
  if row.op == op_name then
    shapes[#shapes + 1] = row.shape
  end
end
local list, pairs_n = variants.list(op, shapes), 0
for _, v in ipairs(list) do
  for _, s in ipairs(shapes) do
    if op.applies(v.kernel, v.launch, s, v.is_default) then
      pairs_n = pairs_n + 1
    end
  end
end
print(string.format("%s %s: %d shapes, %d variants, %d pairs", suite, op_name, #shapes, #list, pairs_n))
