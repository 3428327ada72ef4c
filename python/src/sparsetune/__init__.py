"""sparsetune: tuned sparse-attention kernels (MiniMax-M3, DeepSeek-V3.2).

    import sparsetune
    h = sparsetune.open("sparsetune.db")   # or open(): the built-in variants
    import sparsetune.ops                  # torch.ops.sparsetune.* (needs torch)

`open` binds a handle to a CUDA device (torch's current one by default) and
makes it the one the torch ops use there. Library errors raise
SparsetuneError with the library's message.
"""
from ._handle import Handle, SparsetuneError, version
from . import _registry

__all__ = ["Handle", "SparsetuneError", "open", "version"]
__version__ = "0.2.0"


def _current_device():
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available():
        return 0
    torch.cuda.init()  # the runtime's primary context first: the library retains the same one
    return torch.cuda.current_device()


def _ordinal(device):
    if device is None:
        return _current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if kind is None and isinstance(device, str):
        kind, _, rest = device.partition(":")
        index = int(rest) if rest.isdigit() else None
    if kind != "cuda":
        raise ValueError(f"device must be a CUDA device (an ordinal, 'cuda:N' or torch.device), not {device!r}")
    return _current_device() if index is None else index


def open(db=None, device=None):  # noqa: A001 - the package's entry point, as the issue names it
    """Opens libsparsetune on a CUDA device with database `db` (a path;
    None: no database, each op's built-in variants) and makes the handle the
    one the torch ops use on that device. device: an ordinal, "cuda:N", a
    torch.device, or None for torch's current device."""
    h = Handle(db=db, device=_ordinal(device))
    _registry.use(h)
    return h
