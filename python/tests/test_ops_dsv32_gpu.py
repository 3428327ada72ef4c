"""The DeepSeek-V3.2 torch ops on a GPU against float64 references of the
op contract (runtime/include/sparsetune.h), in FlashMLA's and DeepGEMM's
layouts: sparse MLA decode (bf16 and the 656-byte fp8 cache), sparse MLA
prefill, the indexer's logits, its top-k and the fused decode indexer.
Skips without a GPU."""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the ops' GPU tests need one", allow_module_level=True)

import sparsetune  # noqa: E402
import sparsetune.ops as st  # noqa: E402

BF16, FP8, I32, F32 = torch.bfloat16, torch.float8_e4m3fn, torch.int32, torch.float32


@pytest.fixture(scope="module", autouse=True)
def handle():
    h = sparsetune.open()
    yield h
    h.close()


def gen(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def mla_reference(q, k, v, ids, sm_scale):
    """q [h, 576], k [slots, 576], v [slots, 512] float64; ids of one row
    (-1 or out of range: none) -> o [h, 512], lse [h], max_logit [h]."""
    ok = [int(i) for i in ids.tolist() if 0 <= i < k.shape[0]]
    if not ok:
        h = q.shape[0]
        neg = torch.full((h,), -math.inf, dtype=torch.float64, device=q.device)
        return torch.zeros(h, v.shape[1], dtype=torch.float64, device=q.device), neg, neg
    sel = torch.tensor(ok, device=q.device)
    s = q.double() @ k[sel].T * sm_scale  # duplicates count twice, as listed
    lse = torch.logsumexp(s, 1)
    return torch.softmax(s, 1) @ v[sel], lse, s.amax(1)


def fp8_cache_rows(slots, seed):
    """DeepSeek-V3.2's 656-byte rows: 512 e4m3 latent values, 4 fp32 scales
    (one per 128 values), 64 bf16 RoPE values; with their float64 K and V."""
    g = gen(seed)
    latent = (torch.randn(slots, 512, generator=g, device="cuda") * 8).to(FP8)
    scales = torch.rand(slots, 4, generator=g, device="cuda") * 0.1 + 0.01
    rope = torch.randn(slots, 64, generator=g, device="cuda").to(BF16)
    rows = torch.cat([latent.view(torch.uint8), scales.view(torch.uint8), rope.view(torch.uint8)], 1)
    assert rows.shape == (slots, 656)
    lat = latent.double() * scales.double().repeat_interleave(128, 1)
    return rows, torch.cat([lat, rope.double()], 1), lat


@pytest.mark.parametrize("fp8", [False, True])
def test_flash_mla_sparse_decode_matches_the_reference(fp8):
    B, s_q, h_q, page, pages, topk = 3, 2, 16, 64, 6, 96
    slots = pages * page
    g = gen(1 + fp8)
    q = torch.randn(B, s_q, h_q, 576, generator=g, device="cuda").to(BF16)
    if fp8:
        rows, k, v = fp8_cache_rows(slots, 5)
        cache = rows.view(pages, page, 1, 656)
    else:
        kv = torch.randn(slots, 576, generator=g, device="cuda").to(BF16)
        cache, k, v = kv.view(pages, page, 1, 576), kv.double(), kv.double()[:, :512]
    idx = torch.randint(-1, slots + 3, (B, s_q, topk), generator=g, device="cuda", dtype=I32)  # -1 and past the end
    idx[0, 0, :] = -1  # a row with no entry
    idx[1, 1, 1::2] = idx[1, 1, 0::2]  # repeated slots
    sink = torch.randn(h_q, generator=g, device="cuda")
    scale = 576 ** -0.5
    for with_sink in (False, True):
        out, lse = st.flash_mla_sparse_decode(q, cache, idx, scale, attn_sink=sink if with_sink else None)
        torch.cuda.synchronize()
        for b in range(B):
            for t in range(s_q):
                o_ref, lse_ref, _ = mla_reference(q[b, t], k, v, idx[b, t], scale)
                if with_sink and torch.isfinite(lse_ref).all():
                    o_ref = o_ref * (torch.exp(lse_ref) / (torch.exp(lse_ref) + torch.exp(sink.double())))[:, None]
                torch.testing.assert_close(out[b, t].double(), o_ref, atol=2e-2, rtol=2e-2)
                torch.testing.assert_close(lse[b, t].double(), lse_ref, atol=1e-3, rtol=1e-3)


def test_flash_mla_sparse_fwd_matches_the_reference():
    s_q, h_q, s_kv, topk = 6, 16, 700, 128
    g = gen(3)
    q = torch.randn(s_q, h_q, 576, generator=g, device="cuda").to(BF16)
    kv = torch.randn(s_kv, 1, 576, generator=g, device="cuda").to(BF16)
    idx = torch.randint(-1, s_kv, (s_q, 1, topk), generator=g, device="cuda", dtype=I32)
    lens = torch.tensor([topk, 0, 5, topk - 1, 64, topk], dtype=I32, device="cuda")
    scale = 576 ** -0.5
    out, max_logits, lse = st.flash_mla_sparse_fwd(q, kv, idx, scale, topk_length=lens)
    torch.cuda.synchronize()
    k = kv[:, 0].double()
    for i in range(s_q):
        o_ref, lse_ref, ml_ref = mla_reference(q[i], k, k[:, :512], idx[i, 0, : int(lens[i])], scale)
        torch.testing.assert_close(out[i].double(), o_ref, atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(lse[i].double(), lse_ref, atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(max_logits[i].double(), ml_ref, atol=1e-3, rtol=1e-3)


def index_logits_reference(q, k, k_scale, weights):
    """[s_q, s_kv] float64: sum_h w[i, h] relu(q[i, h] . k[j] * k_scale[j])."""
    dots = torch.einsum("ihd,jd->ihj", q.double(), k.double()) * k_scale.double()[None, None, :]
    return (weights.double()[:, :, None] * dots.clamp_min(0)).sum(1)


def test_dsa_index_logits_and_topk_match_the_reference():
    s_q, s_kv, H, topk = 40, 3000, 64, 512
    g = gen(4)
    q = (torch.randn(s_q, H, 128, generator=g, device="cuda") * 2).to(FP8)
    k = (torch.randn(s_kv, 128, generator=g, device="cuda") * 2).to(FP8)
    k_scale = torch.rand(s_kv, generator=g, device="cuda") + 0.5
    w = torch.randn(s_q, H, generator=g, device="cuda")
    ks = torch.randint(0, 200, (s_q,), generator=g, device="cuda", dtype=I32)
    ke = (ks + torch.randint(0, s_kv, (s_q,), generator=g, device="cuda", dtype=I32)).clamp_max(s_kv)
    ke[0] = ks[0]  # a row that sees nothing
    logits = torch.empty(s_q, s_kv, device="cuda")
    torch.ops.sparsetune.dsa_index_logits(q, k, k_scale, w, ks, ke, logits)
    tk = torch.empty(s_q, topk, dtype=I32, device="cuda")
    torch.ops.sparsetune.dsa_index_topk(logits, ks, ke, tk)
    torch.cuda.synchronize()
    ref = index_logits_reference(q, k, k_scale, w)
    for i in range(s_q):
        a, b = int(ks[i]), int(ke[i])
        inside = logits[i, a:b].double()
        torch.testing.assert_close(inside, ref[i, a:b], atol=1e-2 * (1 + ref[i].abs().max().item()), rtol=1e-3)
        assert torch.isneginf(logits[i, :a]).all() and torch.isneginf(logits[i, b:]).all()
        n = min(topk, max(b - a, 0))
        got = tk[i].tolist()
        chosen = [j for j in got if j >= 0]
        assert got[n:] == [-1] * (topk - n) and len(chosen) == n == len(set(chosen)), f"row {i}"
        assert all(a <= j < b for j in chosen), f"row {i}: a position outside [{a}, {b})"
        if 0 < n < b - a:  # a real choice: nothing left out beats what was chosen
            vals = logits[i, a:b]
            mask = torch.ones(b - a, dtype=torch.bool, device="cuda")
            mask[torch.tensor(chosen, device="cuda") - a] = False
            assert vals[mask].max() <= vals[~mask].min(), f"row {i}"


def test_dsa_index_decode_matches_the_reference():
    R, qlen, H, page, topk = 3, 2, 64, 64, 256
    lens = [700, 2, 1500]
    pages_per = [-(-n // page) for n in lens]
    pages = sum(pages_per) + 2
    g = gen(6)
    vals = (torch.randn(pages, page, 128, generator=g, device="cuda") * 2).to(FP8)
    scales = torch.rand(pages, page, generator=g, device="cuda") + 0.5
    cache = torch.cat([vals.view(torch.uint8).reshape(pages, -1), scales.view(torch.uint8).reshape(pages, -1)], 1)
    perm = torch.randperm(pages, generator=g, device="cuda").to(I32)
    bt = torch.full((R, max(pages_per)), -1, dtype=I32, device="cuda")
    at = 0
    for r, n in enumerate(pages_per):
        bt[r, :n] = perm[at:at + n]
        at += n
    q = (torch.randn(R * qlen, H, 128, generator=g, device="cuda") * 2).to(FP8)
    w = torch.randn(R * qlen, H, generator=g, device="cuda")
    seq = torch.tensor(lens, dtype=I32, device="cuda")
    out = torch.empty(R * qlen, topk, dtype=I32, device="cuda")
    torch.ops.sparsetune.dsa_index_decode(q, w, cache, bt, seq, qlen, page, max(lens), out)
    torch.cuda.synchronize()
    for r, n in enumerate(lens):
        rows = bt[r, : pages_per[r]].long()
        k = vals[rows].reshape(-1, 128)[:n]
        ksc = scales[rows].reshape(-1)[:n]
        for t in range(qlen):
            i, p = r * qlen + t, n - qlen + t
            ref = index_logits_reference(q[i:i + 1], k[: p + 1], ksc[: p + 1], w[i:i + 1])[0]
            m = min(topk, p + 1)
            got = out[i].tolist()
            chosen = [j for j in got if j >= 0]
            assert len(chosen) == m == len(set(chosen)) and got.count(-1) == topk - m, f"row {i}"
            assert all(0 <= j <= p for j in chosen), f"row {i}"
            if m < p + 1:
                mask = torch.ones(p + 1, dtype=torch.bool, device="cuda")
                mask[torch.tensor(chosen, device="cuda")] = False
                tol = 1e-3 * (1 + ref.abs().max().item())
                assert ref[mask].max() <= ref[~mask].min() + tol, f"row {i}"
