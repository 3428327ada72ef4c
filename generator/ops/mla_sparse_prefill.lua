-- ops/mla_sparse_prefill.lua - the variant space of mla_sparse_prefill
-- (DeepSeek-V3.2 token-sparse MLA attention for a prefill batch, FlashMLA's
-- sparse prefill contract; kernel: templates/mla_sparse_prefill.cu, the
-- token-sparse MLA attention of templates/common/mla_sparse_attend.cuh that
-- mla_sparse_decode shares; launcher: runtime/ops/mla_sparse_prefill.c).
--
-- The kernel parameters, their constraints and shared memory are
-- mla_sparse_decode's with a bf16 cache (ops/mla_sparse_decode.lua): the
-- kernels are the same with unpaged kv rows. A variant is a kernel config
-- plus a launch config (`splits`: CTAs per (query token, head tile), each
-- taking a range of the token's entries; 0 = the launcher picks: one wave
-- over the SMs, which with thousands of tokens is one split). Every
-- function is pure.

local space = require("space")
local decode = require("ops.mla_sparse_decode")

local M = {}

M.name = "mla_sparse_prefill"
M.template = "mla_sparse_prefill.cu"

M.kernel_domains = {
  dtype = { "bf16" }, -- kv rows of 576 bf16
  heads_per_cta = decode.kernel_domains.heads_per_cta,
  tile_tokens = decode.kernel_domains.tile_tokens,
  threads = decode.kernel_domains.threads,
  mma = decode.kernel_domains.mma,
  pipe = decode.kernel_domains.pipe,
}

M.splits_choices = decode.splits_choices
local SPLITS_MAX = 128

-- Pruning model: an H200 (132 SMs); split CTAs past 8 waves cannot win.
local SM_COUNT, MAX_WAVES = 132, 8
local MAX_TOPK = 2048
local MAX_HEADS, HEAD_ALIGN = 128, 16
local MAX_ROWS = 1 << 20 -- the launcher's ST_MLA_SPARSE_PREFILL_MAX_ROWS
-- s_q, Hq, topk: the call. s_kv: kv rows. tlen: none (no topk_length) or
-- random (per query token in 0..topk). sink, lse, ml: 0 or 1, the optional
-- attn_sink input and lse and max_logits outputs. sel: random (distinct
-- rows) or edge (also -1, >= s_kv and repeated entries).
local SHAPE_FIELDS = { "Hq", "lse", "ml", "s_kv", "s_q", "sel", "sink", "tlen", "topk" }
-- The host-known subset the runtime dispatches on
-- (runtime/ops/mla_sparse_prefill.c st_mla_sparse_prefill_dispatch_key
-- builds the same text); s_kv, sink, the outputs and topk_length are
-- run-time arguments of every kernel.
local DISPATCH_FIELDS = { "Hq", "s_q", "topk" }
local TLENS = { "none", "random" }
local SELS = { "random", "edge" }
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)

-- The constraints of the kernel space (decode's with a bf16 cache): ok, or
-- false and why.
function M.constraint(k)
  if k.dtype ~= "bf16" then
    return false, string.format("dtype=%s: kv rows are bf16", tostring(k.dtype))
  end
  return decode.constraint(k)
end

function M.kernel_space()
  return (space.filter(space.product(M.kernel_domains), M.constraint))
end

-- The fallbacks in the order dispatch tries them: decode's bf16 ones (the
-- tensor-core family with 64, 32 and 16 heads a CTA, the copies pipelined
-- where the staging buffer fits: not with 64 heads; then the CUDA-core
-- baseline, 16 heads, which takes every Hq of the contract).
function M.defaults()
  local out = {}
  for _, d in ipairs(decode.defaults()) do
    if d.kernel.dtype == "bf16" then
      out[#out + 1] = { kernel = d.kernel, launch = { splits = d.launch.splits } }
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
  local why = space.int_fields_outside(s, { { "s_q", 1, MAX_ROWS }, { "Hq", HEAD_ALIGN, MAX_HEADS },
    { "topk", 1, MAX_TOPK }, { "s_kv", 1, (1 << 31) - 1 }, { "lse", 0, 1 }, { "ml", 0, 1 }, { "sink", 0, 1 } })
  if why then
    return false, why
  end
  if s.Hq % HEAD_ALIGN ~= 0 then
    return false, string.format("shape field Hq=%d is not a multiple of %d", s.Hq, HEAD_ALIGN)
  end
  if not space.contains(TLENS, s.tlen) then
    return false, string.format("shape field tlen=%s is not none or random", tostring(s.tlen))
  end
  if not space.contains(SELS, s.sel) then
    return false, string.format("shape field sel=%s is not random or edge", tostring(s.sel))
  end
  return space.check_peer(s)
end

-- ---- which variants run which shapes ------------------------------------

function M.fits(k, s, _is_default)
  if s.Hq % k.heads_per_cta ~= 0 then
    return false, string.format("heads_per_cta %d does not divide Hq=%d", k.heads_per_cta, s.Hq)
  end
  return true
end

-- Launch choices worth timing for a shape. Unsplit prefill runs many waves
-- of CTAs by nature; splits only help where the tokens leave SMs idle.
function M.worth(k, l, s, _is_default)
  local splits = l.splits
  if splits == 0 or splits == 1 then
    return true
  end
  if not space.contains(M.splits_choices, splits) then
    return false, string.format("splits=%d is not a timed choice", splits)
  end
  if splits * k.tile_tokens > s.topk then
    return false, string.format("splits=%d leave less than a tile of %d of topk=%d each", splits, k.tile_tokens,
      s.topk)
  end
  local ctas = s.s_q * (s.Hq // k.heads_per_cta) * splits
  if ctas > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", ctas, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names
-- templates/defaults/mla_sparse_prefill.cuh declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    heads_per_cta = k.heads_per_cta,
    tile_tokens = k.tile_tokens,
    threads = k.threads,
    mma = k.mma or 0,
    pipe = k.pipe or 0,
  }
end

-- "mla_sparse_prefill.bf16.h64.t64.n512.mma/auto" (as mla_sparse_decode's
-- names).
function M.variant_name(k, l)
  return decode.variant_name_of(M.name, k, l)
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
