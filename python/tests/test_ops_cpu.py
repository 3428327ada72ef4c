"""The torch ops without a GPU: argument checks with clear messages, the
fake kernels' shapes, a decode step traced whole by torch.compile
(fullgraph=True), and the KV-scale views."""
import pytest

torch = pytest.importorskip("torch")
import sparsetune.ops as st  # noqa: E402  (after the skip: the ops need torch)
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

BF16, I32 = torch.bfloat16, torch.int32


def decode_inputs(device="cpu", B=8, H=2, G=16, D=128, topk=16, pages=64, cols=32):
    """An M3 decode batch in vLLM's layouts (values never read here)."""
    e = lambda *s, dtype=BF16: torch.empty(*s, dtype=dtype, device=device)  # noqa: E731
    return dict(idx_q=e(B, H, 128), index_kv_cache=e(pages, 128, 128), block_table=e(B, cols, dtype=I32),
                seq_lens=e(B, dtype=I32), q=e(B, H * G, D), kv_cache=e(pages, H, 128, 2 * D),
                out=e(H, B, topk, dtype=I32), output=e(B, H * G, D))


def test_cpu_tensors_are_refused_by_name():
    d = decode_inputs()
    with pytest.raises(ValueError, match="idx_q must be a CUDA tensor, is on cpu"):
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], 4096, 16, 1,
                                   2, 2, 1, 1, out=d["out"])
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], d["out"], d["block_table"], d["seq_lens"], 2,
                                         0.088, d["output"], 1)


def test_vllm_argument_rules_are_checked():
    d = decode_inputs()
    with pytest.raises(ValueError, match="num_kv_heads=4"):
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], 4096, 16, 1,
                                   2, 4, 1, 1)
    with pytest.raises(ValueError, match=r"out.shape=\[2, 8, 16\] must be \[2, >= 8, 32\]"):
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], 4096, 32, 1,
                                   2, 2, 1, 1, out=d["out"])
    with pytest.raises(ValueError, match="decode_query_len=3 must be in 1..max_decode_query_len=2"):
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], 4096, 16, 1,
                                   2, 2, 3, 2)
    with pytest.raises(ValueError, match="score_out is not supported"):
        st.minimax_m3_index_decode(d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], 4096, 16, 1,
                                   2, 2, 1, 1, score_out=d["out"])
    with pytest.raises(ValueError, match=r"kv_cache.shape=\[64, 2, 128, 256\] must be \[num_blocks, num_kv_heads=4"):
        st.minimax_m3_sparse_attn_decode(d["q"], d["kv_cache"], d["out"], d["block_table"], d["seq_lens"], 4,
                                         0.088, d["output"], 1)
    with pytest.raises(ValueError, match="topk=65 must be an int in 1..64"):
        st.minimax_m3_index_topk(torch.empty(2, 8, 32), torch.empty(3, dtype=I32), torch.empty(2, dtype=I32), 4, 65,
                                 1, 2)


def test_fake_kernels_give_vllms_shapes():
    with FakeTensorMode():
        q = torch.empty(300, 2, 128, dtype=BF16, device="cuda")
        k = torch.empty(64, 128, 128, dtype=BF16, device="cuda")
        bt = torch.empty(3, 40, dtype=I32, device="cuda")
        cu, sl = torch.empty(4, dtype=I32, device="cuda"), torch.empty(3, dtype=I32, device="cuda")
        score = st.minimax_m3_index_score(q, k, bt, cu, sl, sl, 200, 5000, 2)
        assert score.shape == (2, 300, 48) and score.dtype == torch.float32  # 40 blocks, rounded up to 16
        assert score.device.type == "cuda"
        tk = st.minimax_m3_index_topk(score, cu, sl, 200, 16, 1, 2)
        assert tk.shape == (2, 300, 16) and tk.dtype == I32
        fused = st.minimax_m3_index_prefill(q, k, bt, cu, sl, 5000, 16, 1, 2)
        assert fused.shape == (2, 300, 16) and fused.dtype == I32
        buf = torch.empty(2, 512, 16, dtype=I32, device="cuda")  # an engine's stable buffer
        assert st.minimax_m3_index_topk(score, cu, sl, 200, 16, 1, 2, out=buf).shape == (2, 300, 16)


class DecodeStep(torch.nn.Module):
    """index_decode then sparse_attn_decode, as an engine's decode step."""

    def forward(self, idx_q, index_kv_cache, block_table, seq_lens, q, kv_cache, out, output):
        tidx = st.minimax_m3_index_decode(idx_q, index_kv_cache, block_table, seq_lens, 4096, 16, 1, 2, 2, 1, 1,
                                          out=out)
        st.minimax_m3_sparse_attn_decode(q, kv_cache, tidx, block_table, seq_lens, 2, 0.088, output, 1,
                                         max_seq_len=4096)
        return output


def test_a_decode_step_traces_as_one_graph():
    """Dynamo traces the step whole (strict export: what
    torch.compile(fullgraph=True) needs, no graph break) into the two custom
    ops, through their fake kernels: nothing runs, there is no GPU here."""
    d = decode_inputs()
    ep = torch.export.export(DecodeStep(), (d["idx_q"], d["index_kv_cache"], d["block_table"], d["seq_lens"], d["q"],
                                            d["kv_cache"], d["out"], d["output"]), strict=True)
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert any("sparsetune.index_decode" in t for t in targets), targets
    assert any("sparsetune.sparse_attn_decode" in t for t in targets), targets


def test_kv_scale_views():
    pages, hkv = 3, 2
    ks = torch.arange(hkv * (pages * 128 + 8), dtype=torch.float32).reshape(hkv, -1)[:, :pages * 128 + 3]
    v = st.scale_view(ks, pages, hkv)
    assert v.shape == (pages, hkv, 128)
    for p, h, s in ((0, 0, 0), (2, 1, 127), (1, 0, 64), (2, 0, 5)):
        assert v[p, h, s] == ks[h, p * 128 + s]
    one = torch.tensor([0.5])
    w = st.scale_view(one, pages, hkv)
    assert w.shape == (pages, hkv, 128) and w.stride() == (0, 0, 0) and bool((w == 0.5).all())
    with pytest.raises(ValueError, match=r"must hold one scale or be \[num_kv_heads=2, >= 384 slots\]"):
        st.scale_view(torch.empty(2, 100), pages, hkv)
    with pytest.raises(ValueError, match="must be float32"):
        st.scale_view(torch.empty(1, dtype=BF16), pages, hkv)


def test_deepseek_wrappers_give_flashmlas_shapes():
    with FakeTensorMode():
        q = torch.empty(4, 2, 128, 576, dtype=BF16, device="cuda")
        cache = torch.empty(100, 64, 1, 656, dtype=torch.uint8, device="cuda")
        idx = torch.empty(4, 2, 2048, dtype=I32, device="cuda")
        out, lse = st.flash_mla_sparse_decode(q, cache, idx, 0.04)
        assert out.shape == (4, 2, 128, 512) and out.dtype == BF16
        assert lse.shape == (4, 2, 128) and lse.dtype == torch.float32
        qp = torch.empty(300, 64, 576, dtype=BF16, device="cuda")
        kv = torch.empty(5000, 1, 576, dtype=BF16, device="cuda")
        o, ml, ls = st.flash_mla_sparse_fwd(qp, kv, torch.empty(300, 1, 2048, dtype=I32, device="cuda"), 0.04)
        assert o.shape == (300, 64, 512) and ml.shape == ls.shape == (300, 64)
    with pytest.raises(ValueError, match=r"k_cache.shape=\[100, 64, 656\] must be \[blocks, page_size, 1, 656"):
        st.flash_mla_sparse_decode(torch.empty(4, 2, 128, 576), torch.empty(100, 64, 656), torch.empty(4, 2, 8), 0.1)
    with pytest.raises(ValueError, match=r"indices.shape=\[4, 1, 8\] must be \[B=4, s_q=2, topk\]"):
        st.flash_mla_sparse_decode(torch.empty(4, 2, 128, 576), torch.empty(100, 64, 1, 656), torch.empty(4, 1, 8),
                                   0.1)
    with pytest.raises(ValueError, match="d_v=128"):
        st.flash_mla_sparse_fwd(torch.empty(3, 64, 576), torch.empty(9, 1, 576), torch.empty(3, 1, 4), 0.1, d_v=128)
