"""ctypes mirror of libsparsetune's C ABI (include/sparsetune.h of this package).

Every Structure lists its C struct's fields in order with the C types of an
LP64 Linux ABI (the header's enums are int-sized there); ctypes pads as a C
compiler does. tests/test_abi.py compiles a C program against the header this
wheel carries and compares every size, alignment and field offset, so a
change to the header that this file misses fails the tests, not an engine.
"""
import ctypes
import os

ST_MAX_DIMS = 6
ST_BLOCK_TOKENS = 128

# st_status
ST_OK = 0
STATUS_NAMES = {
    0: "ST_OK",
    1: "ST_ERR_INVALID_ARG",
    2: "ST_ERR_NO_DRIVER",
    3: "ST_ERR_NO_DEVICE",
    4: "ST_ERR_CUDA",
    5: "ST_ERR_DB",
    6: "ST_ERR_NO_VARIANT",
    7: "ST_ERR_WORKSPACE",
    8: "ST_ERR_NOMEM",
    9: "ST_ERR_UNSUPPORTED",
}

# st_dtype
ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3, ST_DTYPE_INT32, ST_DTYPE_FP32 = 1, 2, 3, 4
DTYPE_NAMES = {ST_DTYPE_BF16: "bf16", ST_DTYPE_FP8_E4M3: "fp8_e4m3", ST_DTYPE_INT32: "int32",
               ST_DTYPE_FP32: "fp32"}

# st_kv_scale_mode
ST_KV_SCALE_NONE, ST_KV_SCALE_SCALAR, ST_KV_SCALE_TENSOR = 0, 1, 2

c_enum = ctypes.c_int


class st_tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("dtype", c_enum),
                ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * ST_MAX_DIMS),
                ("stride", ctypes.c_int64 * ST_MAX_DIMS)]


class Args(ctypes.Structure):
    """An argument block: struct_size first, set on construction to the
    block's size, as st_<op>_args_init does (the library refuses a block of
    another size, naming both)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.struct_size = ctypes.sizeof(self)


def _args(name, fields):
    """An Args subclass named st_<name>_args with struct_size then `fields`."""
    return type(f"st_{name}_args", (Args,), {"_fields_": [("struct_size", ctypes.c_size_t)] + fields})


T, I, F = st_tensor, ctypes.c_int, ctypes.c_float

# One entry per op of runtime/ops/op_list.h, in the header's field order.
ARGS = {
    "index_decode": _args("index_decode", [
        ("q", T), ("k_cache", T), ("block_table", T), ("seq_lens", T), ("topk_idx", T), ("qlen", I),
        ("topk", I), ("init_blocks", I), ("local_blocks", I), ("max_context", I), ("pdl", I)]),
    "sparse_attn_decode": _args("sparse_attn_decode", [
        ("q", T), ("k_cache", T), ("v_cache", T), ("scale_mode", c_enum), ("k_scale", F), ("v_scale", F),
        ("k_scales", T), ("v_scales", T), ("topk_idx", T), ("block_table", T), ("seq_lens", T), ("o", T),
        ("lse", T), ("sm_scale", F), ("qlen", I), ("max_context", I), ("pdl", I)]),
    "sparse_attn": _args("sparse_attn", [
        ("q", T), ("k_cache", T), ("v_cache", T), ("scale_mode", c_enum), ("k_scale", F), ("v_scale", F),
        ("k_scales", T), ("v_scales", T), ("topk_idx", T), ("block_table", T), ("cu_seqlens_q", T),
        ("seq_lens", T), ("o", T), ("lse", T), ("sm_scale", F), ("max_context", I)]),
    "index_topk": _args("index_topk", [
        ("score", T), ("cu_seqlens_q", T), ("seq_lens", T), ("topk_idx", T), ("topk", I), ("init_blocks", I),
        ("local_blocks", I), ("max_context", I)]),
    "index_score": _args("index_score", [
        ("q", T), ("k_cache", T), ("block_table", T), ("cu_seqlens_q", T), ("seq_lens", T), ("score", T),
        ("scale", F), ("max_context", I)]),
    "index_prefill": _args("index_prefill", [
        ("q", T), ("k_cache", T), ("block_table", T), ("cu_seqlens_q", T), ("seq_lens", T), ("topk_idx", T),
        ("topk", I), ("init_blocks", I), ("local_blocks", I), ("max_context", I)]),
    "mla_sparse_decode": _args("mla_sparse_decode", [
        ("q", T), ("kv_cache", T), ("indices", T), ("topk_length", T), ("attn_sink", T), ("o", T), ("lse", T),
        ("sm_scale", F), ("qlen", I), ("pdl", I)]),
    "dsa_index_decode": _args("dsa_index_decode", [
        ("q", T), ("weights", T), ("k_cache", T), ("block_table", T), ("seq_lens", T), ("topk_idx", T),
        ("qlen", I), ("topk", I), ("page_size", I), ("max_context", I), ("pdl", I)]),
    "mla_sparse_prefill": _args("mla_sparse_prefill", [
        ("q", T), ("kv", T), ("indices", T), ("topk_length", T), ("attn_sink", T), ("o", T), ("lse", T),
        ("max_logits", T), ("sm_scale", F), ("pdl", I)]),
    "dsa_index_logits": _args("dsa_index_logits", [
        ("q", T), ("k", T), ("k_scale", T), ("weights", T), ("ks", T), ("ke", T), ("logits", T)]),
    "dsa_index_topk": _args("dsa_index_topk", [
        ("logits", T), ("ks", T), ("ke", T), ("topk_idx", T), ("topk", I)]),
}


def package_dir():
    """The installed package's folder (lib/, include/, bin/, share/ beside this file)."""
    return os.path.dirname(os.path.abspath(__file__))


def library_path():
    """libsparsetune: $SPARSETUNE_LIB if set (a build tree's), else the wheel's."""
    return os.environ.get("SPARSETUNE_LIB") or os.path.join(package_dir(), "lib", "libsparsetune.so")


def header_path():
    return os.path.join(package_dir(), "include", "sparsetune.h")


def load(path=None):
    """The library with the argument and result types of every entry point."""
    lib = ctypes.CDLL(path or library_path())
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.st_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(vp)]
    lib.st_open.restype = c_enum
    lib.st_close.argtypes = [vp]
    lib.st_close.restype = None
    for f in (lib.st_last_error, lib.st_last_variant):
        f.argtypes = [vp]
        f.restype = ctypes.c_char_p
    lib.st_status_name.argtypes = [c_enum]
    lib.st_status_name.restype = ctypes.c_char_p
    lib.st_version.argtypes = []
    lib.st_version.restype = ctypes.c_char_p
    lib.st_version_number.argtypes = []
    lib.st_version_number.restype = ctypes.c_uint
    lib.st_workspace_clear.argtypes = [vp, vp, sz, vp]
    lib.st_workspace_clear.restype = c_enum
    for op, cls in ARGS.items():
        p = ctypes.POINTER(cls)
        getattr(lib, f"st_{op}_args_init").argtypes = [p]
        getattr(lib, f"st_{op}_args_init").restype = None
        getattr(lib, f"st_{op}_workspace_size").argtypes = [vp, p, ctypes.POINTER(sz)]
        getattr(lib, f"st_{op}_prepare").argtypes = [vp, p]
        getattr(lib, f"st_{op}").argtypes = [vp, p, vp, sz, vp]
        for suffix in ("_workspace_size", "_prepare", ""):
            getattr(lib, f"st_{op}{suffix}").restype = c_enum
    return lib
