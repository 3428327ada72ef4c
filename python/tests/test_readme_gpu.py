"""The README's "Use from PyTorch" example, run as written, then its
replayed graph's results against eager calls on the same lengths. Skips
without a GPU or without the source tree's README (an installed package's
tests run from the source tree)."""
import os
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the README's example needs one", allow_module_level=True)

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def example():
    with open(README) as f:
        text = f.read()
    part = text.split("## Use from PyTorch", 1)[1]
    return re.search(r"```python\n(.*?)```", part, re.S).group(1)


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
    if not os.path.exists(README):
        pytest.skip(f"no README at {README}")
    monkeypatch.chdir(tmp_path)  # whatever files it makes, out of the tree
    ns = {}
    exec(compile(example(), "README.md, Use from PyTorch", "exec"), ns)  # noqa: S102 - the README's own code
    torch.cuda.synchronize()
    replayed_ids, replayed_out = ns["topk_buf"].clone(), ns["out"].clone()
    ns["step"]()  # eager, on the lengths the replay saw
    torch.cuda.synchronize()
    B = ns["B"]
    assert torch.equal(replayed_ids, ns["topk_buf"]), "the replay chose other blocks than an eager call"
    assert torch.allclose(replayed_out.float(), ns["out"].float(), atol=1e-3, rtol=1e-3)
    assert int(ns["seq_lens"].min()) == 1000
    ids = replayed_ids[:, :B]
    assert ((ids >= -1) & (ids < 8)).all(), "block ids past a request's 8 visible blocks"
    assert (ids >= 0).sum(dim=2).min() == 8, "1000 tokens are 8 blocks: each row selects all 8 of its 16"
    assert torch.isfinite(replayed_out.float()).all()
