#!/usr/bin/env python3
"""peer_mla.py - mla_sparse_decode side by side with FlashMLA's sparse decode.

Builds one set of inputs per case on the GPU (DeepSeek-V3.2's fp8 cache: 656-byte
token rows of 512 e4m3 latent values, 4 fp32 group scales and 64 bf16 RoPE values,
pages of 64 tokens in a pool several times the L2 cache; 32K-token contexts, each a
block table of random pages; indices distinct random slots of the request's own
pages), feeds the same bytes to FlashMLA (as vLLM 0.33.0 builds it, put in .peer/ by
the peer fetch script) and to libsparsetune's st_mla_sparse_decode (through ctypes),
checks both against a float64 torch reference on a few rows and against each other,
then times both as CUDA-graph replays on one stream. One JSON line per case.

    python3 scripts/peer_mla.py --check-abi            # no GPU, no torch: ctypes vs the C header
    python3 scripts/peer_mla.py --cases anchors --out peer_mla.jsonl
    python3 scripts/peer_mla.py --cases all --db sparsetune.db --out peer_mla.jsonl

Exit status: 0 all checks passed, 1 a check or a call failed, 2 the environment lacks
something (torch, a GPU, the library, the peer) or the arguments are wrong.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_DIR = os.path.join(ROOT, "runtime", "include")

# ---------------------------------------------------------------- the C ABI (sparsetune.h)
ST_OK = 0
ST_MAX_DIMS = 6
ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3, ST_DTYPE_INT32, ST_DTYPE_FP32 = 1, 2, 3, 4
C_ENUM = ctypes.c_int  # st_status, st_dtype: int-sized enums on LP64 Linux


class StTensor(ctypes.Structure):
    """st_tensor: shapes and strides in elements, innermost stride 1."""
    c_name = "st_tensor"
    _fields_ = [("data", ctypes.c_void_p),
                ("dtype", C_ENUM),
                ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * ST_MAX_DIMS),
                ("stride", ctypes.c_int64 * ST_MAX_DIMS)]


class MlaSparseDecodeArgs(ctypes.Structure):
    """st_mla_sparse_decode_args; struct_size is set by st_mla_sparse_decode_args_init."""
    c_name = "st_mla_sparse_decode_args"
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("q", StTensor),
                ("kv_cache", StTensor),
                ("indices", StTensor),
                ("topk_length", StTensor),
                ("attn_sink", StTensor),
                ("o", StTensor),
                ("lse", StTensor),
                ("sm_scale", ctypes.c_float),
                ("qlen", ctypes.c_int),
                ("pdl", ctypes.c_int)]


ABI_STRUCTS = (StTensor, MlaSparseDecodeArgs)
ABI_CONSTANTS = {"ST_OK": ST_OK, "ST_MAX_DIMS": ST_MAX_DIMS, "ST_DTYPE_BF16": ST_DTYPE_BF16,
                 "ST_DTYPE_FP8_E4M3": ST_DTYPE_FP8_E4M3, "ST_DTYPE_INT32": ST_DTYPE_INT32,
                 "ST_DTYPE_FP32": ST_DTYPE_FP32}


def declare(lib):
    """Argument and return types of the functions this script calls."""
    handle, ptr, args_p = ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(MlaSparseDecodeArgs)
    sigs = {
        "st_open": ([ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)], C_ENUM),
        "st_close": ([handle], None),
        "st_last_error": ([handle], ctypes.c_char_p),
        "st_status_name": ([C_ENUM], ctypes.c_char_p),
        "st_version": ([], ctypes.c_char_p),
        "st_last_variant": ([handle], ctypes.c_char_p),
        "st_mla_sparse_decode_args_init": ([args_p], None),
        "st_mla_sparse_decode_workspace_size": ([handle, args_p, ctypes.POINTER(ctypes.c_size_t)], C_ENUM),
        "st_mla_sparse_decode_prepare": ([handle, args_p], C_ENUM),
        "st_mla_sparse_decode": ([handle, args_p, ptr, ctypes.c_size_t, ptr], C_ENUM),
    }
    for name, (argtypes, restype) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    return lib


# ---------------------------------------------------------------- --check-abi
def ctypes_layout(structs=ABI_STRUCTS):
    """'name size N', 'name align N', 'name.field offset N size N' lines, and the constants."""
    lines = []
    for s in structs:
        lines.append(f"{s.c_name} size {ctypes.sizeof(s)}")
        lines.append(f"{s.c_name} align {ctypes.alignment(s)}")
        for name, _ in s._fields_:
            f = getattr(s, name)
            lines.append(f"{s.c_name}.{name} offset {f.offset} size {f.size}")
    lines += [f"{k} {v}" for k, v in ABI_CONSTANTS.items()]
    return lines


def c_layout_source(structs=ABI_STRUCTS):
    """A C program printing the same lines as ctypes_layout, from the header."""
    body = []
    for s in structs:
        t = s.c_name
        body.append(f'  printf("{t} size %zu\\n", sizeof({t}));')
        body.append(f'  printf("{t} align %zu\\n", (size_t)_Alignof({t}));')
        for name, _ in s._fields_:
            body.append(f'  printf("{t}.{name} offset %zu size %zu\\n", offsetof({t}, {name}), '
                        f'sizeof((({t} *)0)->{name}));')
    body += [f'  printf("{k} %d\\n", (int){k});' for k in ABI_CONSTANTS]
    return ("#include <stddef.h>\n#include <stdio.h>\n#include \"sparsetune.h\"\n\nint main(void) {\n"
            + "\n".join(body) + "\n  return 0;\n}\n")


def c_layout(structs=ABI_STRUCTS):
    """Compiles and runs c_layout_source with cc from PATH; its output lines."""
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(c_layout_source(structs))
        cmd = ["cc", "-std=c11", "-Wall", "-Werror", "-I", HEADER_DIR, src, "-o", exe]
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        except FileNotFoundError:
            raise SystemExit(fail(2, "no C compiler: `cc` is not on PATH"))
        except subprocess.CalledProcessError as e:
            raise SystemExit(fail(1, f"{' '.join(cmd)} failed:\n{e.stderr}"))
        return subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()


def init_struct_size(lib_path):
    """struct_size as the library's st_mla_sparse_decode_args_init sets it (needs no GPU),
    or None where the library does not load."""
    try:
        lib = declare(ctypes.CDLL(lib_path))
    except OSError as e:
        print(f"{lib_path} not loaded ({e}): struct_size of st_mla_sparse_decode_args_init not checked")
        return None
    args = MlaSparseDecodeArgs()
    lib.st_mla_sparse_decode_args_init(ctypes.byref(args))
    return args.struct_size


def check_abi(lib_path):
    py, c = ctypes_layout(), c_layout()
    bad = [(a, b) for a, b in zip(py, c) if a != b]
    if len(py) != len(c):
        bad.append((f"{len(py)} ctypes lines", f"{len(c)} C lines"))
    for a, b in bad:
        print(f"MISMATCH ctypes: {a}  C: {b}")
    print(f"{len(c)} layout lines compared (sizes, alignments, offsets and sizes of every field of "
          f"{', '.join(s.c_name for s in ABI_STRUCTS)}; st_dtype values) against {HEADER_DIR}/sparsetune.h")
    n = init_struct_size(lib_path) if os.path.exists(lib_path) else None
    if n is not None:
        if n != ctypes.sizeof(MlaSparseDecodeArgs):
            bad.append(("struct_size", n))
            print(f"MISMATCH st_mla_sparse_decode_args_init sets struct_size {n}, "
                  f"ctypes size {ctypes.sizeof(MlaSparseDecodeArgs)}")
        else:
            print(f"{lib_path}: st_mla_sparse_decode_args_init sets struct_size {n}, the ctypes size")
    print("ABI check: " + ("FAILED" if bad else "ctypes layout matches the header"))
    return 1 if bad else 0


# ---------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    B: int
    h_q: int
    topk: int = 2048
    qlen: int = 1
    ctx: int = 32768
    topk_length: bool = False
    attn_sink: bool = False

    @property
    def rows(self):
        return self.B * self.qlen

    @property
    def name(self):
        extra = (" len" if self.topk_length else "") + (" sink" if self.attn_sink else "")
        return f"fp8 B{self.B} qlen{self.qlen} h_q{self.h_q} topk{self.topk} ctx{self.ctx}{extra}"


# FlashMLA's four rows of docs/kernels/mla_sparse_decode.md's table.
ANCHORS = [Case(1, 128), Case(32, 128), Case(128, 128), Case(128, 64)]
MORE = ([Case(B, 128, qlen=2) for B in (1, 32, 64)]
        + [Case(B, 128, topk=t) for B in (32, 128) for t in (512, 1024)]
        + [Case(B, h) for B in (32, 128) for h in (16, 32, 64) if (B, h) != (128, 64)]
        + [Case(32, 128, topk_length=True), Case(128, 64, topk_length=True)]
        + [Case(32, 128, attn_sink=True), Case(128, 64, attn_sink=True)]
        + [Case(32, 128, qlen=2, topk_length=True, attn_sink=True)])
CASES = {"anchors": ANCHORS, "all": ANCHORS + MORE}


# ---------------------------------------------------------------- errors
class StError(RuntimeError):
    """A libsparsetune call returned a status other than ST_OK."""


def fail(code, msg):
    print(f"peer_mla: {msg}", file=sys.stderr)
    return code


# ---------------------------------------------------------------- the GPU path
PAGE = 64                 # tokens a page (DeepSeek-V3.2)
DIM_QK, DIM_V = 576, 512  # latent + RoPE, latent
GROUP = 128               # latent values a scale
ROW_BYTES = 656           # 512 e4m3 + 4 fp32 scales + 64 bf16
E4M3_MAX = 448.0
POOL_L2_MULTIPLE = 8      # the page pool is at least this many times the L2 cache
O_TOL = 2e-2              # relative error of o per (row, head) vs the float64 reference
LSE_TOL = 2e-2            # absolute error of lse (natural log)


def gpu_modules():
    """torch, or None with the reason."""
    try:
        import torch
    except ImportError:
        return None, "no torch: the GPU path needs torch with CUDA (--check-abi needs neither)"
    if not torch.cuda.is_available():
        return None, "no GPU: torch.cuda.is_available() is False (--check-abi needs no GPU)"
    return torch, None


def load_peer(peer_dir):
    for f in ("fmla.py", "_flashmla_C.abi3.so"):
        if not os.path.isfile(os.path.join(peer_dir, f)):
            raise SystemExit(fail(2, f"no peer: {os.path.join(peer_dir, f)} is missing (run the peer fetch "
                                     "script, or pass --peer DIR)"))
    sys.path.insert(0, os.path.abspath(peer_dir))
    try:
        import fmla  # noqa: E402  (FlashMLA's interface, from --peer)
    except (ImportError, OSError, RuntimeError) as e:
        raise SystemExit(fail(2, f"cannot load the peer from {peer_dir}: {e}"))
    return fmla


def pack_rows(torch, latent, rope):
    """[n, PAGE, 512] fp32 latent and [n, PAGE, 64] bf16 RoPE -> [n, PAGE, 656] uint8 rows:
    e4m3 latent (each 128-value group divided by its scale amax/448), the 4 fp32 scales,
    the bf16 RoPE, in FlashMLA's documented order."""
    n = latent.shape[0]
    groups = latent.view(n, PAGE, DIM_V // GROUP, GROUP)
    scale = groups.abs().amax(-1).clamp_min(1e-6) / E4M3_MAX
    q8 = (groups / scale[..., None]).to(torch.float8_e4m3fn).view(n, PAGE, DIM_V)
    out = torch.empty(n, PAGE, ROW_BYTES, dtype=torch.uint8, device=latent.device)
    out[..., :DIM_V] = q8.view(torch.uint8)
    out[..., DIM_V:DIM_V + 16] = scale.float().contiguous().view(torch.uint8)
    out[..., DIM_V + 16:] = rope.contiguous().view(torch.uint8)
    return out


def unpack_rows(torch, rows):
    """[n, 656] uint8 -> K [n, 576] float64 as the op contract dequantizes it."""
    latent = rows[:, :DIM_V].contiguous().view(torch.float8_e4m3fn).float().double()
    scale = rows[:, DIM_V:DIM_V + 16].contiguous().view(torch.float32).to(torch.float64)
    rope = rows[:, DIM_V + 16:].contiguous().view(torch.bfloat16).to(torch.float64)
    latent = (latent.view(-1, DIM_V // GROUP, GROUP) * scale[..., None]).view(-1, DIM_V)
    return torch.cat([latent, rope], dim=1)


def make_pool(torch, pages, gen, chunk=2048):
    """The page pool, random non-zero latent and RoPE, packed chunk by chunk."""
    pool = torch.empty(pages, PAGE, ROW_BYTES, dtype=torch.uint8, device="cuda")
    for p in range(0, pages, chunk):
        n = min(chunk, pages - p)
        latent = torch.randn(n, PAGE, DIM_V, device="cuda", generator=gen)
        rope = torch.randn(n, PAGE, DIM_QK - DIM_V, device="cuda", generator=gen).to(torch.bfloat16)
        pool[p:p + n] = pack_rows(torch, latent, rope)
        if p == 0:  # the packing read back: each value within e4m3's rounding of its group's scale
            k = unpack_rows(torch, pool[0].view(PAGE, ROW_BYTES))
            err = (k[:, :DIM_V] - latent[0].double()).abs().max().item()
            assert err <= latent[0].abs().max().item() / 16, f"packing read back off by {err}"
            assert torch.equal(k[:, DIM_V:], rope[0].double()), "RoPE read back differs"
    return pool


def pool_pages(torch, case):
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
    least = math.ceil(POOL_L2_MULTIPLE * l2 / (PAGE * ROW_BYTES))
    return max(case.B * (case.ctx // PAGE), least)


def make_inputs(torch, case, seed):
    """Every tensor of a case, shared by both sides (views differ, bytes do not)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    pages = pool_pages(torch, case)
    pages_per_req = case.ctx // PAGE
    d = {"pages": pages, "pool": make_pool(torch, pages, gen)}
    perm = torch.randperm(pages, device="cuda", generator=gen)[:case.B * pages_per_req]
    d["block_table"] = perm.view(case.B, pages_per_req).to(torch.int32)
    # distinct positions per row among the request's ctx tokens, then their physical slots
    pos = torch.rand(case.rows, case.ctx, device="cuda", generator=gen).topk(case.topk, dim=1).indices
    bt = d["block_table"].long().repeat_interleave(case.qlen, dim=0)
    d["indices"] = (torch.gather(bt, 1, pos // PAGE) * PAGE + pos % PAGE).to(torch.int32).contiguous()
    d["q"] = torch.randn(case.rows, case.h_q, DIM_QK, device="cuda", generator=gen).to(torch.bfloat16)
    d["topk_length"] = (torch.randint(1, case.topk + 1, (case.B,), device="cuda", generator=gen,
                                      dtype=torch.int32) if case.topk_length else None)
    d["attn_sink"] = ((torch.randn(case.h_q, device="cuda", generator=gen) * 2 + math.log(case.topk))
                      if case.attn_sink else None)
    d["sm_scale"] = DIM_QK ** -0.5  # FlashMLA's default, q.shape[-1] ** -0.5
    return d


def entry_mask(torch, case, d):
    """[rows, topk] bool: the entries that count (valid slot, within topk_length)."""
    idx = d["indices"]
    m = (idx >= 0) & (idx < d["pages"] * PAGE)
    if d["topk_length"] is not None:
        lens = d["topk_length"].long().repeat_interleave(case.qlen).clamp(0, case.topk)
        m &= torch.arange(case.topk, device="cuda")[None, :] < lens[:, None]
    return m


def reference_rows(torch, case, d, rows):
    """float64 o [len(rows), h_q, 512] and natural-log lse [len(rows), h_q]."""
    flat = d["pool"].view(-1, ROW_BYTES)
    mask = entry_mask(torch, case, d)
    o = torch.zeros(len(rows), case.h_q, DIM_V, dtype=torch.float64, device="cuda")
    lse = torch.full((len(rows), case.h_q), -math.inf, dtype=torch.float64, device="cuda")
    for i, r in enumerate(rows):
        slots = d["indices"][r][mask[r]].long()
        if slots.numel() == 0:
            continue
        k = unpack_rows(torch, flat[slots])
        s = d["q"][r].double() @ k.T * d["sm_scale"]
        lse[i] = torch.logsumexp(s, dim=-1)
        o[i] = torch.softmax(s, dim=-1) @ k[:, :DIM_V]
        if d["attn_sink"] is not None:
            o[i] *= torch.sigmoid(lse[i] - d["attn_sink"].double())[:, None]
    return o, lse


def o_relerr(torch, got, want):
    """Largest relative error of o over (row, head): |got - want| / |want| over the 512 dims."""
    got, want = got.double(), want.double()
    num = (got - want).norm(dim=-1)
    den = want.norm(dim=-1).clamp_min(1e-30)
    return (num / den).max().item()


def lse_err(torch, got, want):
    """Largest absolute error of lse; equal infinities count as 0."""
    got, want = got.double(), want.double()
    same_inf = torch.isinf(got) & (got == want)
    return torch.where(same_inf, torch.zeros_like(got), (got - want).abs()).max().item()


def sample_rows(case):
    return sorted({0, case.rows // 3, (2 * case.rows) // 3, case.rows - 1})


# ---------------------------------------------------------------- sparsetune side
class Sparsetune:
    """libsparsetune through ctypes: one handle, one prepared call per case."""

    def __init__(self, torch, lib_path, db_path):
        self.torch = torch
        torch.cuda.init()  # the runtime's primary context first; st_open retains the same one
        self.lib = declare(ctypes.CDLL(lib_path))
        self.version = self.lib.st_version().decode()
        h = ctypes.c_void_p()
        rc = self.lib.st_open(db_path.encode() if db_path else None, torch.cuda.current_device(), ctypes.byref(h))
        if rc != ST_OK:
            raise StError(f"st_open({db_path or 'no database'}): {self.status(rc)}: {self.message(None)}")
        self.handle = h

    def status(self, rc):
        return (self.lib.st_status_name(rc) or b"?").decode()

    def message(self, handle):
        m = self.lib.st_last_error(handle)
        return m.decode(errors="replace") if m else ""

    def check(self, rc, what):
        if rc != ST_OK:
            raise StError(f"{what}: {self.status(rc)}: {self.message(self.handle)}")

    def view(self, x, dtype=None):
        """st_tensor of a CUDA tensor (None: an absent optional tensor, data NULL)."""
        t = StTensor()
        if x is None:
            return t
        dtypes = {self.torch.bfloat16: ST_DTYPE_BF16, self.torch.int32: ST_DTYPE_INT32,
                  self.torch.float32: ST_DTYPE_FP32}
        t.data, t.dtype, t.ndim = x.data_ptr(), dtype or dtypes[x.dtype], x.dim()
        for i, (n, s) in enumerate(zip(x.shape, x.stride())):
            t.shape[i], t.stride[i] = n, s
        return t

    def plan(self, case, d):
        """Args, outputs and workspace for the case; prepares the module (before any capture)."""
        torch = self.torch
        o = torch.empty(case.rows, case.h_q, DIM_V, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(case.rows, case.h_q, dtype=torch.float32, device="cuda")
        args = MlaSparseDecodeArgs()
        self.lib.st_mla_sparse_decode_args_init(ctypes.byref(args))
        args.q, args.indices = self.view(d["q"]), self.view(d["indices"])
        args.kv_cache = self.view(d["pool"], ST_DTYPE_FP8_E4M3)  # [pages, 64, 656]: the rows' bytes
        args.topk_length, args.attn_sink = self.view(d["topk_length"]), self.view(d["attn_sink"])
        args.o, args.lse = self.view(o), self.view(lse)
        args.sm_scale, args.qlen, args.pdl = d["sm_scale"], case.qlen, 0
        n = ctypes.c_size_t(0)
        self.check(self.lib.st_mla_sparse_decode_workspace_size(self.handle, ctypes.byref(args), ctypes.byref(n)),
                   "st_mla_sparse_decode_workspace_size")
        ws = torch.empty(n.value, dtype=torch.uint8, device="cuda") if n.value else None
        self.check(self.lib.st_mla_sparse_decode_prepare(self.handle, ctypes.byref(args)),
                   "st_mla_sparse_decode_prepare")
        return {"args": args, "o": o, "lse": lse, "ws": ws, "ws_bytes": n.value}

    def call(self, p):
        ws = p["ws"].data_ptr() if p["ws"] is not None else None
        stream = self.torch.cuda.current_stream().cuda_stream  # the capture stream inside a capture
        self.check(self.lib.st_mla_sparse_decode(self.handle, ctypes.byref(p["args"]), ws, p["ws_bytes"], stream),
                   "st_mla_sparse_decode")

    def variant(self):
        v = self.lib.st_last_variant(self.handle)
        return v.decode(errors="replace") if v else None

    def close(self):
        self.torch.cuda.synchronize()  # no launch of the handle's may be in flight
        self.lib.st_close(self.handle)


# ---------------------------------------------------------------- FlashMLA side
FLASHMLA_HEADS = 64  # FlashMLA's sm90 decode takes 64 or 128 heads; vLLM pads fewer to 64
PEER_ERRORS = (RuntimeError, AssertionError, ValueError)  # TORCH_CHECK, fmla.py's asserts


def peer_plan(torch, fmla, case, d):
    """FlashMLA's views of the same bytes: q (B, qlen, h, 576), k_cache (pages, 64, 1, 656)
    uint8, indices (B, qlen, topk). h is h_q, or 64 with zero heads added where FlashMLA
    refuses h_q (as vLLM pads). Its scheduler metadata is made by the first call, here."""
    p = {"k_cache": d["pool"].view(d["pages"], PAGE, 1, ROW_BYTES),
         "indices": d["indices"].view(case.B, case.qlen, case.topk)}
    for heads in (case.h_q, FLASHMLA_HEADS):
        q = d["q"].view(case.B, case.qlen, case.h_q, DIM_QK)
        sink = d["attn_sink"]
        if heads != case.h_q:
            q = torch.nn.functional.pad(q, (0, 0, 0, heads - case.h_q))
            sink = None if sink is None else torch.nn.functional.pad(sink, (0, heads - case.h_q))
        p.update(q=q.contiguous(), sink=sink, heads=heads, meta=fmla.get_mla_metadata()[0],
                 out=torch.empty(case.B, case.qlen, heads, DIM_V, dtype=torch.bfloat16, device="cuda"))
        try:
            p["lse"] = peer_call(fmla, case, d, p)[1]
            return p
        except PEER_ERRORS as e:
            if heads >= FLASHMLA_HEADS:
                raise
            p["padded_from"] = (str(e).splitlines() or [type(e).__name__])[0]
    return p


def peer_call(fmla, case, d, p):
    return fmla.flash_mla_with_kvcache(
        p["q"], p["k_cache"], None, None, DIM_V, p["meta"], softmax_scale=d["sm_scale"], is_fp8_kvcache=True,
        indices=p["indices"], attn_sink=p["sink"], topk_length=d["topk_length"], out=p["out"])


def peer_outputs(torch, case, p, lse_ref, rows):
    """FlashMLA's o and lse as [rows, h_q, ...] with lse in natural log, and how its lse was
    laid out. Its lse is documented (B, h_q, s_q): transposed here. The base is told from
    the reference (natural or base 2, converted); its +inf for a row with nothing is -inf here."""
    o = p["out"].view(case.rows, p["heads"], DIM_V)[:, :case.h_q]
    lse, layout = p["lse"], f"{tuple(p['lse'].shape)}"
    if tuple(lse.shape) == (case.B, p["heads"], case.qlen):
        lse, layout = lse.permute(0, 2, 1), layout + " = (B, h_q, s_q), transposed"
    lse = lse.reshape(case.rows, p["heads"])[:, :case.h_q].double()
    lse = torch.where(torch.isposinf(lse), torch.full_like(lse, -math.inf), lse)
    natural = lse_err(torch, lse[rows], lse_ref)
    base2 = lse_err(torch, lse[rows] * math.log(2), lse_ref)
    if base2 < natural:
        return o, lse * math.log(2), layout + "; base 2, times ln 2"
    return o, lse, layout + "; natural log"


# ---------------------------------------------------------------- timing
def time_graph(torch, fn, stream, iters, reps):
    """Median over reps of one replay of a graph of `iters` calls, per call in us."""
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(iters):
            fn()
    times = []
    with torch.cuda.stream(stream):
        graph.replay()  # warm-up
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            graph.replay()
            b.record(stream)
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3 / iters)
    return statistics.median(times)


# ---------------------------------------------------------------- one case
def work(torch, case, d):
    """Bytes each call must move (entries that count x 656, q, o) and FLOPs (q.k and p.v
    over those entries: 2 x rows x h_q x topk x 1088 when all count)."""
    entries = int(entry_mask(torch, case, d).sum().item())
    nbytes = entries * ROW_BYTES + case.rows * case.h_q * (DIM_QK + DIM_V) * 2
    return entries, nbytes, 2 * case.h_q * entries * (DIM_QK + DIM_V)


def check_case(torch, case, d, st_p, peer_p, row):
    rows = sample_rows(case)
    o_ref, lse_ref = reference_rows(torch, case, d, rows)
    row["check_rows"] = rows
    if st_p is not None:
        row["st_o_relerr"] = o_relerr(torch, st_p["o"][rows], o_ref)
        row["st_lse_err"] = lse_err(torch, st_p["lse"][rows], lse_ref)
        row["st_check"] = "pass" if row["st_o_relerr"] <= O_TOL and row["st_lse_err"] <= LSE_TOL else "fail"
    if peer_p is not None:
        o, lse, row["peer_lse_layout"] = peer_outputs(torch, case, peer_p, lse_ref, rows)
        row["peer_o_relerr"] = o_relerr(torch, o[rows], o_ref)
        row["peer_lse_err"] = lse_err(torch, lse[rows], lse_ref)
        if st_p is not None:
            row["st_vs_peer_o_relerr"] = o_relerr(torch, st_p["o"], o)
            row["st_vs_peer_lse_err"] = lse_err(torch, st_p["lse"], lse)


def st_first_call(st, case, d, row):
    """Plans and runs sparsetune once (outside any capture); None where a call failed."""
    try:
        p = st.plan(case, d)
        st.call(p)
    except StError as e:
        row["st_error"] = str(e)
        return None
    row["st_variant"], row["st_workspace_bytes"] = st.variant(), p["ws_bytes"]
    return p


def peer_first_call(torch, fmla, case, d, row):
    """Plans and runs FlashMLA once (outside any capture); None where it refused."""
    try:
        p = peer_plan(torch, fmla, case, d)
    except PEER_ERRORS as e:
        row["peer_error"] = (str(e).splitlines() or [type(e).__name__])[0]
        return None
    row["peer_heads"] = p["heads"]
    if "padded_from" in p:
        row["peer_padded_from"] = p["padded_from"]
    return p


def run_case(torch, fmla, st, case, seed, a):
    row = {"case": case.name, "B": case.B, "qlen": case.qlen, "h_q": case.h_q, "topk": case.topk, "ctx": case.ctx,
           "topk_length": case.topk_length, "attn_sink": case.attn_sink, "seed": seed, "reps": a.reps,
           "iters": a.iters}
    d = make_inputs(torch, case, seed)
    row["pool_pages"], row["pool_bytes"] = d["pages"], d["pool"].numel()
    row["entries"], row["bytes"], row["flops"] = work(torch, case, d)
    st_p, peer_p = st_first_call(st, case, d, row), peer_first_call(torch, fmla, case, d, row)
    torch.cuda.synchronize()
    check_case(torch, case, d, st_p, peer_p, row)
    if row.get("st_check") == "fail":
        row["timed"] = False  # a case whose check fails for ours is not timed
        return row
    stream = torch.cuda.Stream()  # both timed on this one stream
    if peer_p is not None:
        time_side(torch, row, "peer", lambda: peer_call(fmla, case, d, peer_p), stream, a)
    if st_p is not None:
        time_side(torch, row, "st", lambda: st.call(st_p), stream, a)
    row["timed"] = True
    add_rates(row)
    return row


def time_side(torch, row, side, fn, stream, a):
    """row[side_us], or row[side_error] where the capture or a replay failed."""
    try:
        row[f"{side}_us"] = time_graph(torch, fn, stream, a.iters, a.reps)
    except PEER_ERRORS as e:  # StError is a RuntimeError
        row[f"{side}_error"] = f"timing: {(str(e).splitlines() or [type(e).__name__])[0]}"


def add_rates(row):
    for side in ("peer", "st"):
        us = row.get(f"{side}_us")
        if us:
            row[f"{side}_GBps"] = row["bytes"] / us / 1e3
            row[f"{side}_TFLOPs"] = row["flops"] / us / 1e6
    if row.get("peer_us") and row.get("st_us"):
        row["speedup"] = row["peer_us"] / row["st_us"]


def fmt(row, key, spec):
    v = row.get(key)
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def summary(row):
    s = (f"{row['case']:<48} peer {fmt(row, 'peer_us', '8.1f')} us  st {fmt(row, 'st_us', '8.1f')} us  "
         f"x{fmt(row, 'speedup', '.2f')}  st {fmt(row, 'st_TFLOPs', '.0f')} TFLOP/s "
         f"{fmt(row, 'st_GBps', '.0f')} GB/s  o err st {fmt(row, 'st_o_relerr', '.1e')} "
         f"peer {fmt(row, 'peer_o_relerr', '.1e')} st/peer {fmt(row, 'st_vs_peer_o_relerr', '.1e')}  "
         f"lse err st {fmt(row, 'st_lse_err', '.1e')} peer {fmt(row, 'peer_lse_err', '.1e')}  "
         f"{row.get('st_variant') or ''}")
    for k in ("st_error", "peer_error"):
        if row.get(k):
            s += f"\n    {k}: {row[k]}"
    if row.get("st_check") == "fail":
        s += "\n    CHECK FAILED for sparsetune: not timed"
    return s


def run(a, cases=None, side=None, one_case=None, line=None):
    """Every case of a.cases through `one_case`, a line each by `line`; `side` is the
    sparsetune class (the prefill script passes its own four)."""
    cases, side = cases or CASES, side or Sparsetune
    one_case, line = one_case or run_case, line or summary
    torch, why = gpu_modules()
    if torch is None:
        return fail(2, why)
    if not os.path.isfile(a.lib):
        return fail(2, f"no library: {a.lib} is missing (build it: cmake --build build, or pass --lib PATH)")
    if a.db and not os.path.isfile(a.db):
        return fail(2, f"no database: {a.db} is missing")
    fmla = load_peer(a.peer)
    try:
        st = side(torch, a.lib, a.db)
    except StError as e:
        return fail(2, str(e))
    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "st_version": st.version,
           "st_db": a.db or "none (built-in variants)", "peer": "FlashMLA as vLLM 0.33.0 builds it"}
    print(f"libsparsetune {st.version} ({env['st_db']}) vs {env['peer']} on {env['device']}; seed {a.seed}",
          flush=True)
    status = 0
    with open(a.out, "w") if a.out else open(os.devnull, "w") as out:
        for i, case in enumerate(cases[a.cases]):
            row = dict(env, **one_case(torch, fmla, st, case, a.seed + i, a))
            print(line(row), flush=True)
            out.write(json.dumps(row) + "\n")
            out.flush()
            if row.get("st_error") or row.get("st_check") != "pass":
                status = 1
            torch.cuda.empty_cache()
    st.close()
    return status


CASES_HELP = ("anchors: FlashMLA's four rows of the table; all: also qlen 2, topk 512/1024, h_q 16/32/64, "
              "topk_length, attn_sink")


def parse_args(argv, doc=__doc__, cases=None, cases_help=CASES_HELP, iters=20):
    """The options of both scripts; `iters` is the default of --iters."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join("build", "runtime", "libsparsetune.so"),
                    help="libsparsetune.so (default %(default)s)")
    ap.add_argument("--peer", default=".peer", help="folder of fmla.py and _flashmla_C.abi3.so (default %(default)s)")
    ap.add_argument("--db", default=None, help="tuning database (default: none, the built-in variants)")
    ap.add_argument("--cases", choices=sorted(cases or CASES), default="anchors", help=cases_help)
    ap.add_argument("--out", default=None, help="JSON lines, one a case")
    ap.add_argument("--reps", type=int, default=10, help="timed replays; the median is reported")
    ap.add_argument("--iters", type=int, default=iters, help="calls captured in the graph of one replay")
    ap.add_argument("--seed", type=int, default=0, help="seed of case i is seed + i")
    ap.add_argument("--check-abi", action="store_true",
                    help="compare the ctypes layout with runtime/include/sparsetune.h (cc; no GPU, no torch)")
    a = ap.parse_args(argv)
    if a.reps < 1 or a.iters < 1:
        ap.error("--reps and --iters must be at least 1")
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.check_abi:
        return check_abi(a.lib)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
