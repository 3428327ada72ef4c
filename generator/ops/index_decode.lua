-- ops/index_decode.lua - the variant space of index_decode (lightning-indexer
-- block selection for a decode batch; kernel: templates/index_decode.cu,
-- launcher: runtime/ops/index_decode.c).
--
-- A variant is a kernel config (compile-time, baked into the source) plus a
-- launch config (`splits`: CTAs per (request, head group); 0 = the launcher
-- picks). Parameter names here are the ones the C launcher reads
-- (st_index_decode_config_from_params) and the template expects.
-- Every function is pure.

local space = require("space")

local M = {}

M.name = "index_decode"
M.template = "index_decode.cu"

M.kernel_domains = {
  dtype = { "bf16", "fp8" },
  head_dim = { 64, 128 },
  topk = { 4, 8, 16, 32, 64 }, -- capacity; buckets (cap/2, cap], 4 takes 1..4
  heads_per_cta = { 1, 2, 4 },
  max_qlen = { 1, 2, 3, 4 },
  threads = { 128, 256 },
  units_in_flight = { 1, 2, 4, 8 },
  -- 0: K rows loaded straight into registers; N: whole blocks copied by the
  -- bulk copy engine into N shared-memory stages (units_in_flight unused: 1).
  bulk_stages = { 0, 2, 4 },
  algo = { "single", "split" },
}

-- Tuned variants cover topk capacities up to 32; 64 exists as a default only.
local TUNED_TOPK_MAX = 32
-- Launch choices timed: auto and powers of two (bounded per shape below).
M.splits_choices = { 0, 1, 2, 4, 8, 16, 32, 64, 128, 256 }
local SPLITS_MAX = 1024

local BLOCK_TOKENS = 128
local DTYPE_BYTES = { bf16 = 2, fp8 = 1 }
-- Two mma column tiles of 8: heads x query tokens one CTA scores.
local MAX_COLUMNS = 16
-- Registers per thread for K fragments in flight: each unit holds a 16-token
-- tile, head_dim * bytes / 8 registers of it per thread. 128 leaves room for
-- the rest of the kernel under the 255-register limit; more bytes in flight
-- per warp is what small batches need (docs/kernels/index_decode.md), and
-- the tuner weighs that against the lower occupancy.
local FRAGMENT_REGISTER_BUDGET = 128
-- Pruning model: an H100 (132 SMs); more than 8 waves of CTAs cannot win.
local SM_COUNT, MAX_WAVES = 132, 8
local SHAPE_FIELDS = { "B", "D", "H", "ctx", "dtype", "init", "lens", "local", "qlen", "topk" }
-- The host-known subset the runtime dispatches on (runtime/ops/index_decode.c
-- st_index_decode_dispatch_key builds the same text).
-- ctx: the tuned context, which the runtime matches with the call's
-- max_context (nearest in log2 distance with B when not exact).
local DISPATCH_FIELDS = { "B", "D", "H", "ctx", "dtype", "qlen", "topk" }
local LENS = { "full", "mixed" }
-- The fields, and the peer's facts (space.shape_field_set).
local SHAPE_FIELD_SET = space.shape_field_set(SHAPE_FIELDS)
-- ties=1 (GPU tests): every index-K row equal, so all blocks tie; an input
-- pattern, not a shape.
SHAPE_FIELD_SET.ties = true

local function fragment_registers(k)
  return k.head_dim * DTYPE_BYTES[k.dtype] // 8
end

-- The constraints of the kernel space: ok, or false and why.
function M.constraint(k)
  local cols = k.heads_per_cta * k.max_qlen
  if cols > MAX_COLUMNS then
    return false, string.format("heads_per_cta*max_qlen = %d*%d = %d columns exceed %d", k.heads_per_cta,
      k.max_qlen, cols, MAX_COLUMNS)
  end
  local bulk = k.bulk_stages or 0 -- absent in variants recorded before bulk copies
  if bulk > 0 and k.units_in_flight ~= 1 then
    return false, string.format("bulk_stages=%d copies whole blocks to shared memory: units_in_flight=%d must be 1",
      bulk, k.units_in_flight)
  end
  local regs = k.units_in_flight * fragment_registers(k)
  if regs > FRAGMENT_REGISTER_BUDGET then
    return false, string.format("units_in_flight=%d x %d registers (%s, head_dim %d) = %d exceed the budget of %d",
      k.units_in_flight, fragment_registers(k), k.dtype, k.head_dim, regs, FRAGMENT_REGISTER_BUDGET)
  end
  return true
end

-- The tuned kernel configs: the domains with topk <= 32, within constraints.
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

-- The fallbacks, per dtype x head_dim x topk bucket in the order dispatch
-- tries them (the launcher picks the split count): the family that won the
-- anchors (docs/kernels/index_decode.md), whole blocks copied by the bulk
-- copy engine, with as many heads a CTA as divide H (4, 2 or 1: the heads
-- share K, so each CTA's read of a block serves them all) and as many
-- query tokens a CTA as the call has, 1, 2 or 4 (the columns of scores a
-- CTA computes are heads x max_qlen: a q4 kernel at qlen 2 wastes half);
-- fp8 blocks (half the bytes) on 128 threads, which won 8 of 11 random
-- fp8 shapes (docs/kernels/index_decode.md, "Built-in variants on random
-- shapes"), except for 8 or more columns a CTA at loads up to 32, where
-- 256 threads won (docs/kernels/index_decode.md, "Held out again"); then
-- loads into registers, valid for every shape of the kind.
function M.defaults()
  local out = {}
  for _, dtype in ipairs(M.kernel_domains.dtype) do
    for _, head_dim in ipairs(M.kernel_domains.head_dim) do
      for _, topk in ipairs(M.kernel_domains.topk) do
        for _, heads in ipairs({ 4, 2, 1 }) do
          for _, max_qlen in ipairs({ 1, 2, 4 }) do
            local fast = { dtype = dtype, head_dim = head_dim, topk = topk, heads_per_cta = heads,
              max_qlen = max_qlen, threads = dtype == "fp8" and 128 or 256, units_in_flight = 1, bulk_stages = 2,
              algo = "split" }
            if M.constraint(fast) then
              -- More heads a CTA only where the CTAs stay at least half
              -- a wave: R x (H / heads) x blocks >= SMs / 2, that is a
              -- load (runtime/ops/index_decode.c) above heads / 2. Four
              -- heads of 3-4 query tokens (16 columns a CTA) only above
              -- 32 (bf16) or 128 (fp8): below, two heads a CTA won every
              -- such call (docs/kernels/index_decode.md, "Query tokens a
              -- kernel", "Held out again").
              local lo = heads > 1 and heads / 2 or 0
              if heads == 4 and max_qlen == 4 then
                lo = dtype == "fp8" and 128 or 32
              end
              local load = lo > 0 and { lo, 1e9 } or nil
              if dtype == "fp8" and heads * max_qlen >= 8 and lo < 32 then
                local wide = {}
                for name, v in pairs(fast) do
                  wide[name] = v
                end
                wide.threads = 256
                out[#out + 1] = { kernel = wide, launch = { splits = 0 }, load = { lo, 32 } }
              end
              out[#out + 1] = { kernel = fast, launch = { splits = 0 }, load = load }
            end
          end
        end
        local k = { dtype = dtype, head_dim = head_dim, topk = topk, heads_per_cta = 1, max_qlen = 4,
          threads = 256, bulk_stages = 0, algo = "single" }
        for _, u in ipairs({ 2, 1 }) do
          k.units_in_flight = u
          if M.constraint(k) then
            break
          end
        end
        out[#out + 1] = { kernel = k, launch = { splits = 0 } }
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
  local why = space.int_fields_outside(s, { { "B", 1, 65535 }, { "D", 16, 512 }, { "H", 1, 65535 }, { "qlen", 1, 4 },
    { "topk", 1, 64 }, { "init", 0, 64 }, { "local", 0, 64 }, { "ctx", 1 } })
  if why then
    return false, why
  end
  if DTYPE_BYTES[s.dtype] == nil then
    return false, string.format("shape field dtype=%s is not bf16 or fp8", tostring(s.dtype))
  end
  if not space.contains(LENS, s.lens) then
    -- An explicit list "1;127;0;4133": one length per request, each <= ctx.
    local n = 0
    for len in string.gmatch(tostring(s.lens) .. ";", "([^;]*);") do
      local v = math.tointeger(tonumber(len))
      if not v or v < 0 or v > s.ctx then
        return false, string.format("shape field lens=%s is not full, mixed or a list of lengths in 0..ctx",
          tostring(s.lens))
      end
      n = n + 1
    end
    if n ~= s.B then
      return false, string.format("shape field lens=%s lists %d lengths for B=%d", tostring(s.lens), n, s.B)
    end
  end
  local peer_ok, peer_why = space.check_peer(s)
  if not peer_ok then
    return false, peer_why
  end
  if s.init + s["local"] > s.topk then
    return false, string.format("init + local = %d + %d exceed topk=%d", s.init, s["local"], s.topk)
  end
  return true
end

-- ---- which variants run which shapes ------------------------------------

-- Compile-time fit: the kernel can compute this shape (and, for tuned
-- variants, is one worth compiling for it).
function M.fits(k, s, is_default)
  if k.dtype ~= s.dtype then
    return false, "dtype differs"
  end
  if k.head_dim ~= s.D then
    return false, "head_dim differs"
  end
  if k.topk < s.topk or (k.topk ~= 4 and s.topk <= k.topk // 2) then
    return false, string.format("topk %d is not in the bucket of capacity %d", s.topk, k.topk)
  end
  if s.H % k.heads_per_cta ~= 0 then
    return false, string.format("heads_per_cta %d does not divide H=%d", k.heads_per_cta, s.H)
  end
  if k.max_qlen < s.qlen then
    return false, string.format("max_qlen %d < qlen %d", k.max_qlen, s.qlen)
  end
  if not is_default and k.max_qlen ~= s.qlen and k.max_qlen ~= 4 then
    return false, string.format("tuned max_qlen %d is neither qlen %d nor 4", k.max_qlen, s.qlen)
  end
  return true
end

-- Launch choices worth timing for a shape (the variant list is per
-- (kernel, splits)).
function M.worth(k, l, s, is_default)
  local splits = l.splits
  if splits == 0 then
    if k.algo == "split" and not is_default then
      return false, "algo split needs explicit splits >= 2 (the launcher's choice is timed as a default's)"
    end
    return true
  end
  if not space.contains(M.splits_choices, splits) then
    return false, string.format("splits=%d is not a timed choice", splits)
  end
  if k.algo == "split" and splits < 2 then
    return false, "algo split needs splits >= 2"
  end
  local blocks = (s.ctx + BLOCK_TOKENS - 1) // BLOCK_TOKENS
  if splits > blocks then
    return false, string.format("splits=%d exceed the %d blocks of ctx %d", splits, blocks, s.ctx)
  end
  local ctas = s.B * splits * (s.H // k.heads_per_cta)
  if ctas > MAX_WAVES * SM_COUNT then
    return false, string.format("%d CTAs exceed %d waves of %d SMs", ctas, MAX_WAVES, SM_COUNT)
  end
  return true
end

-- ---- rendering and naming ------------------------------------------------

-- The template's values (exactly the names templates/defaults/index_decode.cuh
-- declares, as ST_P_<NAME>).
function M.render_values(k)
  return {
    is_fp8 = k.dtype == "fp8" and 1 or 0,
    head_dim = k.head_dim,
    topk = k.topk,
    heads_per_cta = k.heads_per_cta,
    max_qlen = k.max_qlen,
    threads = k.threads,
    units_in_flight = k.units_in_flight,
    bulk_stages = k.bulk_stages or 0,
    algo_split = k.algo == "split" and 1 or 0,
  }
end

-- "index_decode.bf16.d128.k16.h1.q1.t256.u2.single/s8" ("/auto" for splits 0);
-- bulk variants say ".b<stages>" after the units: "...t256.u1.b2.single/s8".
function M.variant_name(k, l)
  local bulk = (k.bulk_stages or 0) > 0 and (".b" .. k.bulk_stages) or ""
  return string.format("%s.%s.d%d.k%d.h%d.q%d.t%d.u%d%s.%s/%s", M.name, k.dtype, k.head_dim, k.topk,
    k.heads_per_cta, k.max_qlen, k.threads, k.units_in_flight, bulk, k.algo,
    l.splits == 0 and "auto" or ("s" .. l.splits))
end

space.define_checks(M, { name = "splits", max = SPLITS_MAX, choices = M.splits_choices })
space.define_keys(M, SHAPE_FIELDS, DISPATCH_FIELDS)

return M
