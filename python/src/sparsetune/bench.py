"""python -m sparsetune.bench: MiniMax-M3 decode steps (index_decode then
sparse_attn_decode) through the torch ops, timed as CUDA-graph replays, and,
where vLLM's M3 ops are importable (--peer DIR: a folder holding m3_index.py
and m3_attn.py with their imports), the peer beside them on the same tensors.

    python -m sparsetune.bench --cases anchors
    python -m sparsetune.bench --cases random:7:20 --peer .peer --json

Per step: our time and the peer's (median of --reps replays of a graph of
--iters steps, per step), their ratio, and how far the two agree (the share
of top-k rows choosing the same blocks, the largest difference of the
attention outputs). Then the geometric mean of the ratios. With --overhead,
the host time of one eager call of each wrapper against the bare C call
(ctypes, arguments built once), and a replay of the step compiled with
torch.compile(fullgraph=True) against the bare C calls captured alike.
"""
import argparse
import ctypes
import importlib
import json
import math
import random
import statistics
import sys
import time

import torch

import sparsetune
from . import _abi, _registry
from . import ops as st

BLK = _abi.ST_BLOCK_TOKENS
GROUP, HEAD_DIM = 16, 128  # M3: 16 q heads a KV head, head_dim 128

# (dtype, batch, context) of the decode anchors: 2 KV heads, topk 16, qlen 1.
ANCHORS = [(dt, b, ctx) for dt in ("bf16", "fp8") for b, ctx in
           ((1, 32768), (8, 32768), (32, 32768), (32, 131072), (128, 131072))]


def anchor_cases():
    return [dict(dtype=dt, lens=[ctx] * b, heads=2, topk=16, qlen=1) for dt, b, ctx in ANCHORS]


def random_cases(seed, n):
    """Engine-like decode steps: batch 1-256 (log-uniform), contexts
    1K-128K log-uniform per request (mixed) or one length for all, topk
    4-32, 1-4 KV heads, qlen 1-4, bf16 or fp8."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = int(round(math.exp(rng.uniform(0, math.log(256)))))
        mixed = rng.random() < 0.5
        draw = lambda: int(math.exp(rng.uniform(math.log(1024), math.log(131072))))  # noqa: E731
        lens = [draw() for _ in range(b)] if mixed else [draw()] * b
        out.append(dict(dtype=rng.choice(("bf16", "fp8")), lens=lens, heads=rng.randint(1, 4),
                        topk=rng.randint(4, 32), qlen=rng.randint(1, 4)))
    return out


def parse_cases(text):
    if text == "anchors":
        return anchor_cases()
    parts = text.split(":")
    if len(parts) == 3 and parts[0] == "random" and parts[1].isdigit() and parts[2].isdigit() and int(parts[2]) > 0:
        return random_cases(int(parts[1]), int(parts[2]))
    raise argparse.ArgumentTypeError(f"--cases {text!r}: anchors or random:SEED:N")


def case_name(c):
    lens = c["lens"]
    ctx = f"{max(lens) // 1024}K" if len(set(lens)) == 1 else f"{min(lens) // 1024}-{max(lens) // 1024}K"
    return f"{c['dtype']} B{len(lens)} Hkv{c['heads']} qlen{c['qlen']} topk{c['topk']} {ctx}"


def make_inputs(c, seed):
    """The step's tensors in vLLM's layouts: pages shuffled, random values."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = torch.bfloat16 if c["dtype"] == "bf16" else torch.float8_e4m3fn
    lens, H, qlen = c["lens"], c["heads"], c["qlen"]
    B, cols = len(lens), -(-max(lens) // BLK)
    pages = sum(-(-n // BLK) for n in lens)
    perm = torch.randperm(pages, generator=g, device="cuda").to(torch.int32)
    block_table = torch.zeros(B, cols, dtype=torch.int32, device="cuda")
    at = 0
    for r, n in enumerate(lens):
        k = -(-n // BLK)
        block_table[r, :k] = perm[at:at + k]
        at += k
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda")  # noqa: E731
    return dict(idx_q=rnd(B * qlen, H, 128).to(dt), index_kv_cache=rnd(pages, BLK, 128).to(dt),
                q=rnd(B * qlen, H * GROUP, HEAD_DIM).to(torch.bfloat16),
                kv_cache=rnd(pages, H, BLK, 2 * HEAD_DIM).to(dt), block_table=block_table,
                seq_lens=torch.tensor(lens, dtype=torch.int32, device="cuda"), max_len=max(lens),
                scales=(dict(k_scale=torch.ones(1, device="cuda"), v_scale=torch.ones(1, device="cuda"))
                        if dt != torch.bfloat16 else {}))


def ours(c, d):
    H, qlen, topk = c["heads"], c["qlen"], c["topk"]
    tbuf = torch.empty(H, d["q"].shape[0], topk, dtype=torch.int32, device="cuda")
    out = torch.empty_like(d["q"])

    def step():
        t = st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"],
                                       d["max_len"], topk, 1, 2, H, qlen, qlen, out=tbuf)
        st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], t, d["block_table"], d["seq_lens"], H,
                                         HEAD_DIM ** -0.5, out, qlen, max_seq_len=d["max_len"], **d["scales"])
        return tbuf, out

    return step


def peer_step(mods, c, d):
    ix, at = mods
    H, qlen, topk = c["heads"], c["qlen"], c["topk"]
    out = torch.empty_like(d["q"])

    def step():
        t = ix.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"],
                                       d["max_len"], topk, 1, 2, H, qlen, qlen)
        at.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], t, d["block_table"], d["seq_lens"], H,
                                         HEAD_DIM ** -0.5, out, qlen, **d["scales"])
        return t, out

    return step


def time_graph(fn, iters, reps):
    """Median over reps of one replay of a graph of `iters` calls, per call, us."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / iters)
    return statistics.median(times)


def agreement(ours_out, peer_out):
    """Share of (head, row) top-k lists with the same set of blocks, and the
    largest |difference| of the attention outputs."""
    (t1, o1), (t2, o2) = ours_out, peer_out
    s1, s2 = t1.sort(-1).values, t2[:, : t1.shape[1]].sort(-1).values
    same = (s1 == s2).all(-1).float().mean().item()
    return same, (o1.float() - o2.float()).abs().max().item()


def host_us(fn, n=200):
    """Host time of one call (the GPU work queued, not waited for)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / n


def bare_step(c, d):
    """The same two launches through the C API with arguments built once
    (what an engine calling libsparsetune from C would do), on torch's stream."""
    H, qlen, topk = c["heads"], c["qlen"], c["topk"]
    tbuf = torch.empty(H, d["q"].shape[0], topk, dtype=torch.int32, device="cuda")
    out = torch.empty_like(d["q"])
    st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], d["max_len"], topk,
                               1, 2, H, qlen, qlen, out=tbuf)  # loads, sizes the workspace
    st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], tbuf, d["block_table"], d["seq_lens"], H,
                                     HEAD_DIM ** -0.5, out, qlen, max_seq_len=d["max_len"], **d["scales"])
    k, v = st._kv_views(d["kv_cache"])
    ia = _abi.ARGS["index_decode"](
        q=st._tensor(d["idx_q"], "idx_q"), k_cache=st._tensor(d["index_kv_cache"], "k"),
        block_table=st._tensor(d["block_table"], "bt"), seq_lens=st._tensor(d["seq_lens"], "sl"),
        topk_idx=st._tensor(tbuf, "t"), qlen=qlen, topk=topk, init_blocks=1, local_blocks=2,
        max_context=d["max_len"])
    aa = _abi.ARGS["sparse_attn_decode"](
        q=st._tensor(d["q"], "q"), k_cache=st._tensor(k, "k"), v_cache=st._tensor(v, "v"), k_scale=1.0,
        v_scale=1.0, topk_idx=st._tensor(tbuf, "t"), block_table=st._tensor(d["block_table"], "bt"),
        seq_lens=st._tensor(d["seq_lens"], "sl"), o=st._tensor(out, "o"), sm_scale=HEAD_DIM ** -0.5, qlen=qlen,
        max_context=d["max_len"])
    keep = st._kv_scales(aa, d["kv_cache"], d["scales"].get("k_scale"), d["scales"].get("v_scale"))
    h = _registry.for_device(torch.cuda.current_device())
    ws = h.workspace
    ptr, size = (ws.data_ptr(), ws.numel()) if ws is not None else (None, 0)
    lib, hp = h.lib, h.ptr
    ip, ap = ctypes.byref(ia), ctypes.byref(aa)

    def step():
        s = torch.cuda.current_stream().cuda_stream
        h.check(lib.st_index_decode(hp, ip, ptr, size, s), "st_index_decode")
        h.check(lib.st_sparse_attn_decode(hp, ap, ptr, size, s), "st_sparse_attn_decode")
        return tbuf, out

    step.keep = (ia, aa, keep, ws)
    return step


def overhead(c, d, iters, reps):
    """Host us of an eager call, wrapper against bare; replay us, compiled
    step against the bare calls."""
    wrapped, bare = ours(c, d), bare_step(c, d)
    row = dict(eager_host_us=host_us(wrapped), bare_host_us=host_us(bare))
    compiled = torch.compile(wrapped, fullgraph=True)
    compiled()
    row["compiled_replay_us"] = time_graph(compiled, iters, reps)
    row["bare_replay_us"] = time_graph(bare, iters, reps)
    row["compiled_vs_bare"] = row["compiled_replay_us"] / row["bare_replay_us"]
    return row


def load_peer(folder):
    sys.path.insert(0, folder)
    try:
        return importlib.import_module("m3_index"), importlib.import_module("m3_attn")
    except Exception as e:  # triton or its helpers missing: run without the peer
        print(f"peer: cannot import vLLM's M3 ops from {folder}: {type(e).__name__}: {e}", file=sys.stderr)
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m sparsetune.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=parse_cases, default="anchors", help="anchors (default) or random:SEED:N")
    ap.add_argument("--db", help="tuning database (default: none, the built-in variants)")
    ap.add_argument("--peer", help="folder of vLLM's m3_index.py and m3_attn.py: time them beside ours")
    ap.add_argument("--iters", type=int, default=20, help="steps in the graph of one replay")
    ap.add_argument("--reps", type=int, default=10, help="timed replays; the median is reported")
    ap.add_argument("--seed", type=int, default=0, help="inputs' seed (case i: seed + i)")
    ap.add_argument("--overhead", action="store_true", help="also the host overhead and the compiled step")
    ap.add_argument("--json", action="store_true", help="one JSON line a case instead of the table")
    a = ap.parse_args(argv)
    if isinstance(a.cases, str):
        a.cases = parse_cases(a.cases)
    if a.iters < 1 or a.reps < 1:
        ap.error("--iters and --reps must be at least 1")
    if not torch.cuda.is_available():
        print("python -m sparsetune.bench: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    h = sparsetune.open(a.db)
    mods = load_peer(a.peer) if a.peer else None
    dev = torch.cuda.get_device_name()
    if not a.json:
        print(f"sparsetune {sparsetune.version()} ({a.db or 'no database: built-in variants'}) on {dev}"
              f"{', vLLM M3 ops from ' + a.peer if mods else ''}; CUDA-graph replays, median of {a.reps} x {a.iters}")
    ratios = []
    for i, c in enumerate(a.cases):
        d = make_inputs(c, a.seed + i)
        row = dict(case=case_name(c), device=dev, st_us=time_graph(ours(c, d), a.iters, a.reps),
                   variants=h.last_variant())
        if mods:
            try:
                row["peer_us"] = time_graph(peer_step(mods, c, d), a.iters, a.reps)
                row["same_topk"], row["max_abs_diff"] = agreement(ours(c, d)(), peer_step(mods, c, d)())
            except Exception as e:  # the peer refuses some shapes (e.g. 3 heads); ours is still reported
                row.pop("peer_us", None)
                row["peer_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            else:
                row["speedup"] = row["peer_us"] / row["st_us"]
                ratios.append(row["speedup"])
        if a.overhead:
            row.update(overhead(c, d, a.iters, a.reps))
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            peer = ""
            if "peer_us" in row:
                peer = (f"  peer {row['peer_us']:8.2f} us  x{row['speedup']:.3f}  same top-k {row['same_topk']:.3f}"
                        f"  max |diff| {row['max_abs_diff']:.3g}")
            elif "peer_error" in row:
                peer = f"  peer: {row['peer_error']}"
            extra = (f"  eager host {row['eager_host_us']:.1f} us (bare {row['bare_host_us']:.1f})  compiled replay "
                     f"{row['compiled_replay_us']:.2f} us = {row['compiled_vs_bare']:.3f}x bare") if a.overhead else ""
            print(f"{row['case']:<40} st {row['st_us']:8.2f} us{peer}{extra}", flush=True)
    if ratios and not a.json:
        print(f"geomean speed-up over the peer: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} "
              f"({len(ratios)} steps, least {min(ratios):.3f})")
    h.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
