-- ops/index_prefill.lua - the variant space of index_prefill (the prefill
-- indexer in one call; kernels: templates/index_prefill.cu, launcher:
-- runtime/ops/index_prefill.c).
--
-- A variant is index_score's (dtype, head_dim, rows, warpgroups, stages;
-- launch chunk_blocks) plus `algo`: fused (index_score's loop keeping each
-- row's best blocks in shared-memory lists of capacity `topk`, then a
-- merge; the score matrix is never written) or composed (every block's key
-- to the workspace, then index_topk's warp selection; `topk` is 64, any
-- call's). The scoring space and its checks are index_score's. Every
-- function is pure.

local space = require("space")
local score = require("ops.index_score")

local M = {}

M.name = "index_prefill"
M.template = "index_prefill.cu"

M.kernel_domains = {}
for name, domain in pairs(score.kernel_domains) do
  M.kernel_domains[name] = domain
end
M.kernel_domains.topk = { 16, 32, 64 } -- fused list capacity; buckets (cap/2, cap], 16 takes 1..16
M.kernel_domains.algo = { "fused", "composed" }

-- index_score's limit: 227 KiB less 1 KiB for the static part.
local SHARED_LIMIT = 226 * 1024
local SHAPE_FIELDS = { "B", "D", "H", "dtype", "init", "local", "reqs", "topk" }
local DISPATCH_FIELDS = { "B", "D", "H", "dtype", "topk" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

-- The launcher's st_index_prefill_smem_bytes: row lists (keys and block
-- ids, topk + 1 words per row), then index_score's CTA.
local function list_bytes(k)
  return k.algo == "fused" and 2 * k.rows * (k.topk + 1) * 4 or 0
end

-- Rows the composed merge selects from: 1024 blocks, 131072 tokens (the
-- launcher's ST_INDEX_PREFILL_COMPOSED_MAX_BLOCKS).
local COMPOSED_MAX_BLOCKS = 1024

function M.constraint(k)
  local ok, why = score.constraint(k)
  if not ok then
    return false, why
  end
  if k.algo == "composed" and k.topk ~= 64 then
    return false, string.format("algo composed takes any topk: its topk is 64, not %d", k.topk)
  end
  local smem = list_bytes(k) + score.shared_bytes(k)
  if smem > SHARED_LIMIT then
    return false, string.format("shared memory of rows=%d, stages=%d, topk=%d (%s, head_dim %d) = %d bytes exceeds %d",
      k.rows, k.stages, k.topk, k.dtype, k.head_dim, smem, SHARED_LIMIT)
  end
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The fallbacks: index_score's, composed (the runtime's first choice where
-- the context fits it) and fused for each list capacity (the largest stage
-- count that fits beside the lists).
function M.defaults()
  local out = {}
  for _, d in ipairs(score.defaults()) do
    local composed = { algo = "composed", topk = 64 }
    for name, v in pairs(d.kernel) do
      composed[name] = v
    end
    out[#out + 1] = { kernel = composed, launch = d.launch }
    for _, topk in ipairs(M.kernel_domains.topk) do
      local chosen
      for stages = d.kernel.stages, 2, -1 do
        local k = { algo = "fused" }
        for name, v in pairs(d.kernel) do
          k[name] = v
        end
        k.topk, k.stages = topk, stages
        if not chosen and M.constraint(k) then
          chosen = k
        end
      end
      if not chosen then
        error(string.format("%s: no default for %s head_dim %d topk %d", M.name, d.kernel.dtype, d.kernel.head_dim,
          topk), 0)
      end
      out[#out + 1] = { kernel = chosen, launch = d.launch }
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
  local scoring = {}
  for _, f in ipairs({ "B", "D", "H", "dtype", "reqs", "peer_us", "peer_device" }) do
    scoring[f] = s[f]
  end
  local ok, why = score.check_shape(scoring)
  if not ok then
    return false, why
  end
  for _, f in ipairs({ "topk", "init", "local" }) do
    local v, lo = s[f], f == "topk" and 1 or 0
    if math.type(v) ~= "integer" or v < lo or v > 64 then
      return false, string.format("shape field %s=%s is out of range", f, tostring(v))
    end
  end
  if s.init + s["local"] > s.topk then
    return false, string.format("init + local = %d + %d exceed topk=%d", s.init, s["local"], s.topk)
  end
  return true
end

-- ---- which variants run which shapes ------------------------------------

function M.fits(k, s, is_default)
  local ok, why = score.fits(k, s, is_default)
  if not ok then
    return false, why
  end
  if k.algo == "composed" then
    return true
  end
  if k.topk < s.topk or (k.topk ~= 16 and s.topk <= k.topk // 2) then
    return false, string.format("topk %d is not in the bucket of capacity %d", s.topk, k.topk)
  end
  return true
end

-- A merge warp holds 512 candidates of a row: chunks of its context x
-- topk (the launcher's ST_INDEX_PREFILL_MERGE_MAX; automatic chunks are
-- raised to fit, explicit ones that do not are not worth generating).
local MERGE_MAX = 512

local function max_blocks(reqs)
  local most = 1
  for q, prefix in string.gmatch(reqs, "(%d+):(%d+)") do
    most = math.max(most, tonumber(q) + tonumber(prefix))
  end
  return (most + 127) // 128
end

function M.worth(k, l, s, _is_default)
  local c, blocks = l.chunk_blocks, max_blocks(s.reqs)
  if k.algo == "composed" then
    if blocks > COMPOSED_MAX_BLOCKS then
      return false, string.format("composed rows of %d blocks exceed %d", blocks, COMPOSED_MAX_BLOCKS)
    end
    return true
  end
  if c > 0 and c < blocks and (blocks + c - 1) // c * s.topk > MERGE_MAX then
    return false, string.format("chunk_blocks=%d: %d chunks x topk %d exceed the merge's %d candidates", c,
      (blocks + c - 1) // c, s.topk, MERGE_MAX)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

function M.render_values(k)
  local v = score.render_values(k)
  v.topk = k.topk
  v.fused = k.algo == "fused" and 1 or 0
  return v
end

-- "index_prefill.fused.bf16.d128.r256.w2.s2.k16.c0",
-- "index_prefill.composed.bf16.d128.r256.w2.s2.c0".
function M.variant_name(k, l)
  local lists = k.algo == "fused" and string.format(".k%d", k.topk) or ""
  return string.format("%s.%s.%s.d%d.r%d.w%d.s%d%s.c%d", M.name, k.algo, k.dtype, k.head_dim, k.rows, k.warpgroups,
    k.stages, lists, l.chunk_blocks)
end

space.define_checks(M, score.launch)
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
