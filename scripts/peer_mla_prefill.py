#!/usr/bin/env python3
"""peer_mla_prefill.py - mla_sparse_prefill side by side with FlashMLA's sparse prefill.

Builds one set of inputs per case on the GPU (q [s_q, h_q, 576] and kv [s_kv, 1, 576]
bf16, random and non-zero; indices [s_q, 1, topk] distinct random kv rows per query;
optionally a topk_length and an attn_sink), feeds the same tensors to FlashMLA's
flash_mla_sparse_fwd (as vLLM 0.33.0 builds it, put in .peer/ by the peer fetch script)
and to libsparsetune's st_mla_sparse_prefill (through ctypes), checks both against a
float64 torch reference on a few query rows (o, lse, max_logits) and against each other,
then times both as CUDA-graph replays on one stream. One JSON line per case. The
decode side's twin is peer_mla.py, whose helpers this script uses.

    python3 scripts/peer_mla_prefill.py --check-abi        # no GPU, no torch
    python3 scripts/peer_mla_prefill.py --cases anchors --out peer_mla_prefill.jsonl

Exit status: 0 all checks passed, 1 a check or a call failed, 2 the environment lacks
something (torch, a GPU, the library, the peer) or the arguments are wrong.
"""
import ctypes
import math
import os
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_mla as pm  # noqa: E402  (the decode script: ABI, timing, errors, the peer's loading)

DIM_QK, DIM_V = pm.DIM_QK, pm.DIM_V
ROW_BYTES = DIM_QK * 2  # a bf16 kv row
ML_TOL = 2e-2           # absolute error of max_logits


class MlaSparsePrefillArgs(ctypes.Structure):
    """st_mla_sparse_prefill_args; struct_size is set by st_mla_sparse_prefill_args_init."""
    c_name = "st_mla_sparse_prefill_args"
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("q", pm.StTensor),
                ("kv", pm.StTensor),
                ("indices", pm.StTensor),
                ("topk_length", pm.StTensor),
                ("attn_sink", pm.StTensor),
                ("o", pm.StTensor),
                ("lse", pm.StTensor),
                ("max_logits", pm.StTensor),
                ("sm_scale", ctypes.c_float),
                ("pdl", ctypes.c_int)]


ABI_STRUCTS = (pm.StTensor, MlaSparsePrefillArgs)


def declare(lib):
    """The decode script's functions and the prefill op's."""
    pm.declare(lib)
    handle, ptr, args_p = ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(MlaSparsePrefillArgs)
    sigs = {
        "st_mla_sparse_prefill_args_init": ([args_p], None),
        "st_mla_sparse_prefill_workspace_size": ([handle, args_p, ctypes.POINTER(ctypes.c_size_t)], pm.C_ENUM),
        "st_mla_sparse_prefill_prepare": ([handle, args_p], pm.C_ENUM),
        "st_mla_sparse_prefill": ([handle, args_p, ptr, ctypes.c_size_t, ptr], pm.C_ENUM),
    }
    for name, (argtypes, restype) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    return lib


def check_abi(lib_path):
    py, c = pm.ctypes_layout(ABI_STRUCTS), pm.c_layout(ABI_STRUCTS)
    bad = [(a, b) for a, b in zip(py, c) if a != b]
    if len(py) != len(c):
        bad.append((f"{len(py)} ctypes lines", f"{len(c)} C lines"))
    for a, b in bad:
        print(f"MISMATCH ctypes: {a}  C: {b}")
    print(f"{len(c)} layout lines compared ({', '.join(s.c_name for s in ABI_STRUCTS)}; st_dtype values) "
          f"against {pm.HEADER_DIR}/sparsetune.h")
    if os.path.exists(lib_path):
        try:
            lib = declare(ctypes.CDLL(lib_path))
        except OSError as e:
            print(f"{lib_path} not loaded ({e}): struct_size not checked")
        else:
            args = MlaSparsePrefillArgs()
            lib.st_mla_sparse_prefill_args_init(ctypes.byref(args))
            if args.struct_size != ctypes.sizeof(MlaSparsePrefillArgs):
                bad.append(("struct_size", args.struct_size))
                print(f"MISMATCH st_mla_sparse_prefill_args_init sets struct_size {args.struct_size}, "
                      f"ctypes size {ctypes.sizeof(MlaSparsePrefillArgs)}")
            else:
                print(f"{lib_path}: st_mla_sparse_prefill_args_init sets struct_size {args.struct_size}, "
                      "the ctypes size")
    print("ABI check: " + ("FAILED" if bad else "ctypes layout matches the header"))
    return 1 if bad else 0


# ---------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    s_q: int
    s_kv: int
    h_q: int
    topk: int = 2048
    topk_length: bool = False
    attn_sink: bool = False

    @property
    def name(self):
        extra = (" len" if self.topk_length else "") + (" sink" if self.attn_sink else "")
        return f"bf16 s_q{self.s_q} s_kv{self.s_kv} h_q{self.h_q} topk{self.topk}{extra}"


# FlashMLA's two sparse prefill anchors (docs/kernels/mla_sparse_prefill.md), then more.
ANCHORS = [Case(4096, 32768, 128), Case(4096, 65536, 64)]
MORE = ([Case(4096, 32768, h) for h in (16, 32, 64)]
        + [Case(4096, 32768, 128, topk=t) for t in (512, 1024)]
        + [Case(1024, 8192, 128), Case(4096, 32768, 128, topk_length=True),
           Case(4096, 32768, 128, attn_sink=True)])
CASES = {"anchors": ANCHORS, "all": ANCHORS + MORE}


# ---------------------------------------------------------------- inputs and the reference
def make_inputs(torch, case, seed):
    """Every tensor of a case, shared by both sides."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    q = (torch.randn(case.s_q, case.h_q, DIM_QK, generator=gen, device="cuda") + 0.05).to(torch.bfloat16)
    kv = (torch.randn(case.s_kv, 1, DIM_QK, generator=gen, device="cuda") + 0.05).to(torch.bfloat16)
    topk = min(case.topk, case.s_kv)
    idx = torch.empty(case.s_q, case.topk, dtype=torch.int32, device="cuda")
    for r0 in range(0, case.s_q, 256):  # distinct rows a query: the top of random keys, 256 queries at a time
        r1 = min(case.s_q, r0 + 256)
        idx[r0:r1, :topk] = torch.rand(r1 - r0, case.s_kv, generator=gen, device="cuda").topk(topk).indices.int()
    idx[:, topk:] = -1  # a kv shorter than topk: the rest is none
    d = {"q": q, "kv": kv, "indices": idx.view(case.s_q, 1, case.topk), "sm_scale": 1.0 / math.sqrt(DIM_QK),
         "topk_length": None, "attn_sink": None}
    if case.topk_length:
        d["topk_length"] = torch.randint(0, case.topk + 1, (case.s_q,), generator=gen, device="cuda",
                                         dtype=torch.int32)
    if case.attn_sink:
        d["attn_sink"] = torch.randn(case.h_q, generator=gen, device="cuda")
    return d


def entries(torch, case, d):
    """[s_q, topk] bool: the entries that count (a row of kv, within topk_length)."""
    idx = d["indices"][:, 0, :]
    mask = (idx >= 0) & (idx < case.s_kv)
    if d["topk_length"] is not None:
        mask &= torch.arange(case.topk, device="cuda")[None, :] < d["topk_length"][:, None]
    return mask


def reference_rows(torch, case, d, rows):
    """float64 o [len(rows), h_q, 512], lse and max_logits [len(rows), h_q] (natural log)."""
    mask = entries(torch, case, d)
    o = torch.zeros(len(rows), case.h_q, DIM_V, dtype=torch.float64, device="cuda")
    lse = torch.full((len(rows), case.h_q), -math.inf, dtype=torch.float64, device="cuda")
    ml = lse.clone()
    for i, r in enumerate(rows):
        k = d["kv"][d["indices"][r, 0][mask[r]].long(), 0].double()  # [n, 576]
        if k.shape[0] == 0:
            continue
        s = (d["q"][r].double() @ k.T) * d["sm_scale"]  # [h_q, n]
        m = s.max(dim=1).values
        p = torch.exp(s - m[:, None])
        l = p.sum(dim=1)
        o[i] = (p @ k[:, :DIM_V]) / l[:, None]
        lse[i], ml[i] = m + torch.log(l), m
        if d["attn_sink"] is not None:
            o[i] *= torch.sigmoid(lse[i] - d["attn_sink"].double())[:, None]  # exp(lse) / (exp(lse) + exp(sink))
    return o, lse, ml


def sample_rows(case):
    return sorted({0, case.s_q // 3, (2 * case.s_q) // 3, case.s_q - 1})


# ---------------------------------------------------------------- the two sides
class Sparsetune(pm.Sparsetune):
    """libsparsetune's st_mla_sparse_prefill through ctypes."""

    def __init__(self, torch, lib_path, db_path):
        super().__init__(torch, lib_path, db_path)
        declare(self.lib)

    def plan(self, case, d):
        torch = self.torch
        o = torch.empty(case.s_q, case.h_q, DIM_V, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(case.s_q, case.h_q, dtype=torch.float32, device="cuda")
        ml = torch.empty_like(lse)
        args = MlaSparsePrefillArgs()
        self.lib.st_mla_sparse_prefill_args_init(ctypes.byref(args))
        args.q, args.kv, args.indices = self.view(d["q"]), self.view(d["kv"]), self.view(d["indices"])
        args.topk_length, args.attn_sink = self.view(d["topk_length"]), self.view(d["attn_sink"])
        args.o, args.lse, args.max_logits = self.view(o), self.view(lse), self.view(ml)
        args.sm_scale, args.pdl = d["sm_scale"], 0
        n = ctypes.c_size_t(0)
        self.check(self.lib.st_mla_sparse_prefill_workspace_size(self.handle, ctypes.byref(args), ctypes.byref(n)),
                   "st_mla_sparse_prefill_workspace_size")
        ws = torch.empty(n.value, dtype=torch.uint8, device="cuda") if n.value else None
        self.check(self.lib.st_mla_sparse_prefill_prepare(self.handle, ctypes.byref(args)),
                   "st_mla_sparse_prefill_prepare")
        return {"args": args, "o": o, "lse": lse, "max_logits": ml, "ws": ws, "ws_bytes": n.value}

    def call(self, p):
        ws = p["ws"].data_ptr() if p["ws"] is not None else None
        stream = self.torch.cuda.current_stream().cuda_stream  # the capture stream inside a capture
        self.check(self.lib.st_mla_sparse_prefill(self.handle, ctypes.byref(p["args"]), ws, p["ws_bytes"], stream),
                   "st_mla_sparse_prefill")


def peer_plan(torch, fmla, case, d):
    """FlashMLA's call on the same tensors, its output written into `out` (no allocation
    of o inside a capture)."""
    out = torch.empty(case.s_q, case.h_q, DIM_V, dtype=torch.bfloat16, device="cuda")
    p = {"out": out}
    p["result"] = peer_call(fmla, d, p)
    return p


def peer_call(fmla, d, p):
    res = fmla.flash_mla_sparse_fwd(d["q"], d["kv"], d["indices"], d["sm_scale"], d_v=DIM_V,
                                    attn_sink=d["attn_sink"], topk_length=d["topk_length"], out=p["out"])
    p["result"] = res
    return res


def in_natural_log(torch, got, want):
    """got as natural-log values: as returned, or converted from base 2, whichever is nearer
    the reference on the sampled rows; and which it was."""
    nat, b2 = got.double(), got.double() * math.log(2.0)
    if pm.lse_err(torch, b2, want) < pm.lse_err(torch, nat, want):
        return b2, "base 2"
    return nat, "natural"


# ---------------------------------------------------------------- one case
def work(torch, case, d):
    """Entries that count, bytes (their kv rows, q, o) and FLOPs (2 x h_q x 1088 an entry)."""
    n = int(entries(torch, case, d).sum().item())
    return n, n * ROW_BYTES + case.s_q * case.h_q * (DIM_QK + DIM_V) * 2, 2 * case.h_q * n * (DIM_QK + DIM_V)


def check_case(torch, case, d, st_p, peer_p, row):
    rows = sample_rows(case)
    o_ref, lse_ref, ml_ref = reference_rows(torch, case, d, rows)
    row["check_rows"] = rows
    if st_p is not None:
        row["st_o_relerr"] = pm.o_relerr(torch, st_p["o"][rows], o_ref)
        row["st_lse_err"] = pm.lse_err(torch, st_p["lse"][rows].double(), lse_ref)
        row["st_max_logits_err"] = pm.lse_err(torch, st_p["max_logits"][rows].double(), ml_ref)
        ok = row["st_o_relerr"] <= pm.O_TOL and row["st_lse_err"] <= pm.LSE_TOL and row["st_max_logits_err"] <= ML_TOL
        row["st_check"] = "pass" if ok else "fail"
    if peer_p is not None:
        out, ml, lse = peer_p["result"]
        row["peer_o_relerr"] = pm.o_relerr(torch, out[rows], o_ref)
        lse_n, row["peer_lse_base"] = in_natural_log(torch, lse[rows], lse_ref)
        ml_n, row["peer_max_logits_base"] = in_natural_log(torch, ml[rows], ml_ref)
        row["peer_lse_err"] = pm.lse_err(torch, lse_n, lse_ref)
        row["peer_max_logits_err"] = pm.lse_err(torch, ml_n, ml_ref)
        if st_p is not None:
            row["st_vs_peer_o_relerr"] = pm.o_relerr(torch, st_p["o"], out)


def first_calls(torch, fmla, st, case, d, row):
    """Plans and runs each side once (outside any capture); None for a side that failed."""
    st_p = peer_p = None
    try:
        st_p = st.plan(case, d)
        st.call(st_p)
        row["st_variant"], row["st_workspace_bytes"] = st.variant(), st_p["ws_bytes"]
    except pm.StError as e:
        row["st_error"], st_p = str(e), None
    try:
        peer_p = peer_plan(torch, fmla, case, d)
    except pm.PEER_ERRORS as e:
        row["peer_error"] = (str(e).splitlines() or [type(e).__name__])[0]
    return st_p, peer_p


def run_case(torch, fmla, st, case, seed, a):
    row = {"case": case.name, "s_q": case.s_q, "s_kv": case.s_kv, "h_q": case.h_q, "topk": case.topk,
           "topk_length": case.topk_length, "attn_sink": case.attn_sink, "seed": seed, "reps": a.reps,
           "iters": a.iters}
    d = make_inputs(torch, case, seed)
    row["entries"], row["bytes"], row["flops"] = work(torch, case, d)
    st_p, peer_p = first_calls(torch, fmla, st, case, d, row)
    torch.cuda.synchronize()
    check_case(torch, case, d, st_p, peer_p, row)
    if row.get("st_check") == "fail":
        row["timed"] = False  # a case whose check fails for ours is not timed
        return row
    stream = torch.cuda.Stream()  # both timed on this one stream
    if peer_p is not None:
        pm.time_side(torch, row, "peer", lambda: peer_call(fmla, d, peer_p), stream, a)
    if st_p is not None:
        pm.time_side(torch, row, "st", lambda: st.call(st_p), stream, a)
    row["timed"] = True
    pm.add_rates(row)
    return row


def summary(row):
    f = pm.fmt
    s = (f"{row['case']:<44} peer {f(row, 'peer_us', '9.1f')} us  st {f(row, 'st_us', '9.1f')} us  "
         f"x{f(row, 'speedup', '.2f')}  peer {f(row, 'peer_TFLOPs', '.0f')} st {f(row, 'st_TFLOPs', '.0f')} TFLOP/s  "
         f"o err st {f(row, 'st_o_relerr', '.1e')} peer {f(row, 'peer_o_relerr', '.1e')}  "
         f"lse/max err st {f(row, 'st_lse_err', '.1e')}/{f(row, 'st_max_logits_err', '.1e')}  "
         f"{row.get('st_variant') or ''}")
    for k in ("st_error", "peer_error"):
        if row.get(k):
            s += f"\n    {k}: {row[k]}"
    if row.get("st_check") == "fail":
        s += "\n    CHECK FAILED for sparsetune: not timed"
    return s


def parse_args(argv):
    return pm.parse_args(argv, __doc__, CASES, "anchors: FlashMLA's two prefill rows; all: also h_q 16/32/64, "
                         "topk 512/1024, a short prefill, topk_length, attn_sink", iters=3)


def main(argv=None):
    a = parse_args(argv)
    if a.check_abi:
        return check_abi(a.lib)
    return pm.run(a, CASES, Sparsetune, run_case, summary)


if __name__ == "__main__":
    sys.exit(main())
