"""Which handle the torch ops use on each CUDA device.

The custom ops take tensors and numbers only (torch.compile and CUDA graphs
need that), so the handle comes from here: the last one `sparsetune.open`
made for the tensors' device, or one opened on first use with the database
named by $SPARSETUNE_DB (unset or empty: none, the built-in variants).
"""
import os
import threading

_lock = threading.Lock()
_by_device = {}


def use(handle):
    """Makes `handle` the one the ops use on its device."""
    with _lock:
        _by_device[handle.device] = handle


def forget(handle):
    """A closed handle is no longer used."""
    with _lock:
        if _by_device.get(handle.device) is handle:
            del _by_device[handle.device]


def for_device(device):
    """The handle for CUDA device ordinal `device`, opened here if none is."""
    with _lock:
        h = _by_device.get(device)
        if h is not None:
            return h
        from ._handle import Handle

        h = Handle(db=os.environ.get("SPARSETUNE_DB") or None, device=device)
        _by_device[device] = h
        return h
