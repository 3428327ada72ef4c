-- ops/index_score.lua - the variant space of index_score (the prefill
-- indexer's block scores; kernel: templates/index_score.cu, launcher:
-- runtime/ops/index_score.c, plan: docs/kernels/index_score.md).
--
-- A variant is a kernel config (the dtype of q and the index-K cache, head
-- dim, (token, head) rows per CTA, warpgroups, K stages in flight) plus a
-- launch config (`chunk_blocks`: blocks one CTA scores; 0 = the balanced
-- schedule, one CTA per SM each taking an equal run of the batch's (tile,
-- block) pairs; index_prefill, which shares the parameter, reads 0 as a
-- chunk size picked from the SM count). Parameter names are the ones
-- st_index_score_config_from_params reads and the template expects. Every
-- function is pure.

local space = require("space")

local M = {}

M.name = "index_score"
M.template = "index_score.cu"

M.kernel_domains = {
  dtype = { "bf16", "fp8" },
  head_dim = { 64, 128 },
  rows = { 128, 256 },     -- (token, head) rows of q per CTA: rows / H tokens
  warpgroups = { 1, 2 },   -- 128-thread groups issuing wgmma; one or two 64-row slices each
  stages = { 2, 3, 4 },    -- 128-token K blocks in shared memory at once
}

M.chunk_choices = { 0, 8, 16, 32, 64 }

local BLOCK_TOKENS = 128
local DTYPE_BYTES = { bf16 = 2, fp8 = 1 }
-- What one CTA may opt in to on sm_90 (227 KiB), less 1 KiB for the static
-- part (stage barriers, the tile search's scratch).
local SHARED_LIMIT = 226 * 1024
local CHUNK_MAX = 65536
local SHAPE_FIELDS = { "B", "D", "H", "dtype", "reqs" }
-- The host-known subset the runtime dispatches on (st_index_score_dispatch_key);
-- B is total_q.
local DISPATCH_FIELDS = { "B", "D", "H", "dtype" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

local function row_bytes(k)
  return k.head_dim * DTYPE_BYTES[k.dtype]
end

-- The launcher's st_index_score_smem_bytes: q tile, K stages, alignment
-- slack (index_prefill adds its lists to it).
function M.shared_bytes(k)
  return k.rows * row_bytes(k) + k.stages * BLOCK_TOKENS * row_bytes(k) + 1024
end

function M.constraint(k)
  if row_bytes(k) % 128 ~= 0 then
    return false, string.format("rows of head_dim %d %s are %d bytes, not whole 128-byte swizzle panels", k.head_dim,
      k.dtype, row_bytes(k))
  end
  local slices = k.rows // (64 * k.warpgroups)
  if slices < 1 or slices > 2 then
    return false, string.format("rows=%d make %d 64-row slices per warpgroup (warpgroups=%d), not 1 or 2", k.rows,
      slices, k.warpgroups)
  end
  local smem = M.shared_bytes(k)
  if smem > SHARED_LIMIT then
    return false, string.format("shared memory of rows=%d, stages=%d (%s, head_dim %d) = %d bytes exceeds %d", k.rows,
      k.stages, k.dtype, k.head_dim, smem, SHARED_LIMIT)
  end
  return true
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The fallbacks: one per dtype x head_dim, 128 rows on two warpgroups, three
-- stages, automatic chunks (valid for every H up to 128).
function M.defaults()
  local out = {}
  for _, dtype in ipairs(M.kernel_domains.dtype) do
    for _, head_dim in ipairs(M.kernel_domains.head_dim) do
      local k = { dtype = dtype, head_dim = head_dim, rows = 128, warpgroups = 2, stages = 3 }
      if M.constraint(k) then
        out[#out + 1] = { kernel = k, launch = { chunk_blocks = 0 } }
      end
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
  for _, f in ipairs({ "B", "D", "H" }) do
    local v = s[f]
    if math.type(v) ~= "integer" or v < 1 or v > 65535 then
      return false, string.format("shape field %s=%s is out of range", f, tostring(v))
    end
  end
  if DTYPE_BYTES[s.dtype] == nil then
    return false, string.format("shape field dtype=%s is not bf16 or fp8", tostring(s.dtype))
  end
  return space.check_varlen(s)
end

-- ---- which variants run which shapes ------------------------------------

function M.fits(k, s, _is_default)
  if k.dtype ~= s.dtype then
    return false, "dtype differs"
  end
  if k.head_dim ~= s.D then
    return false, "head_dim differs"
  end
  if s.H > k.rows then
    return false, string.format("H=%d > rows=%d", s.H, k.rows)
  end
  return true
end

function M.worth(_k, _l, _s, _is_default)
  return true
end

-- ---- rendering and naming ------------------------------------------------

function M.render_values(k)
  return {
    is_fp8 = k.dtype == "fp8" and 1 or 0,
    head_dim = k.head_dim,
    rows = k.rows,
    warpgroups = k.warpgroups,
    stages = k.stages,
  }
end

-- "index_score.bf16.d128.r256.w2.s3.c0".
function M.variant_name(k, l)
  return string.format("%s.%s.d%d.r%d.w%d.s%d.c%d", M.name, k.dtype, k.head_dim, k.rows, k.warpgroups, k.stages,
    l.chunk_blocks)
end

-- One launch parameter (index_prefill's too).
M.launch = { name = "chunk_blocks", max = CHUNK_MAX, choices = M.chunk_choices }
space.define_checks(M, M.launch)
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
