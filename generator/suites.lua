-- suites.lua - the named shape suites.
--
-- A suite is an ordered list of {op = name, shape = {field = value}}; shape
-- fields are those of the op (generator/ops/<op>.lua check_shape).
--   m3-decode  the default decode suite: MiniMax-M3 decode shapes of the
--              indexer (index_decode) and the attention (sparse_attn_decode):
--              the anchors plus other batch sizes, contexts, KV-head counts,
--              speculative qlen 2, mixed lengths and, for the attention, the
--              other scale mode, KV layout, selections with holes and the
--              log-sum-exp output; tuned on one H100 in a few minutes, so
--              keep it near 30 index_decode and at most 14
--              sparse_attn_decode shapes.
--   m3-prefill the default prefill suite: MiniMax-M3 prefill shapes of the
--              indexer's selection (index_topk: the anchors and a mixed
--              batch), of its scores (index_score: the anchors, fp8, a
--              mixed batch, H 1 with head_dim 64 and H 4), of the two fused
--              (index_prefill: the anchor shapes, fp8, the mixed batch,
--              topk 32) and of the attention (sparse_attn): one request of 1K-16K query tokens
--              with no prefix or a 56K prefix, fp8 with both scale modes and
--              the other KV layout, and a batch of mixed requests (prefixes
--              not multiples of 128, a single-token request, selections
--              with holes, the log-sum-exp output).
--   dsv32-decode
--              DeepSeek-V3.2 decode shapes: the lightning indexer
--              (dsa_index_decode) at B 1, 32 and 128 over 8K-128K contexts,
--              mixed lengths, qlen 2 and topk 512 and 1024 beside 2048; the
--              token-sparse MLA attention (mla_sparse_decode) on FlashMLA's
--              anchor shapes (fp8 cache, 128 or 64 q heads, top-2048, qlen
--              1), a bf16 cache, speculative qlen 2, top-512 and top-1024, 16
--              and 32 q heads, per-request topk_length, and the attention
--              sink with the log-sum-exp.
--   dsv32-prefill
--              DeepSeek-V3.2 prefill: the attention (mla_sparse_prefill) on
--              FlashMLA's sparse prefill anchor shapes (4096 tokens, 128 or
--              64 q heads, top-2048, bf16 kv), 16 and 32 q heads, top-512
--              and top-1024, a kv shorter than topk, topk_length, the sink
--              with lse and max_logits, edge selections, 1 and 100 tokens;
--              the lightning indexer's logits (dsa_index_logits, 64 heads)
--              for one causal request of 4096 tokens with no prefix and
--              with a 61440-token prefix, a varlen batch of 4 requests, and
--              small edge rows (one query token, H 1 and 50, token counts no
--              tile size divides); the indexer's top-k (dsa_index_topk) over
--              such logits at top-2048, 1024 and 512, with rows shorter than
--              topk, one query token, ties and NaN.
--   anchors    exactly the rows on which the peer was timed (bench;
--              docs/method.md).
--   smoke      a few tiny shapes for quick end-to-end checks.
--   engine-decode, engine-prefill
--              a fixed design over the range engines run (32 decode steps,
--              12 prefill batches; engine_shapes.lua), to tune dispatch for
--              shapes no other suite holds.
--   random-decode:SEED:N, random-prefill:SEED:N
--              N engine-like decode steps or prefill batches drawn from
--              SEED (random_shapes.lua), held out from every suite above.

local engine_shapes = require("engine_shapes")
local random_shapes = require("random_shapes")
local space = require("space")

local M = {}

-- MiniMax-M3 indexer: 2 index heads of 128, top-16 blocks, 1 init + 2 local.
local function index_decode(dtype, B, ctx, over)
  local s = { dtype = dtype, B = B, ctx = ctx, D = 128, H = 2, qlen = 1, topk = 16, init = 1, ["local"] = 2,
    lens = "full" }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "index_decode", shape = s }
end

-- MiniMax-M3 attention: 32 q heads over 2 KV heads of 128 (16 q heads per
-- KV head), top-16 blocks, the (pages, 2, 128, Hkv, D) cache; fp8 caches
-- with one scale for K and one for V.
local function sparse_attn_decode(dtype, B, ctx, over)
  local s = { dtype = dtype, B = B, ctx = ctx, D = 128, Hq = 32, Hkv = 2, qlen = 1, topk = 16,
    scale = dtype == "fp8" and "scalar" or "none", layout = "pages2", lens = "full", sel = "random", lse = 0 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "sparse_attn_decode", shape = s }
end

-- DeepSeek-V3.2 lightning indexer: 64 index heads of 128, the top 2048
-- tokens, 64-token pages of fp8 keys with one fp32 scale each.
local function dsa_index_decode(B, ctx, over)
  local s = { B = B, ctx = ctx, H = 64, qlen = 1, topk = 2048, page = 64, lens = "full" }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "dsa_index_decode", shape = s }
end

-- DeepSeek-V3.2 lightning indexer logits for prefill: 64 index heads of
-- 128 over the index-K rows of a varlen batch "q_len:prefix;..." (each
-- request's prefix and query tokens, one request after another: kv rows in
-- all; B = the query tokens in all), each query seeing its own request's
-- rows up to its position.
local function dsa_index_logits(reqs, over)
  local rows = 0
  for q, prefix in string.gmatch(reqs, "(%d+):(%d+)") do
    rows = rows + tonumber(q) + tonumber(prefix)
  end
  local s = { B = space.request_tokens(reqs), reqs = reqs, H = 64, kv = math.tointeger(rows) }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "dsa_index_logits", shape = s }
end

-- DeepSeek-V3.2 indexer top-k for prefill (dsa_index_topk) over the logits
-- of a varlen batch `reqs` as dsa_index_logits writes them (B = the query
-- tokens, kv = the logits' columns: every request's rows), top-2048 unless
-- `over` says otherwise.
local function dsa_index_topk(reqs, over)
  local rows = 0
  for q, prefix in string.gmatch(reqs, "(%d+):(%d+)") do
    rows = rows + tonumber(q) + tonumber(prefix)
  end
  local s = { B = space.request_tokens(reqs), reqs = reqs, kv = math.tointeger(rows), topk = 2048 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "dsa_index_topk", shape = s }
end

-- MiniMax-M3 prefill attention: the decode shape's heads, a varlen batch
-- given as "q_len:prefix;..." requests (B = the query tokens in all).
local function sparse_attn(dtype, reqs, over)
  local s = { dtype = dtype, B = space.request_tokens(reqs), reqs = reqs, D = 128, Hq = 32, Hkv = 2, topk = 16,
    scale = dtype == "fp8" and "scalar" or "none", layout = "pages2", sel = "random", lse = 0 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "sparse_attn", shape = s }
end

-- MiniMax-M3 prefill indexer selection: 2 index heads, top-16, 1 init + 2
-- local blocks, over the scores of a varlen batch.
local function index_topk(reqs, over)
  local s = { B = space.request_tokens(reqs), reqs = reqs, H = 2, topk = 16, init = 1, ["local"] = 2 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "index_topk", shape = s }
end

-- MiniMax-M3 prefill indexer scores: 2 index heads of 128 over one shared
-- index-K cache.
local function index_score(dtype, reqs, over)
  local s = { dtype = dtype, B = space.request_tokens(reqs), reqs = reqs, D = 128, H = 2 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "index_score", shape = s }
end

-- The two fused: index_score's shape with index_topk's selection.
local function index_prefill(dtype, reqs, over)
  local s = { dtype = dtype, B = space.request_tokens(reqs), reqs = reqs, D = 128, H = 2, topk = 16, init = 1,
    ["local"] = 2 }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "index_prefill", shape = s }
end

-- DeepSeek-V3.2 attention: MLA with one latent KV head, 128 q heads (a
-- GPU's share without tensor parallelism), top-2048 token slots, the
-- 656-byte fp8 cache rows, pages of 64 tokens; ctx is the tokens each
-- request holds in the harness's pool.
local function mla_sparse_decode(dtype, B, over)
  local s = { dtype = dtype, B = B, Hq = 128, qlen = 1, topk = 2048, ctx = 32768, tlen = "none", sink = 0, lse = 0,
    sel = "random" }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "mla_sparse_decode", shape = s }
end

-- DeepSeek-V3.2 prefill attention: s_q query tokens, 128 q heads, each
-- token's top-2048 rows of a kv of s_kv latent rows (bf16), FlashMLA's
-- sparse prefill contract; no topk_length, sink or extra outputs unless
-- asked.
local function mla_sparse_prefill(s_q, s_kv, over)
  local s = { s_q = s_q, Hq = 128, s_kv = s_kv, topk = 2048, tlen = "none", sink = 0, lse = 0, ml = 0,
    sel = "random" }
  for k, v in pairs(over or {}) do
    s[k] = v
  end
  return { op = "mla_sparse_prefill", shape = s }
end

-- peer_us: vLLM 0.33.0's Triton kernels for MiniMax-M3 on an NVIDIA H200
-- (2026-11-28), CUDA-graph replays of the same inputs, median of 5 x 40
-- replays (decode) or 5 x 10 (prefill), as docs/method.md describes (M.get
-- names that device in each such row's peer_device). The attention reads
-- topk blocks whatever the context: its rows are timed at 32768.
local PEER_DEVICE = "NVIDIA H200"
local function anchor_rows()
  return {
    index_decode("bf16", 1, 8192, { peer_us = 9.1 }),
    index_decode("bf16", 1, 131072, { peer_us = 15.0 }),
    index_decode("bf16", 8, 8192, { peer_us = 13.2 }),
    index_decode("bf16", 8, 32768, { peer_us = 22.4 }),
    index_decode("bf16", 32, 32768, { peer_us = 63.2 }),
    index_decode("bf16", 128, 131072, { peer_us = 982.0 }),
    index_decode("fp8", 1, 8192, { peer_us = 8.9 }),
    index_decode("fp8", 8, 32768, { peer_us = 15.1 }),
    index_decode("fp8", 128, 131072, { peer_us = 502.9 }),
    sparse_attn_decode("bf16", 1, 32768, { peer_us = 7.1 }),
    sparse_attn_decode("bf16", 8, 32768, { peer_us = 10.2 }),
    sparse_attn_decode("bf16", 32, 32768, { peer_us = 25.8 }),
    sparse_attn_decode("bf16", 128, 32768, { peer_us = 73.7 }),
    sparse_attn_decode("fp8", 1, 32768, { peer_us = 9.2 }),
    sparse_attn_decode("fp8", 32, 32768, { peer_us = 25.2 }),
    sparse_attn_decode("fp8", 128, 32768, { peer_us = 80.7 }),
    sparse_attn_decode("bf16", 32, 32768, { topk = 4, peer_us = 11.5 }),
    sparse_attn_decode("bf16", 32, 32768, { topk = 32, peer_us = 41.8 }),
    sparse_attn("bf16", "4096:0", { peer_us = 857.1 }),
    sparse_attn("bf16", "16384:0", { peer_us = 4084.8 }),
    sparse_attn("bf16", "8192:57344", { peer_us = 2261.1 }),
    index_topk("4096:0", { peer_us = 14.6 }),
    index_topk("16384:0", { peer_us = 71.4 }),
    index_topk("8192:57344", { peer_us = 210.7 }),
    index_score("bf16", "4096:0", { peer_us = 34.3 }),
    index_score("bf16", "16384:0", { peer_us = 225.6 }),
    index_score("bf16", "8192:57344", { peer_us = 662.0 }),
  }
end

local function m3_prefill()
  return {
    index_topk("4096:0", { peer_us = 14.6 }),
    index_topk("16384:0", { peer_us = 71.4 }),
    index_topk("8192:57344", { peer_us = 210.7 }),
    index_topk("300:4133;1:0;1024:0;2000:20000;100:65536"),
    index_score("bf16", "4096:0", { peer_us = 34.3 }),
    index_score("bf16", "16384:0", { peer_us = 225.6 }),
    index_score("bf16", "8192:57344", { peer_us = 662.0 }),
    index_score("bf16", "1024:0"),
    index_score("fp8", "16384:0"),
    index_score("bf16", "300:4133;1:0;1024:0;2000:20000;100:65536"),
    index_score("bf16", "2048:30000", { D = 64, H = 1 }),
    index_score("bf16", "4096:0", { H = 4 }),
    -- The fused indexer on the anchor shapes: its peer is the two peer
    -- kernels it replaces (index_score + index_topk rows of the anchors).
    index_prefill("bf16", "4096:0", { peer_us = 47.2 }),
    index_prefill("bf16", "16384:0", { peer_us = 294.5 }),
    index_prefill("bf16", "8192:57344", { peer_us = 847.8 }),
    index_prefill("fp8", "16384:0"),
    index_prefill("bf16", "300:4133;1:0;1024:0;2000:20000;100:65536"),
    index_prefill("bf16", "2048:30000", { D = 64, H = 1, topk = 32, init = 2, ["local"] = 4 }),
    sparse_attn("bf16", "4096:0", { peer_us = 857.1 }),
    sparse_attn("bf16", "16384:0", { peer_us = 4084.8 }),
    sparse_attn("bf16", "8192:57344", { peer_us = 2261.1 }),
    sparse_attn("bf16", "1024:0"),
    sparse_attn("fp8", "4096:0"),
    sparse_attn("fp8", "8192:57344", { scale = "tensor", layout = "interleaved" }),
    sparse_attn("bf16", "300:4133;1:0;1024:0;2000:20000;100:65536", { sel = "holes", lse = 1 }),
  }
end

local function m3_decode()
  local rows = {}
  local function add(row)
    rows[#rows + 1] = row
  end
  for _, row in ipairs(anchor_rows()) do
    if row.op == "index_decode" or row.op == "sparse_attn_decode" then -- the prefill anchors tune in m3-prefill
      add(row)
    end
  end
  -- More contexts per batch size: decode winners are chosen by worst-case
  -- regret over the contexts of a dispatch key.
  add(index_decode("bf16", 1, 32768))
  add(index_decode("bf16", 8, 131072))
  add(index_decode("bf16", 32, 8192))
  add(index_decode("bf16", 128, 32768))
  add(index_decode("fp8", 1, 131072))
  add(index_decode("fp8", 8, 8192))
  add(index_decode("fp8", 32, 32768))
  for _, B in ipairs({ 1, 8, 32 }) do
    add(index_decode("bf16", B, 32768, { H = 1 }))
    add(index_decode("bf16", B, 32768, { H = 4 }))
    add(index_decode("bf16", B, 32768, { qlen = 2 }))
    add(index_decode("fp8", B, 32768, { qlen = 2 }))
  end
  -- Ragged batches: random lengths, unaligned ones and padding rows.
  add(index_decode("bf16", 8, 32768, { lens = "mixed" }))
  add(index_decode("bf16", 32, 32768, { lens = "mixed" }))
  -- The attention: another context, the other scale mode and KV layout,
  -- speculative qlen 2, and a ragged batch whose selections have holes and
  -- that asks for the log-sum-exp.
  add(sparse_attn_decode("bf16", 8, 131072))
  add(sparse_attn_decode("fp8", 8, 8192, { scale = "tensor", layout = "interleaved" }))
  add(sparse_attn_decode("bf16", 32, 32768, { qlen = 2 }))
  add(sparse_attn_decode("bf16", 8, 32768, { lens = "mixed", sel = "holes", lse = 1 }))
  return rows
end

-- peer_us here: FlashMLA's sparse decode kernel on an NVIDIA H200, as its
-- authors report it for these shapes.
local function mla_attention_rows()
  return {
    mla_sparse_decode("fp8", 1, { peer_us = 23.8 }),
    mla_sparse_decode("fp8", 32, { peer_us = 87.7 }),
    mla_sparse_decode("fp8", 128, { peer_us = 232.7 }),
    mla_sparse_decode("fp8", 128, { Hq = 64, peer_us = 120.9 }),
    mla_sparse_decode("fp8", 8),
    mla_sparse_decode("fp8", 32, { ctx = 131072 }),
    mla_sparse_decode("bf16", 1),
    mla_sparse_decode("bf16", 32),
    mla_sparse_decode("fp8", 32, { qlen = 2 }),
    mla_sparse_decode("fp8", 32, { topk = 512 }),
    mla_sparse_decode("fp8", 32, { topk = 1024 }),
    mla_sparse_decode("fp8", 32, { Hq = 16 }),
    mla_sparse_decode("fp8", 32, { Hq = 32 }),
    mla_sparse_decode("fp8", 32, { tlen = "random" }),
    mla_sparse_decode("fp8", 8, { sink = 1, lse = 1 }),
  }
end

-- DeepSeek-V3.2 decode: the indexer at B 1, 32 and 128 over 8K-128K
-- contexts, full and mixed lengths, speculative qlen 2, and the top 512 and
-- 1024 that engines also run; then the attention's rows.
local function dsv32_decode()
  local rows = {}
  local function add(row)
    rows[#rows + 1] = row
  end
  for _, B in ipairs({ 1, 32, 128 }) do
    for _, ctx in ipairs({ 8192, 32768, 131072 }) do
      add(dsa_index_decode(B, ctx))
    end
  end
  add(dsa_index_decode(32, 32768, { lens = "mixed" }))
  add(dsa_index_decode(32, 131072, { lens = "mixed" }))
  add(dsa_index_decode(128, 131072, { lens = "mixed" }))
  add(dsa_index_decode(1, 32768, { qlen = 2 }))
  add(dsa_index_decode(32, 32768, { qlen = 2 }))
  add(dsa_index_decode(128, 8192, { qlen = 2 }))
  add(dsa_index_decode(32, 32768, { topk = 512 }))
  add(dsa_index_decode(32, 32768, { topk = 1024 }))
  add(dsa_index_decode(1, 131072, { topk = 512 }))
  for _, row in ipairs(mla_attention_rows()) do
    add(row)
  end
  return rows
end

-- DeepSeek-V3.2 prefill attention (mla_sparse_prefill): FlashMLA's two
-- anchor shapes (peer_us: FlashMLA's sparse prefill on an NVIDIA H200, as
-- its authors report it), then 16 and 32 q heads, top-512 and top-1024, a
-- kv shorter than topk (entries repeat), per-token topk_length, the sink
-- with lse and max_logits, the edge selections, and 1 and 100 tokens.
-- Then the indexer's logits (dsa_index_logits): a causal request of 4096
-- tokens without and with a 61440-token prefix, a varlen batch, and edge
-- rows; and its top-k (dsa_index_topk) on the same requests at top-2048,
-- 1024 and 512, one query token, rows shorter than topk, and ties and NaN.
local function dsv32_prefill()
  return {
    mla_sparse_prefill(4096, 32768, { peer_us = 4115.6 }),
    mla_sparse_prefill(4096, 65536, { Hq = 64, peer_us = 2411.7 }),
    mla_sparse_prefill(4096, 32768, { Hq = 16 }),
    mla_sparse_prefill(4096, 32768, { Hq = 32 }),
    mla_sparse_prefill(4096, 32768, { topk = 512 }),
    mla_sparse_prefill(4096, 32768, { topk = 1024 }),
    mla_sparse_prefill(1024, 1000, { Hq = 64 }),
    mla_sparse_prefill(2048, 32768, { tlen = "random", lse = 1, ml = 1 }),
    mla_sparse_prefill(2048, 32768, { Hq = 64, sink = 1, lse = 1, ml = 1 }),
    mla_sparse_prefill(512, 8192, { Hq = 32, topk = 1024, sel = "edge", tlen = "random", lse = 1, ml = 1 }),
    mla_sparse_prefill(1, 32768),
    mla_sparse_prefill(100, 32768, { Hq = 64, lse = 1, ml = 1 }),
    dsa_index_logits("4096:0"),
    dsa_index_logits("4096:61440"),
    dsa_index_logits("1500:0;2000:333;300:7000;296:4133"),
    dsa_index_logits("1:4133"),
    dsa_index_logits("300:1000", { H = 1 }),
    dsa_index_logits("777:1234;5:0", { H = 50 }),
    dsa_index_topk("4096:0"),
    dsa_index_topk("4096:0", { topk = 512 }),
    dsa_index_topk("4096:0", { topk = 1024 }),
    dsa_index_topk("4096:61440"),
    dsa_index_topk("4096:61440", { topk = 512 }),
    dsa_index_topk("4096:61440", { topk = 1024 }),
    dsa_index_topk("1500:0;2000:333;300:7000;296:4133"),
    dsa_index_topk("1:4133"),
    dsa_index_topk("300:100"),
    dsa_index_topk("777:1234;5:0", { topk = 512, ties = 1, nan = 1 }),
  }
end

local function smoke()
  return {
    index_decode("bf16", 1, 1024),
    index_decode("fp8", 2, 2048, { qlen = 2, lens = "mixed" }),
    index_decode("bf16", 2, 1000, { D = 64, H = 1, topk = 8 }),
    sparse_attn_decode("bf16", 2, 1000, { topk = 4 }),
    sparse_attn("bf16", "100:0;3:130", { topk = 4 }),
    index_topk("100:0;3:130", { topk = 4, init = 1, ["local"] = 1 }),
    index_score("bf16", "100:0;3:130"),
    index_prefill("bf16", "100:0;3:130", { topk = 4, init = 1, ["local"] = 1 }),
    mla_sparse_decode("bf16", 2, { Hq = 16, topk = 64, ctx = 1000 }),
    mla_sparse_decode("fp8", 2, { Hq = 32, topk = 100, ctx = 1000, tlen = "random", sel = "edge", lse = 1 }),
    dsa_index_decode(2, 3000, { qlen = 2, topk = 512, lens = "mixed" }),
  }
end

local SUITES = {
  ["m3-decode"] = m3_decode,
  ["m3-prefill"] = m3_prefill,
  ["dsv32-decode"] = dsv32_decode,
  ["dsv32-prefill"] = dsv32_prefill,
  anchors = anchor_rows,
  smoke = smoke,
  ["engine-decode"] = engine_shapes.decode,
  ["engine-prefill"] = engine_shapes.prefill,
}

function M.names()
  local names = {}
  for name in pairs(SUITES) do
    names[#names + 1] = name
  end
  table.sort(names, space.bytewise_less)
  return names
end

-- The rows of suite `name`, or nil when there is no such suite. Every peer
-- time in these suites was measured on PEER_DEVICE. "random-decode:SEED:N"
-- and "random-prefill:SEED:N" are shapes drawn from a seed
-- (random_shapes.lua).
function M.get(name)
  local drawn = random_shapes.suite(name)
  if drawn then
    return drawn
  end
  local make = SUITES[name]
  if not make then
    return nil
  end
  local rows = make()
  for _, row in ipairs(rows) do
    if row.shape.peer_us then
      row.shape.peer_device = PEER_DEVICE
    end
  end
  return rows
end

return M
