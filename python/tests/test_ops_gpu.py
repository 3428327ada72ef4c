"""The torch ops on a GPU against float64 references computed here from the
op contract (the library's own tests check every kernel variant; these
check that the wrappers hand vLLM's tensors to it right): the decode step,
the prefill indexer and attention, bf16 and fp8 caches, a CUDA graph
replayed with other lengths, a compiled decode step. Skips without a GPU."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the ops' GPU tests need one", allow_module_level=True)

import sparsetune  # noqa: E402
import sparsetune.ops as st  # noqa: E402

BLK = 128
BF16, FP8, I32 = torch.bfloat16, torch.float8_e4m3fn, torch.int32


@pytest.fixture(scope="module", autouse=True)
def handle():
    h = sparsetune.open()  # no database: the built-in variants
    yield h
    h.close()


def cache_tokens(cache, block_table, r, n):
    """Tokens 0..n-1 of request r of a paged [pages, 128, ...] cache, float64."""
    pages = block_table[r, : (n + BLK - 1) // BLK].long()
    return cache[pages].double().reshape(-1, *cache.shape[2:])[:n]


def block_scores(q, cache, block_table, r, pos):
    """[H, nb] max over the visible tokens (<= pos) of each block of q . k."""
    n = pos + 1
    k = cache_tokens(cache, block_table, r, n)  # [n, D]
    s = torch.einsum("hd,td->ht", q.double(), k)  # [H, n]
    nb = (n + BLK - 1) // BLK
    pad = torch.full((s.shape[0], nb * BLK - n), float("-inf"), dtype=s.dtype, device=s.device)
    return torch.cat([s, pad], 1).reshape(s.shape[0], nb, BLK).amax(2)


def check_selection(ids, scores, topk, init_blocks, local_blocks, what):
    """One row's ids against its scores [nb] by the contract's rule: the
    forced blocks, then want - forced best others (ties within rounding),
    -1 after, no id twice."""
    nb = scores.shape[0]
    lo = min(init_blocks, nb)
    hi = max(nb - local_blocks, lo)
    want = min(topk, nb)
    ids = ids.tolist()
    got = [i for i in ids if i >= 0]
    assert ids[len(got):] == [-1] * (topk - len(got)), f"{what}: -1 only after the ids: {ids}"
    assert len(got) == want and len(set(got)) == want, f"{what}: {want} distinct ids wanted: {ids}"
    assert all(0 <= i < nb for i in got), f"{what}: ids past {nb} visible blocks: {ids}"
    forced = set(range(lo)) | set(range(hi, nb))
    assert forced <= set(got), f"{what}: forced blocks {sorted(forced)} missing: {ids}"
    free = [i for i in range(lo, hi)]
    chosen = [i for i in got if i not in forced]
    left = [i for i in free if i not in chosen]
    if chosen and left:
        tol = 1e-2 * float(scores[torch.isfinite(scores)].abs().max())
        worst_chosen = min(float(scores[i]) for i in chosen)
        best_left = max(float(scores[i]) for i in left)
        assert best_left <= worst_chosen + tol, f"{what}: block scoring {best_left} left for one of {worst_chosen}"


def attention(q, k, v, sm_scale):
    """q [G, D], k/v [n, D] float64: softmax(q k^T * scale) v."""
    if k.shape[0] == 0:
        return torch.zeros(q.shape[0], v.shape[1], dtype=torch.float64, device=q.device)
    p = torch.softmax(q.double() @ k.T * sm_scale, dim=1)
    return p @ v


def attended(kv_cache, block_table, r, pos, ids, h, D, k_scale=1.0, v_scale=1.0):
    """K and V (float64) of the tokens <= pos in blocks `ids` of request r."""
    rows = []
    for b in ids.tolist():
        if b < 0:
            continue
        first = b * BLK
        n = min(BLK, pos + 1 - first)
        if n <= 0:
            continue
        page = int(block_table[r, b])
        rows.append(kv_cache[page, h, :n].double())
    if not rows:
        empty = torch.zeros(0, D, dtype=torch.float64, device=kv_cache.device)
        return empty, empty
    kv = torch.cat(rows)
    return kv[:, :D] * k_scale, kv[:, D:] * v_scale


def decode_batch(B, H, G, D, qlen, dtype, seed, pages=96, cols=12):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda")  # noqa: E731
    seq_lens = torch.randint(qlen, cols * BLK + 1, (B,), generator=g, device="cuda", dtype=I32)
    seq_lens[0] = qlen  # a request with only its query tokens
    block_table = torch.randint(0, pages, (B, cols), generator=g, device="cuda", dtype=I32)
    kv = rnd(pages, H, BLK, 2 * D)
    return dict(idx_q=rnd(B * qlen, H, 128).to(BF16), index_kv_cache=rnd(pages, BLK, 128).to(BF16),
                q=rnd(B * qlen, H * G, D).to(BF16), kv_cache=(kv if dtype == BF16 else kv * 4).to(dtype),
                block_table=block_table, seq_lens=seq_lens, max_len=cols * BLK)


@pytest.mark.parametrize("dtype", [BF16, FP8])
@pytest.mark.parametrize("qlen", [1, 3])
def test_decode_step_matches_the_reference(dtype, qlen):
    B, H, G, D, topk = 6, 2, 16, 128, 8
    d = decode_batch(B, H, G, D, qlen, dtype, seed=qlen)
    buf = torch.full((H, B * qlen + 5, topk), 77, dtype=I32, device="cuda")  # an engine's larger buffer
    tidx = st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"],
                                      d["max_len"], topk, 1, 2, H, qlen, 4, out=buf)
    assert tidx.data_ptr() == buf.data_ptr() and tidx.shape == (H, B * qlen, topk)
    out = torch.empty_like(d["q"])
    scales = {}
    if dtype == FP8:
        scales = dict(k_scale=torch.tensor([0.5], device="cuda"), v_scale=torch.tensor([0.25], device="cuda"))
    st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], tidx, d["block_table"], d["seq_lens"], H, D ** -0.5,
                                     out, qlen, max_seq_len=d["max_len"], **scales)
    torch.cuda.synchronize()
    assert (buf[:, B * qlen:] == 77).all(), "rows past total_q of out= were written"
    ks, vs = (0.5, 0.25) if dtype == FP8 else (1.0, 1.0)
    for r in range(B):
        for t in range(qlen):
            i = r * qlen + t
            pos = int(d["seq_lens"][r]) - qlen + t
            sc = block_scores(d["idx_q"][i], d["index_kv_cache"], d["block_table"], r, pos)
            for h in range(H):
                check_selection(tidx[h, i].cpu(), sc[h].cpu(), topk, 1, 2, f"row {i} head {h}")
                k, v = attended(d["kv_cache"], d["block_table"], r, pos, tidx[h, i], h, D, ks, vs)
                ref = attention(d["q"][i, h * G:(h + 1) * G], k, v, D ** -0.5)
                torch.testing.assert_close(out[i, h * G:(h + 1) * G].double(), ref, atol=3e-2, rtol=3e-2)


def prefill_batch(reqs, H, G, D, dtype, seed, pages=160):
    """reqs: (q_len, prefix) per request."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda")  # noqa: E731
    q_lens = torch.tensor([a for a, _ in reqs], dtype=I32, device="cuda")
    prefix = torch.tensor([b for _, b in reqs], dtype=I32, device="cuda")
    seq_lens = q_lens + prefix
    cu = torch.zeros(len(reqs) + 1, dtype=I32, device="cuda")
    cu[1:] = torch.cumsum(q_lens, 0)
    cols = (int(seq_lens.max()) + BLK - 1) // BLK
    block_table = torch.randint(0, pages, (len(reqs), cols), generator=g, device="cuda", dtype=I32)
    total = int(cu[-1])
    kv = rnd(pages, H, BLK, 2 * D)
    return dict(idx_q=rnd(total, H, 128).to(BF16), index_kv_cache=rnd(pages, BLK, 128).to(BF16),
                q=rnd(total, H * G, D).to(BF16), kv_cache=(kv if dtype == BF16 else kv * 4).to(dtype),
                block_table=block_table, cu=cu, prefix=prefix, seq_lens=seq_lens, max_len=int(seq_lens.max()),
                max_q=int(q_lens.max()), total=total)


def positions(d):
    """(request, absolute position) of each query token."""
    out = []
    for r in range(len(d["seq_lens"])):
        a, b = int(d["cu"][r]), int(d["cu"][r + 1])
        out += [(r, int(d["prefix"][r]) + t) for t in range(b - a)]
    return out


@pytest.mark.parametrize("dtype", [BF16, FP8])
def test_prefill_matches_the_reference(dtype):
    """Also one workspace serving ops and shapes in turn: the module's tests
    share the handle's, so the fp8 call follows the bf16 call's partials."""
    H, G, D, topk = 2, 16, 128, 6
    d = prefill_batch([(70, 300), (1, 0), (130, 0), (5, 900)], H, G, D, dtype, seed=7)
    score = st.minimax_m3_index_score(d["idx_q"], d["index_kv_cache"], d["block_table"], d["cu"], d["seq_lens"],
                                      d["prefix"], d["max_q"], d["max_len"], H)
    tk = st.minimax_m3_index_topk(score, d["cu"], d["prefix"], d["max_q"], topk, 1, 2)
    fused = st.minimax_m3_index_prefill(d["idx_q"], d["index_kv_cache"], d["block_table"], d["cu"], d["seq_lens"],
                                        d["max_len"], topk, 1, 2)
    out = torch.empty_like(d["q"])
    scales = {}
    if dtype == FP8:
        scales = dict(k_scale=torch.tensor([0.5], device="cuda"), v_scale=torch.tensor([0.25], device="cuda"))
    st.minimax_m3_sparse_attn(d["q"], d["kv_cache"], tk, d["block_table"], d["cu"], d["seq_lens"], d["prefix"],
                              d["max_q"], H, D ** -0.5, out, max_seq_len=d["max_len"], **scales)
    torch.cuda.synchronize()
    ks, vs = (0.5, 0.25) if dtype == FP8 else (1.0, 1.0)
    for i, (r, pos) in enumerate(positions(d)):
        sc = block_scores(d["idx_q"][i], d["index_kv_cache"], d["block_table"], r, pos)
        nb = sc.shape[1]
        torch.testing.assert_close(score[:, i, :nb].double(), sc, atol=5e-2, rtol=2e-2)
        for h in range(H):
            check_selection(tk[h, i].cpu(), sc[h].cpu(), topk, 1, 2, f"topk row {i} head {h}")
            check_selection(fused[h, i].cpu(), sc[h].cpu(), topk, 1, 2, f"index_prefill row {i} head {h}")
            k, v = attended(d["kv_cache"], d["block_table"], r, pos, tk[h, i], h, D, ks, vs)
            ref = attention(d["q"][i, h * G:(h + 1) * G], k, v, D ** -0.5)
            torch.testing.assert_close(out[i, h * G:(h + 1) * G].double(), ref, atol=3e-2, rtol=3e-2)


def test_a_captured_decode_step_replays_with_other_lengths():
    """Captured once, replayed after seq_lens changed: the same results as
    eager calls on the new lengths."""
    B, H, G, D, topk = 5, 2, 16, 128, 8
    d = decode_batch(B, H, G, D, 1, BF16, seed=11)
    tbuf = torch.empty(H, B, topk, dtype=I32, device="cuda")
    out = torch.empty_like(d["q"])

    def step():
        t = st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"],
                                       d["max_len"], topk, 1, 2, H, 1, 1, out=tbuf)
        st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], t, d["block_table"], d["seq_lens"], H, D ** -0.5,
                                         out, 1, max_seq_len=d["max_len"])

    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for lens in ([1, 200, 129, 1536, 77], [1536, 1, 1, 640, 1000]):
        d["seq_lens"].copy_(torch.tensor(lens, dtype=I32))
        graph.replay()
        torch.cuda.synchronize()
        replayed_t, replayed_o = tbuf.clone(), out.clone()
        step()
        torch.cuda.synchronize()
        assert torch.equal(replayed_t, tbuf)
        assert torch.equal(replayed_o, out)


def test_a_compiled_decode_step_matches_eager():
    B, H, G, D, topk = 4, 2, 16, 128, 8
    d = decode_batch(B, H, G, D, 2, BF16, seed=3)
    tbuf = torch.empty(H, B * 2, topk, dtype=I32, device="cuda")

    def step(idx_q, q, seq_lens):
        t = st.minimax_m3_index_decode(idx_q, d["index_kv_cache"], d["block_table"], seq_lens, d["max_len"], topk,
                                       1, 2, H, 2, 2, out=tbuf)
        o = torch.empty_like(q)
        st.minimax_m3_sparse_attn_decode(q, d["kv_cache"], t, d["block_table"], seq_lens, H, D ** -0.5, o, 2,
                                         max_seq_len=d["max_len"])
        return o * 2

    eager = step(d["idx_q"], d["q"], d["seq_lens"])
    compiled = torch.compile(step, fullgraph=True)(d["idx_q"], d["q"], d["seq_lens"])
    torch.cuda.synchronize()
    assert torch.equal(eager, compiled)


def test_library_errors_carry_the_librarys_message():
    d = decode_batch(2, 2, 16, 128, 1, BF16, seed=9)
    with pytest.raises(sparsetune.SparsetuneError) as e:  # topk 65: past the op's 1..64
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], d["max_len"],
                                   65, 1, 2, 2, 1, 1)
    assert e.value.status == "ST_ERR_INVALID_ARG"
    assert "topk" in e.value.message


def test_capture_without_a_warm_up_is_refused_clearly():
    """A shape never run eagerly needs a workspace or a kernel load inside
    the capture: refused with the library's or the wrapper's message. Last
    in the file: the aborted capture may leave the stream unusable."""
    h = sparsetune.open()  # a fresh handle: no workspace yet
    try:
        d = decode_batch(3, 2, 16, 128, 1, BF16, seed=5)
        tbuf = torch.empty(2, 3, 8, dtype=I32, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with pytest.raises((sparsetune.SparsetuneError, RuntimeError)) as e:
            with torch.cuda.graph(graph):
                st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"],
                                           d["max_len"], 8, 1, 2, 2, 1, 1, out=tbuf)
        assert "captur" in str(e.value) or "workspace" in str(e.value), str(e.value)
    finally:
        h.close()
