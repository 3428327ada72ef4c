"""Opening, errors and versions without a GPU: a machine with no CUDA
driver gets SparsetuneError with the library's message, never a crash."""
import os
import subprocess

import pytest

import sparsetune
from sparsetune import _abi


def have_driver():
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_version_is_the_librarys():
    assert sparsetune.version() == sparsetune.__version__
    lib = sparsetune._handle.library()
    major, minor, patch = (int(x) for x in sparsetune.__version__.split("."))
    assert lib.st_version_number() == major * 10000 + minor * 100 + patch


@pytest.mark.skipif(have_driver(), reason="a CUDA driver is present: the no-driver error cannot be seen")
def test_open_without_a_driver_raises_the_librarys_message():
    with pytest.raises(sparsetune.SparsetuneError) as e:
        sparsetune.open(device=0)
    assert e.value.status == "ST_ERR_NO_DRIVER"
    assert "libcuda.so.1" in e.value.message
    assert "ST_ERR_NO_DRIVER" in str(e.value)


def test_bad_arguments_are_refused_before_the_library():
    with pytest.raises(TypeError, match="db must be a path or None"):
        sparsetune.Handle(db=42)
    with pytest.raises(ValueError, match="device ordinal"):
        sparsetune.Handle(device=-1)
    with pytest.raises(ValueError, match="device ordinal"):
        sparsetune.Handle(device=True)
    with pytest.raises(ValueError, match="must be a CUDA device"):
        sparsetune.open(device="cpu")


def test_the_wheel_carries_the_command_and_its_generator(tmp_path):
    pkg = _abi.package_dir()
    for part in ("lib/libsparsetune.so", "include/sparsetune.h", "bin/sparsetune",
                 "share/sparsetune/generator/main.lua", "share/sparsetune/templates"):
        assert os.path.exists(os.path.join(pkg, part)), part
    # The package's own files, not a source tree a developer's environment names.
    env = {k: v for k, v in os.environ.items() if k != "SPARSETUNE_HOME"}
    out = subprocess.run([os.path.join(pkg, "bin", "sparsetune"), "version"], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert sparsetune.__version__ in out
    assert os.path.join(pkg, "share", "sparsetune", "generator") in out


def test_the_command_compiles_without_a_gpu(tmp_path):
    """The installed command generates and compiles a small suite with NVRTC
    (no driver needed) into a new database."""
    nvrtc = [p for p in ("/usr/local/cuda/lib64/libnvrtc.so.13",) if os.path.exists(p)]
    if not nvrtc:
        pytest.skip("no NVRTC at /usr/local/cuda/lib64")
    db = tmp_path / "t.db"
    r = subprocess.run([os.path.join(_abi.package_dir(), "bin", "sparsetune"), "compile", "--suite", "smoke", "--op",
                        "index_topk", "--db", str(db), "--arch", "sm_90a", "--jobs", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 failed" in r.stdout + r.stderr
