"""python -m sparsetune.bench without a GPU: its cases and its refusal."""
import argparse

import pytest

torch = pytest.importorskip("torch")
from sparsetune import bench  # noqa: E402


def test_random_cases_are_engine_like_and_reproducible():
    a, b = bench.random_cases(7, 50), bench.random_cases(7, 50)
    assert a == b and a != bench.random_cases(8, 50)
    for c in a:
        assert 1 <= len(c["lens"]) <= 256
        assert all(1024 <= n <= 131072 for n in c["lens"])
        assert 4 <= c["topk"] <= 32 and 1 <= c["heads"] <= 4 and 1 <= c["qlen"] <= 4
        assert c["dtype"] in ("bf16", "fp8")
    assert any(len(set(c["lens"])) > 1 for c in a) and any(len(set(c["lens"])) == 1 for c in a)


def test_cases_are_parsed_or_refused():
    assert len(bench.parse_cases("anchors")) == len(bench.ANCHORS)
    assert len(bench.parse_cases("random:3:5")) == 5
    for bad in ("random:3", "random:x:5", "random:3:0", "suite"):
        with pytest.raises(argparse.ArgumentTypeError, match="anchors or random:SEED:N"):
            bench.parse_cases(bad)
    assert bench.case_name(dict(dtype="fp8", lens=[2048, 70000], heads=3, topk=9, qlen=2)) == \
        "fp8 B2 Hkv3 qlen2 topk9 2-68K"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the refusal cannot be seen")
def test_without_a_gpu_it_says_so(capsys):
    assert bench.main(["--cases", "random:1:2"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
