"""The ctypes mirror against the C header this package carries: every
struct's size and alignment and every field's offset and size, as a C
compiler lays them out; the library's own st_<op>_args_init agrees on each
argument block's size. Needs a C compiler, no GPU."""
import ctypes
import os
import shutil
import subprocess

import pytest

from sparsetune import _abi, _handle

STRUCTS = {"st_tensor": _abi.st_tensor, **{f"st_{op}_args": cls for op, cls in _abi.ARGS.items()}}


def ctypes_layout():
    lines = []
    for name, cls in STRUCTS.items():
        lines.append(f"{name} size {ctypes.sizeof(cls)} align {ctypes.alignment(cls)}")
        for field, _ in cls._fields_:
            f = getattr(cls, field)
            lines.append(f"{name}.{field} offset {f.offset} size {f.size}")
    return lines


def c_layout(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) to lay out the header's structs")
    body = []
    for name, cls in STRUCTS.items():
        body.append(f'  printf("{name} size %zu align %zu\\n", sizeof({name}), _Alignof({name}));')
        for field, _ in cls._fields_:
            body.append(f'  printf("{name}.{field} offset %zu size %zu\\n", offsetof({name}, {field}), '
                        f'sizeof((({name} *)0)->{field}));')
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include \"sparsetune.h\"\nint main(void) {\n"
                   + "\n".join(body) + "\n  return 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.dirname(_abi.header_path()), str(src), "-o", str(exe)],
                   check=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


def test_header_is_in_the_package():
    assert os.path.isfile(_abi.header_path()), _abi.header_path()


def test_every_op_of_the_header_has_its_struct():
    with open(_abi.header_path()) as f:
        text = f.read()
    in_header = {line.split("typedef struct st_")[1].split("_args")[0]
                 for line in text.splitlines() if line.startswith("typedef struct st_") and "_args {" in line}
    assert in_header == set(_abi.ARGS)


def test_ctypes_layout_matches_the_c_compiler(tmp_path):
    py, c = ctypes_layout(), c_layout(tmp_path)
    assert py == c


def test_args_init_sets_the_ctypes_size():
    lib = _handle.library()
    for op, cls in _abi.ARGS.items():
        a = cls()
        a.struct_size = 0
        getattr(lib, f"st_{op}_args_init")(ctypes.byref(a))
        assert a.struct_size == ctypes.sizeof(cls), op
