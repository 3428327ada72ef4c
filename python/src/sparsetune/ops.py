"""torch custom ops over libsparsetune: MiniMax-M3's sparse attention in vLLM
0.33.0's signatures and layouts, so an engine can swap them in.

    import sparsetune.ops as st
    st.minimax_m3_index_decode(idx_q, index_kv_cache, block_table, seq_lens,
                               max_seq_len, topk, init_blocks, local_blocks,
                               num_kv_heads, decode_query_len, max_decode_query_len, out=buf)

The wrappers named like vLLM's functions take the same arguments; each calls
one op of the `sparsetune` library (torch.ops.sparsetune.*), which launches
on torch's current stream through the device's handle (sparsetune.open, or
one opened on first use). Under CUDA-graph capture nothing is compiled or
allocated: run each shape once eagerly first (that loads its kernel and
sizes the handle's workspace), then capture. The ops have fake kernels, so
torch.compile(fullgraph=True) traces them.
"""
import ctypes

import torch

from . import _abi, _registry
from ._handle import SparsetuneError

_DTYPES = {
    torch.bfloat16: _abi.ST_DTYPE_BF16,
    torch.float8_e4m3fn: _abi.ST_DTYPE_FP8_E4M3,
    torch.int32: _abi.ST_DTYPE_INT32,
    torch.float32: _abi.ST_DTYPE_FP32,
}
_BLOCK = _abi.ST_BLOCK_TOKENS


def _tensor(x, name):
    """x as an st_tensor (a view: data pointer, dtype, shape, strides)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(x).__name__}")
    if x.device.type != "cuda":
        raise ValueError(f"{name} must be a CUDA tensor, is on {x.device}")
    if x.dtype not in _DTYPES:
        raise ValueError(f"{name}.dtype={x.dtype} is not one of bfloat16, float8_e4m3fn, int32, float32")
    if not 1 <= x.dim() <= _abi.ST_MAX_DIMS:
        raise ValueError(f"{name} has {x.dim()} dimensions, 1..{_abi.ST_MAX_DIMS} are supported")
    t = _abi.st_tensor()
    t.data = x.data_ptr()
    t.dtype = _DTYPES[x.dtype]
    t.ndim = x.dim()
    for i, (n, s) in enumerate(zip(x.shape, x.stride())):
        t.shape[i], t.stride[i] = n, s
    return t


def _device_of(tensors):
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devices) != 1:
        raise ValueError(f"the tensors must be on one CUDA device, are on {sorted(map(str, devices))}")
    d = devices.pop()
    if d.type != "cuda":
        raise ValueError(f"the tensors must be CUDA tensors, are on {d}")
    return d.index if d.index is not None else torch.cuda.current_device()


def _launch(op, args, tensors):
    """Runs st_<op> with `args` on torch's current stream of the tensors'
    device: the workspace sized (never under capture), the kernel loaded
    (never under capture), then the launch."""
    device = _device_of(tensors)
    h = _registry.for_device(device)
    lib = h.lib
    stream = torch.cuda.current_stream(device)
    capturing = torch.cuda.is_current_stream_capturing()
    need = ctypes.c_size_t()
    h.check(getattr(lib, f"st_{op}_workspace_size")(h.ptr, ctypes.byref(args), ctypes.byref(need)),
            f"st_{op}_workspace_size")
    with h._lock:
        ws = h.workspace
        if need.value and (ws is None or ws.numel() < need.value):
            if capturing:
                raise SparsetuneError(
                    f"sparsetune.ops {op}", "ST_ERR_WORKSPACE",
                    f"the handle's workspace holds {0 if ws is None else ws.numel()} bytes, this call needs "
                    f"{need.value}: run the op once on this shape before capturing a CUDA graph")
            ws = torch.empty(need.value, dtype=torch.uint8, device=f"cuda:{device}")
            # The kernels leave the workspace zeroed; a new one is zeroed once.
            h.check(lib.st_workspace_clear(h.ptr, ws.data_ptr(), ws.numel(), stream.cuda_stream),
                    "st_workspace_clear")
            h.workspace = ws
    if not capturing:
        h.check(getattr(lib, f"st_{op}_prepare")(h.ptr, ctypes.byref(args)), f"st_{op}_prepare")
    ptr, size = (ws.data_ptr(), ws.numel()) if ws is not None else (None, 0)
    h.check(getattr(lib, f"st_{op}")(h.ptr, ctypes.byref(args), ptr, size, stream.cuda_stream), f"st_{op}")


def _kv_views(kv_cache, name="kv_cache"):
    """K and V of vLLM's [blocks, Hkv, 128, 2 * D] cache: its two halves."""
    if kv_cache.dim() != 4 or kv_cache.shape[2] != _BLOCK or kv_cache.shape[3] % 2:
        raise ValueError(f"{name}.shape={list(kv_cache.shape)} must be [num_blocks, num_kv_heads, 128, 2 * head_dim]")
    d = kv_cache.shape[3] // 2
    return kv_cache[..., :d], kv_cache[..., d:]


def _kv_scales(args, kv_cache, k_scale, v_scale):
    """vLLM's KV scales: none, one each (numel 1), or [num_kv_heads,
    max_kv_tokens] per slot. As the library's tensor mode (a device tensor is
    never read on the host: graph-safe); one scale is a view of stride 0."""
    if k_scale is None and v_scale is None:
        args.scale_mode = _abi.ST_KV_SCALE_NONE
        return []
    if k_scale is None or v_scale is None:
        raise ValueError("k_scale and v_scale must be both given or both None")
    if kv_cache.dtype != torch.float8_e4m3fn:
        raise ValueError(f"k_scale and v_scale apply to an fp8 cache, kv_cache.dtype={kv_cache.dtype}")
    pages, hkv = kv_cache.shape[0], kv_cache.shape[1]
    views = [scale_view(k_scale, pages, hkv, "k_scale"), scale_view(v_scale, pages, hkv, "v_scale")]
    args.scale_mode = _abi.ST_KV_SCALE_TENSOR
    args.k_scales, args.v_scales = _tensor(views[0], "k_scale"), _tensor(views[1], "v_scale")
    return views


def scale_view(s, pages, hkv, name="scale"):
    """vLLM's scale tensor as the library's [pages, Hkv, 128] view: one scale
    (numel 1) at stride 0 everywhere; [Hkv, slots] with slot = page * 128 +
    offset, element [page, h, offset] = s[h, page * 128 + offset]."""
    if s.dtype != torch.float32:
        raise ValueError(f"{name}.dtype={s.dtype} must be float32")
    if s.numel() == 1:
        return s.reshape(1).as_strided((pages, hkv, _BLOCK), (0, 0, 0))
    if s.dim() == 2 and s.shape[0] == hkv and s.shape[1] >= pages * _BLOCK:
        return s.as_strided((pages, hkv, _BLOCK), (_BLOCK * s.stride(1), s.stride(0), s.stride(1)),
                            s.storage_offset())
    raise ValueError(f"{name}.shape={list(s.shape)} must hold one scale or be [num_kv_heads={hkv}, "
                     f">= {pages * _BLOCK} slots]")


def _positive_int(name, v, most=None):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1 or (most is not None and v > most):
        raise ValueError(f"{name}={v!r} must be an int in 1..{most if most is not None else 'inf'}")


# ---- index_decode ---------------------------------------------------------


@torch.library.custom_op("sparsetune::index_decode", mutates_args=("out",))
def index_decode(idx_q: torch.Tensor, index_kv_cache: torch.Tensor, block_table: torch.Tensor,
                 seq_lens: torch.Tensor, max_seq_len: int, topk: int, init_blocks: int, local_blocks: int,
                 decode_query_len: int, out: torch.Tensor, pdl: int = 0) -> None:
    """Block top-k of a decode batch into out[:, :total_q, :] ([H, >= total_q, topk] int32)."""
    total_q = idx_q.shape[0]
    view = out[:, :total_q, :]
    a = _abi.ARGS["index_decode"](
        q=_tensor(idx_q, "idx_q"), k_cache=_tensor(index_kv_cache, "index_kv_cache"),
        block_table=_tensor(block_table, "block_table"), seq_lens=_tensor(seq_lens, "seq_lens"),
        topk_idx=_tensor(view, "out"), qlen=decode_query_len, topk=topk, init_blocks=init_blocks,
        local_blocks=local_blocks, max_context=max_seq_len, pdl=pdl)
    _launch("index_decode", a, (idx_q, index_kv_cache, block_table, seq_lens, out))


@index_decode.register_fake
def _(idx_q, index_kv_cache, block_table, seq_lens, max_seq_len, topk, init_blocks, local_blocks,
      decode_query_len, out, pdl=0):
    return None


def minimax_m3_index_decode(idx_q, index_kv_cache, block_table, seq_lens, max_seq_len, topk, init_blocks,
                            local_blocks, num_kv_heads, decode_query_len, max_decode_query_len, out=None,
                            score_out=None):
    """vLLM's minimax_m3_index_decode: topk block ids [num_kv_heads, total_q,
    topk] int32 (-1 pads), into out[:, :total_q, :] when out is given."""
    if score_out is not None:
        raise ValueError("score_out is not supported: sparsetune's decode indexer never writes the scores")
    total_q, heads = idx_q.shape[0], idx_q.shape[1]
    if heads != num_kv_heads:
        raise ValueError(f"idx_q has {heads} heads, num_kv_heads={num_kv_heads}: M3 has one index head a KV head")
    if not 1 <= decode_query_len <= max_decode_query_len:
        raise ValueError(f"decode_query_len={decode_query_len} must be in 1..max_decode_query_len="
                         f"{max_decode_query_len}")
    if out is None:
        out = torch.empty((heads, total_q, topk), dtype=torch.int32, device=idx_q.device)
    elif out.dim() != 3 or out.shape[0] != heads or out.shape[1] < total_q or out.shape[2] != topk:
        raise ValueError(f"out.shape={list(out.shape)} must be [{heads}, >= {total_q}, {topk}]")
    torch.ops.sparsetune.index_decode(idx_q, index_kv_cache, block_table, seq_lens, max_seq_len, topk,
                                      init_blocks, local_blocks, decode_query_len, out)
    return out[:, :total_q, :]


# ---- sparse_attn_decode ---------------------------------------------------


@torch.library.custom_op("sparsetune::sparse_attn_decode", mutates_args=("output",))
def sparse_attn_decode(q: torch.Tensor, kv_cache: torch.Tensor, topk_idx: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, sm_scale: float, output: torch.Tensor, decode_query_len: int,
                       max_seq_len: int, k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None,
                       pdl: int = 0) -> None:
    """Block-sparse GQA attention of a decode batch into output [total_q, Hq, D] bf16."""
    k, v = _kv_views(kv_cache)
    a = _abi.ARGS["sparse_attn_decode"](
        q=_tensor(q, "q"), k_cache=_tensor(k, "kv_cache"), v_cache=_tensor(v, "kv_cache"),
        k_scale=1.0, v_scale=1.0, topk_idx=_tensor(topk_idx, "topk_idx"),
        block_table=_tensor(block_table, "block_table"), seq_lens=_tensor(seq_lens, "seq_lens"),
        o=_tensor(output, "output"), sm_scale=sm_scale, qlen=decode_query_len, max_context=max_seq_len, pdl=pdl)
    scales = _kv_scales(a, kv_cache, k_scale, v_scale)
    _launch("sparse_attn_decode", a, (q, kv_cache, topk_idx, block_table, seq_lens, output, *scales))


@sparse_attn_decode.register_fake
def _(q, kv_cache, topk_idx, block_table, seq_lens, sm_scale, output, decode_query_len, max_seq_len,
      k_scale=None, v_scale=None, pdl=0):
    return None


def minimax_m3_sparse_attn_decode(q, kv_cache, topk_idx, block_table, seq_lens, num_kv_heads, sm_scale, output,
                                  decode_query_len, k_scale=None, v_scale=None, max_seq_len=None):
    """vLLM's minimax_m3_sparse_attn_decode, into `output`. max_seq_len (not
    in vLLM's signature): a host-known bound on seq_lens; the default, the
    block table's capacity, is always valid but plans for the longest
    context (give the engine's bound where it has one)."""
    if kv_cache.dim() != 4 or kv_cache.shape[1] != num_kv_heads:
        raise ValueError(f"kv_cache.shape={list(kv_cache.shape)} must be [num_blocks, num_kv_heads="
                         f"{num_kv_heads}, 128, 2 * head_dim]")
    bound = block_table.shape[1] * _BLOCK if max_seq_len is None else max_seq_len
    torch.ops.sparsetune.sparse_attn_decode(q, kv_cache, topk_idx, block_table, seq_lens, float(sm_scale), output,
                                            decode_query_len, bound, k_scale, v_scale)


# ---- index_score, index_topk, index_prefill -------------------------------


def _score_cols(max_seq_len):
    """vLLM's score columns: the blocks of max_seq_len, rounded up to 16."""
    blocks = -(-max_seq_len // _BLOCK)
    return -(-blocks // 16) * 16


@torch.library.custom_op("sparsetune::index_score", mutates_args=())
def index_score(idx_q: torch.Tensor, index_kv_cache: torch.Tensor, block_table: torch.Tensor,
                cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor, max_seq_len: int) -> torch.Tensor:
    """Block scores [H, total_q, round_up(blocks, 16)] fp32 (a token's
    columns past its visible blocks are not written), scale 1."""
    score = torch.empty((idx_q.shape[1], idx_q.shape[0], _score_cols(max_seq_len)), dtype=torch.float32,
                        device=idx_q.device)
    a = _abi.ARGS["index_score"](
        q=_tensor(idx_q, "idx_q"), k_cache=_tensor(index_kv_cache, "index_kv_cache"),
        block_table=_tensor(block_table, "block_table"), cu_seqlens_q=_tensor(cu_seqlens_q, "cu_seqlens_q"),
        seq_lens=_tensor(seq_lens, "seq_lens"), score=_tensor(score, "score"), scale=1.0, max_context=max_seq_len)
    _launch("index_score", a, (idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, score))
    return score


@index_score.register_fake
def _(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, max_seq_len):
    return idx_q.new_empty((idx_q.shape[1], idx_q.shape[0], _score_cols(max_seq_len)), dtype=torch.float32)


def _seq_lens(cu_seqlens_q, prefix_lens):
    """Tokens per request (prefix + query tokens), as the library takes them."""
    return (prefix_lens + (cu_seqlens_q[1:] - cu_seqlens_q[:-1])).to(torch.int32)


def minimax_m3_index_score(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, prefix_lens, max_query_len,
                           max_seq_len, num_kv_heads):
    """vLLM's minimax_m3_index_score: scores [num_kv_heads, total_q,
    round_up(ceil(max_seq_len / 128), 16)] fp32."""
    if idx_q.shape[1] != num_kv_heads:
        raise ValueError(f"idx_q has {idx_q.shape[1]} heads, num_kv_heads={num_kv_heads}")
    return torch.ops.sparsetune.index_score(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, max_seq_len)


@torch.library.custom_op("sparsetune::index_topk", mutates_args=("out",))
def index_topk(score: torch.Tensor, cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor, topk: int,
               init_blocks: int, local_blocks: int, out: torch.Tensor) -> None:
    """Block top-k of each (head, token) row of `score` into out[:, :total_q, :]."""
    total_q = score.shape[1]
    a = _abi.ARGS["index_topk"](
        score=_tensor(score, "score"), cu_seqlens_q=_tensor(cu_seqlens_q, "cu_seqlens_q"),
        seq_lens=_tensor(seq_lens, "seq_lens"), topk_idx=_tensor(out[:, :total_q, :], "out"), topk=topk,
        init_blocks=init_blocks, local_blocks=local_blocks, max_context=score.shape[2] * _BLOCK)
    _launch("index_topk", a, (score, cu_seqlens_q, seq_lens, out))


@index_topk.register_fake
def _(score, cu_seqlens_q, seq_lens, topk, init_blocks, local_blocks, out):
    return None


def _topk_out(out, heads, total_q, topk, device):
    if out is None:
        return torch.empty((heads, total_q, topk), dtype=torch.int32, device=device)
    if out.dim() != 3 or out.shape[0] != heads or out.shape[1] < total_q or out.shape[2] != topk:
        raise ValueError(f"out.shape={list(out.shape)} must be [{heads}, >= {total_q}, {topk}]")
    return out


def minimax_m3_index_topk(score, cu_seqlens_q, prefix_lens, max_query_len, topk, init_blocks, local_blocks,
                          out=None):
    """vLLM's minimax_m3_index_topk: block ids [H, total_q, topk] int32 (-1
    pads), into out[:, :total_q, :] when out is given."""
    _positive_int("topk", topk, 64)
    heads, total_q = score.shape[0], score.shape[1]
    out = _topk_out(out, heads, total_q, topk, score.device)
    torch.ops.sparsetune.index_topk(score, cu_seqlens_q, _seq_lens(cu_seqlens_q, prefix_lens), topk, init_blocks,
                                    local_blocks, out)
    return out[:, :total_q, :]


@torch.library.custom_op("sparsetune::index_prefill", mutates_args=("out",))
def index_prefill(idx_q: torch.Tensor, index_kv_cache: torch.Tensor, block_table: torch.Tensor,
                  cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor, max_seq_len: int, topk: int,
                  init_blocks: int, local_blocks: int, out: torch.Tensor) -> None:
    """index_score and index_topk in one call (the scores never written)."""
    total_q = idx_q.shape[0]
    a = _abi.ARGS["index_prefill"](
        q=_tensor(idx_q, "idx_q"), k_cache=_tensor(index_kv_cache, "index_kv_cache"),
        block_table=_tensor(block_table, "block_table"), cu_seqlens_q=_tensor(cu_seqlens_q, "cu_seqlens_q"),
        seq_lens=_tensor(seq_lens, "seq_lens"), topk_idx=_tensor(out[:, :total_q, :], "out"), topk=topk,
        init_blocks=init_blocks, local_blocks=local_blocks, max_context=max_seq_len)
    _launch("index_prefill", a, (idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, out))


@index_prefill.register_fake
def _(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, max_seq_len, topk, init_blocks, local_blocks,
      out):
    return None


def minimax_m3_index_prefill(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, max_seq_len, topk,
                             init_blocks, local_blocks, out=None):
    """The fused prefill indexer (no vLLM counterpart: its two calls
    minimax_m3_index_score + minimax_m3_index_topk): block ids [H, total_q,
    topk] int32."""
    _positive_int("topk", topk, 64)
    out = _topk_out(out, idx_q.shape[1], idx_q.shape[0], topk, idx_q.device)
    torch.ops.sparsetune.index_prefill(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, max_seq_len, topk,
                                       init_blocks, local_blocks, out)
    return out[:, :idx_q.shape[0], :]


# ---- sparse_attn (prefill) ------------------------------------------------


@torch.library.custom_op("sparsetune::sparse_attn", mutates_args=("output",))
def sparse_attn(q: torch.Tensor, kv_cache: torch.Tensor, topk_idx: torch.Tensor, block_table: torch.Tensor,
                cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor, sm_scale: float, output: torch.Tensor,
                max_seq_len: int, k_scale: torch.Tensor | None = None,
                v_scale: torch.Tensor | None = None) -> None:
    """Block-sparse GQA attention of a varlen prefill batch into output [total_q, Hq, D] bf16."""
    k, v = _kv_views(kv_cache)
    a = _abi.ARGS["sparse_attn"](
        q=_tensor(q, "q"), k_cache=_tensor(k, "kv_cache"), v_cache=_tensor(v, "kv_cache"), k_scale=1.0,
        v_scale=1.0, topk_idx=_tensor(topk_idx, "topk_idx"), block_table=_tensor(block_table, "block_table"),
        cu_seqlens_q=_tensor(cu_seqlens_q, "cu_seqlens_q"), seq_lens=_tensor(seq_lens, "seq_lens"),
        o=_tensor(output, "output"), sm_scale=sm_scale, max_context=max_seq_len)
    scales = _kv_scales(a, kv_cache, k_scale, v_scale)
    _launch("sparse_attn", a, (q, kv_cache, topk_idx, block_table, cu_seqlens_q, seq_lens, output, *scales))


@sparse_attn.register_fake
def _(q, kv_cache, topk_idx, block_table, cu_seqlens_q, seq_lens, sm_scale, output, max_seq_len, k_scale=None,
      v_scale=None):
    return None


def minimax_m3_sparse_attn(q, kv_cache, topk_idx, block_table, cu_seqlens_q, seq_lens, prefix_lens, max_query_len,
                           num_kv_heads, sm_scale, output, k_scale=None, v_scale=None, max_seq_len=None):
    """vLLM's minimax_m3_sparse_attn, into `output`. seq_lens: tokens per
    request, prefix included (prefix_lens is then implied and only checked
    for shape). max_seq_len as in minimax_m3_sparse_attn_decode."""
    if prefix_lens.shape != seq_lens.shape:
        raise ValueError(f"prefix_lens.shape={list(prefix_lens.shape)} must equal seq_lens.shape="
                         f"{list(seq_lens.shape)}")
    if kv_cache.dim() != 4 or kv_cache.shape[1] != num_kv_heads:
        raise ValueError(f"kv_cache.shape={list(kv_cache.shape)} must be [num_blocks, num_kv_heads="
                         f"{num_kv_heads}, 128, 2 * head_dim]")
    bound = block_table.shape[1] * _BLOCK if max_seq_len is None else max_seq_len
    torch.ops.sparsetune.sparse_attn(q, kv_cache, topk_idx, block_table, cu_seqlens_q, seq_lens, float(sm_scale),
                                     output, bound, k_scale, v_scale)


# ---- DeepSeek-V3.2: sparse MLA and the DSA indexer -------------------------
#
# In the library's layouts (runtime/include/sparsetune.h), which are
# FlashMLA's and DeepGEMM's up to views: the wrappers below take FlashMLA's
# 4-D q and cache ([B, s_q, h_q, 576], [blocks, page_size, 1, 656 or 576],
# a uint8 fp8 cache read as float8_e4m3fn) and flatten them.

_FP8_ROW, _BF16_ROW, _D_QK, _D_V = 656, 576, 576, 512


def _opt(x, name):
    """An optional tensor: NULL when None (the library reads data NULL as absent)."""
    return _abi.st_tensor() if x is None else _tensor(x, name)


@torch.library.custom_op("sparsetune::mla_sparse_decode", mutates_args=("out", "lse"))
def mla_sparse_decode(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float, qlen: int,
                      out: torch.Tensor, lse: torch.Tensor | None = None, topk_length: torch.Tensor | None = None,
                      attn_sink: torch.Tensor | None = None, pdl: int = 0) -> None:
    """Token-sparse MLA decode: q [B*qlen, h_q, 576] bf16, kv_cache [pages,
    page_size, 576] bf16 or [pages, page_size, 656] fp8, indices [B*qlen,
    topk] int32 slots (-1 none) -> out [B*qlen, h_q, 512] bf16, lse [B*qlen,
    h_q] fp32 (natural log) when given."""
    a = _abi.ARGS["mla_sparse_decode"](
        q=_tensor(q, "q"), kv_cache=_tensor(kv_cache, "kv_cache"), indices=_tensor(indices, "indices"),
        topk_length=_opt(topk_length, "topk_length"), attn_sink=_opt(attn_sink, "attn_sink"), o=_tensor(out, "out"),
        lse=_opt(lse, "lse"), sm_scale=sm_scale, qlen=qlen, pdl=pdl)
    _launch("mla_sparse_decode", a,
            [t for t in (q, kv_cache, indices, out, lse, topk_length, attn_sink) if t is not None])


@mla_sparse_decode.register_fake
def _(q, kv_cache, indices, sm_scale, qlen, out, lse=None, topk_length=None, attn_sink=None, pdl=0):
    return None


def _fp8_bytes(kv):
    return kv.view(torch.float8_e4m3fn) if kv.dtype == torch.uint8 else kv


def flash_mla_sparse_decode(q, k_cache, indices, softmax_scale, topk_length=None, attn_sink=None, out=None,
                            return_lse=True):
    """FlashMLA's sparse decode (flash_mla_with_kvcache with indices) in its
    layouts: q [B, s_q, h_q, 576] bf16, k_cache [blocks, page_size, 1, 656]
    (fp8, uint8 or float8_e4m3fn) or [..., 576] bf16, indices [B, s_q, topk]
    int32 slots. Returns out [B, s_q, h_q, 512] bf16 and, with return_lse,
    lse [B, s_q, h_q] fp32 in natural log (FlashMLA's is [B, h_q, s_q])."""
    if q.dim() != 4 or q.shape[3] != _D_QK:
        raise ValueError(f"q.shape={list(q.shape)} must be [B, s_q, h_q, {_D_QK}]")
    if k_cache.dim() != 4 or k_cache.shape[2] != 1 or k_cache.shape[3] not in (_FP8_ROW, _BF16_ROW):
        raise ValueError(f"k_cache.shape={list(k_cache.shape)} must be [blocks, page_size, 1, {_FP8_ROW} (fp8) or "
                         f"{_BF16_ROW} (bf16)]")
    B, s_q, h_q, _ = q.shape
    if indices.dim() != 3 or tuple(indices.shape[:2]) != (B, s_q):
        raise ValueError(f"indices.shape={list(indices.shape)} must be [B={B}, s_q={s_q}, topk]")
    if out is None:
        out = q.new_empty((B, s_q, h_q, _D_V))
    lse = q.new_empty((B, s_q, h_q), dtype=torch.float32) if return_lse else None
    torch.ops.sparsetune.mla_sparse_decode(
        q.reshape(B * s_q, h_q, _D_QK), _fp8_bytes(k_cache).squeeze(2), indices.reshape(B * s_q, -1),
        float(softmax_scale), s_q, out.view(B * s_q, h_q, _D_V), None if lse is None else lse.view(B * s_q, h_q),
        topk_length, attn_sink)
    return (out, lse) if return_lse else out


@torch.library.custom_op("sparsetune::mla_sparse_prefill", mutates_args=("out", "lse", "max_logits"))
def mla_sparse_prefill(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sm_scale: float, out: torch.Tensor,
                       lse: torch.Tensor | None = None, max_logits: torch.Tensor | None = None,
                       topk_length: torch.Tensor | None = None, attn_sink: torch.Tensor | None = None,
                       pdl: int = 0) -> None:
    """FlashMLA's sparse prefill (flash_mla_sparse_fwd): q [s_q, h_q, 576]
    bf16, kv [s_kv, 1, 576] bf16, indices [s_q, 1, topk] int32 rows of kv
    (-1 none) -> out [s_q, h_q, 512] bf16; lse and max_logits [s_q, h_q] fp32
    when given."""
    a = _abi.ARGS["mla_sparse_prefill"](
        q=_tensor(q, "q"), kv=_tensor(kv, "kv"), indices=_tensor(indices, "indices"),
        topk_length=_opt(topk_length, "topk_length"), attn_sink=_opt(attn_sink, "attn_sink"), o=_tensor(out, "out"),
        lse=_opt(lse, "lse"), max_logits=_opt(max_logits, "max_logits"), sm_scale=sm_scale, pdl=pdl)
    _launch("mla_sparse_prefill", a,
            [t for t in (q, kv, indices, out, lse, max_logits, topk_length, attn_sink) if t is not None])


@mla_sparse_prefill.register_fake
def _(q, kv, indices, sm_scale, out, lse=None, max_logits=None, topk_length=None, attn_sink=None, pdl=0):
    return None


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=_D_V, attn_sink=None, topk_length=None, out=None):
    """FlashMLA's flash_mla_sparse_fwd: returns (out [s_q, h_q, 512] bf16,
    max_logits [s_q, h_q] fp32, lse [s_q, h_q] fp32, natural log)."""
    if d_v != _D_V:
        raise ValueError(f"d_v={d_v}: DeepSeek-V3.2's MLA has d_v {_D_V}")
    if q.dim() != 3 or q.shape[2] != _D_QK:
        raise ValueError(f"q.shape={list(q.shape)} must be [s_q, h_q, {_D_QK}]")
    s_q, h_q, _ = q.shape
    if out is None:
        out = q.new_empty((s_q, h_q, _D_V))
    lse = q.new_empty((s_q, h_q), dtype=torch.float32)
    max_logits = q.new_empty((s_q, h_q), dtype=torch.float32)
    torch.ops.sparsetune.mla_sparse_prefill(q, kv, indices, float(sm_scale), out, lse, max_logits, topk_length,
                                            attn_sink)
    return out, max_logits, lse


@torch.library.custom_op("sparsetune::dsa_index_decode", mutates_args=("topk_idx",))
def dsa_index_decode(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor,
                     seq_lens: torch.Tensor, qlen: int, page_size: int, max_context: int, topk_idx: torch.Tensor,
                     pdl: int = 0) -> None:
    """DeepSeek-V3.2's decode indexer, fused: q [R*qlen, H, 128] fp8,
    weights [R*qlen, H] fp32, k_cache [pages, page_size * 132] (fp8 values
    then fp32 scales a page; uint8 accepted) -> topk_idx [R*qlen, topk]
    int32 token positions (-1 after)."""
    a = _abi.ARGS["dsa_index_decode"](
        q=_tensor(q, "q"), weights=_tensor(weights, "weights"), k_cache=_tensor(_fp8_bytes(k_cache), "k_cache"),
        block_table=_tensor(block_table, "block_table"), seq_lens=_tensor(seq_lens, "seq_lens"),
        topk_idx=_tensor(topk_idx, "topk_idx"), qlen=qlen, topk=topk_idx.shape[1], page_size=page_size,
        max_context=max_context, pdl=pdl)
    _launch("dsa_index_decode", a, (q, weights, k_cache, block_table, seq_lens, topk_idx))


@dsa_index_decode.register_fake
def _(q, weights, k_cache, block_table, seq_lens, qlen, page_size, max_context, topk_idx, pdl=0):
    return None


@torch.library.custom_op("sparsetune::dsa_index_logits", mutates_args=("logits",))
def dsa_index_logits(q: torch.Tensor, k: torch.Tensor, k_scale: torch.Tensor, weights: torch.Tensor,
                     ks: torch.Tensor, ke: torch.Tensor, logits: torch.Tensor) -> None:
    """DeepSeek-V3.2's prefill indexer logits (DeepGEMM's fp8_mqa_logits):
    q [s_q, H, 128] fp8, k [s_kv, 128] fp8 with k_scale [s_kv] fp32, weights
    [s_q, H] fp32, each query's range [ks, ke) -> logits [s_q, s_kv] fp32
    (-inf outside the range)."""
    a = _abi.ARGS["dsa_index_logits"](
        q=_tensor(q, "q"), k=_tensor(k, "k"), k_scale=_tensor(k_scale, "k_scale"), weights=_tensor(weights, "weights"),
        ks=_tensor(ks, "ks"), ke=_tensor(ke, "ke"), logits=_tensor(logits, "logits"))
    _launch("dsa_index_logits", a, (q, k, k_scale, weights, ks, ke, logits))


@dsa_index_logits.register_fake
def _(q, k, k_scale, weights, ks, ke, logits):
    return None


@torch.library.custom_op("sparsetune::dsa_index_topk", mutates_args=("topk_idx",))
def dsa_index_topk(logits: torch.Tensor, ks: torch.Tensor, ke: torch.Tensor, topk_idx: torch.Tensor) -> None:
    """The positions of each row's topk_idx.shape[1] largest logits in [ks,
    ke) (-1 after), into topk_idx [s_q, topk] int32."""
    a = _abi.ARGS["dsa_index_topk"](
        logits=_tensor(logits, "logits"), ks=_tensor(ks, "ks"), ke=_tensor(ke, "ke"),
        topk_idx=_tensor(topk_idx, "topk_idx"), topk=topk_idx.shape[1])
    _launch("dsa_index_topk", a, (logits, ks, ke, topk_idx))


@dsa_index_topk.register_fake
def _(logits, ks, ke, topk_idx):
    return None
