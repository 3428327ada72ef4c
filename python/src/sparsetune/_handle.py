"""A libsparsetune handle: one database (or none) bound to one CUDA device.

Needs no torch: opening, closing, versions and errors work (and fail
clearly) on a machine without a GPU.
"""
import ctypes
import os
import threading

from . import _abi


class SparsetuneError(RuntimeError):
    """A libsparsetune call returned a status other than ST_OK.

    `status` is the status's name (``"ST_ERR_NO_DRIVER"``, ...), `message`
    the library's own (st_last_error: the argument and value at fault)."""

    def __init__(self, call, status, message):
        self.call, self.status, self.message = call, status, message
        super().__init__(f"{call}: {status}: {message}" if message else f"{call}: {status}")


_lib = None
_lib_lock = threading.Lock()


def library():
    """The loaded library (once a process)."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _abi.load()
        return _lib


def version():
    """The library's version string ("0.2.0")."""
    return library().st_version().decode()


def _status_name(lib, rc):
    name = lib.st_status_name(rc)
    return name.decode() if name else f"status {rc}"


class Handle:
    """An open libsparsetune handle. Use `sparsetune.open()` to make one.

    Thread-safe for launches (the library's handle is). Close it with
    close() or a `with` block; the torch ops stop using it then."""

    def __init__(self, db=None, device=0):
        if db is not None and not isinstance(db, (str, os.PathLike)):
            raise TypeError(f"db must be a path or None, not {type(db).__name__}")
        if not isinstance(device, int) or isinstance(device, bool) or device < 0:
            raise ValueError(f"device must be a CUDA device ordinal (an int >= 0), not {device!r}")
        self.lib = library()
        self.db = os.fspath(db) if db is not None else None
        self.device = device
        h = ctypes.c_void_p()
        rc = self.lib.st_open(self.db.encode() if self.db is not None else None, device, ctypes.byref(h))
        if rc != _abi.ST_OK:
            raise SparsetuneError(f"st_open({self.db!r}, {device})", _status_name(self.lib, rc), self._message(None))
        self._h = h
        self._lock = threading.Lock()
        self.workspace = None  # the ops' workspace (a torch tensor), owned here
        self.prepared = set()  # the shape keys whose module was loaded ahead of capture

    @property
    def ptr(self):
        if self._h is None:
            raise SparsetuneError("handle", "closed", "the handle was closed")
        return self._h

    @property
    def closed(self):
        return self._h is None

    def _message(self, h):
        m = self.lib.st_last_error(h)
        return m.decode(errors="replace") if m else ""

    def check(self, rc, call):
        """Raises SparsetuneError for a status other than ST_OK."""
        if rc != _abi.ST_OK:
            raise SparsetuneError(call, _status_name(self.lib, rc), self._message(self._h))

    def last_variant(self):
        """The variant of this thread's last launch through the handle ("" if none)."""
        v = self.lib.st_last_variant(self.ptr)
        return v.decode() if v else ""

    def close(self):
        if self._h is not None:
            from . import _registry  # torch-free

            _registry.forget(self)
            self.lib.st_close(self._h)
            self._h = None
            self.workspace = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self):
        state = "closed" if self.closed else f"device {self.device}"
        return f"<sparsetune.Handle db={self.db!r} {state}>"
