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
