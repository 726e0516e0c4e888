"""``cupy.ndarray`` (a host numpy array standing for device memory), ``MemoryPointer``
and the allocating functions ``empty`` / ``zeros`` / ``asarray``."""
from __future__ import annotations

import weakref

import numpy as np

from .state import STRICT, _count, _drain, _enqueue, _host_wait, _lock, _wait
from .memory import (OutOfMemoryError, _BLOCK_MEM, _current_allocator, _data_owner,
                     get_current_stream)

# ------------------------------------------------------------------------------ arrays

class MemoryPointer:
    """``cupy.cuda.MemoryPointer``: what ``cupy.ndarray.data`` is -- a device address."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = int(ptr)

    def __int__(self):
        return self.ptr

    def __repr__(self):
        return f"<MemoryPointer 0x{self.ptr:x}>"


class ndarray:                                     # noqa: N801 - cupy's name
    """``cupy.ndarray`` backed by a host numpy array standing for device memory.

    ``_fk`` (strict mode) is what keeps the array's pool block allocated: every view of
    the array holds it, as cupy's views hold their ``MemoryPointer``; a kernel launch
    does not (see :func:`install`), so a block can go back to the pool while a launch
    queued on a stream still reads its memory, as on a GPU."""

    __slots__ = ("_a", "_fk")

    def __init__(self, shape, dtype=float):
        self._a = np.empty(shape, dtype=dtype)
        self._fk = None

    @classmethod
    def _wrap(cls, a: np.ndarray, fk=None) -> "ndarray":
        obj = cls.__new__(cls)
        obj._a = a
        obj._fk = fk
        return obj

    # -- attributes
    shape = property(lambda self: tuple(self._a.shape))
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    ndim = property(lambda self: self._a.ndim)
    strides = property(lambda self: tuple(self._a.strides))

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(self._a.ctypes.data)

    @property
    def __cuda_array_interface__(self) -> dict:
        cur = get_current_stream().ptr
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self._a.ctypes.data, False),
                "strides": None if self._a.flags.c_contiguous else self.strides,
                "descr": [("", self.dtype.str)],
                "stream": cur if cur else 1}       # 1: the legacy default stream

    # -- transfers
    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        _count("get")
        _wait("get")
        # a blocking copy on the current (or given) stream: its queued work runs first
        _drain((stream if stream is not None else get_current_stream()).ptr)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.dtype != self.dtype or out.shape != self.shape:
                raise ValueError("Shape or dtype mismatch between out and self")
            np.copyto(out, self._a)
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None) -> None:
        _count("set")
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if self.dtype != arr.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if self.shape != arr.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if not self._a.flags.c_contiguous:
            raise RuntimeError("Cannot set to non-contiguous array")
        src, dst = np.array(arr, copy=True), self._a     # the host source is read now
        _enqueue(get_current_stream().ptr, "set", lambda: np.copyto(dst, src))

    # -- views and element access
    def view(self, dtype=None) -> "ndarray":
        return ndarray._wrap(self._a.view() if dtype is None else self._a.view(dtype), self._fk)

    def reshape(self, *shape, order="C") -> "ndarray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        r = self._a.reshape(shape, order=order)                # a view when possible
        return ndarray._wrap(r, self._fk if np.shares_memory(r, self._a) else None)

    def fill(self, value) -> None:
        _count("fill")
        dst = self._a
        _enqueue(get_current_stream().ptr, "fill", lambda: dst.fill(value))

    def __getitem__(self, key) -> "ndarray":
        r = self._a[key]
        if not isinstance(r, np.ndarray):
            return ndarray._wrap(np.asarray(r))                                  # 0-d, like cupy
        return ndarray._wrap(r, self._fk if np.shares_memory(r, self._a) else None)

    def __setitem__(self, key, value) -> None:
        # stricter than cupy where cupy would upload: the project copies device to device
        _count("setitem")
        dst = self._a
        if isinstance(value, ndarray):
            src = value._a                    # device to device: read when it runs
        elif isinstance(value, (bool, int, float, np.generic)):
            src = value
        else:
            raise TypeError(f"Unsupported type {type(value)}")

        def run():
            dst[key] = src
        _enqueue(get_current_stream().ptr, "setitem", run)

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return self._a.shape[0]

    def __repr__(self):
        return f"fake_cupy.ndarray(shape={self.shape}, dtype={self.dtype})"


#: requests above this many bytes raise OutOfMemoryError (None: no limit); see
#: :func:`set_allocation_limit`
_ALLOC_LIMIT: list = [None]


def set_allocation_limit(nbytes: int | None) -> None:
    """Make ``empty``/``zeros`` refuse any request above ``nbytes`` with cupy's
    ``OutOfMemoryError`` (a device that has only that much free), to drive the prover's
    handling of a real cupy out-of-memory error; ``None`` lifts the limit."""
    _ALLOC_LIMIT[0] = None if nbytes is None else int(nbytes)


def _allocate(shape, dtype, order, fill):
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    limit = _ALLOC_LIMIT[0]
    if limit is not None and nbytes > limit:
        _count("out_of_memory")
        raise OutOfMemoryError(f"Out of memory allocating {nbytes:,} bytes "
                               f"(allocated so far: 0 bytes, limit {limit:,} bytes).")
    make = np.zeros if fill else np.empty
    a = make(shape, dtype=dtype, order=order)
    if STRICT[0]:
        # the thread's allocator (a private pool under cupy.cuda.using_allocator, else the
        # default pool) books the block; it goes back when the last array or view that
        # holds it dies (cupy arrays, their views and numba views taken of them)
        block = _current_allocator()(nbytes)
        _own_block(block, a)
        return ndarray._wrap(a, block)
    return ndarray._wrap(a)


def _keep(*_):
    """weakref.finalize target: the arguments (a pool block) die with the array."""

def _own_block(block, mem: np.ndarray) -> None:
    with _lock:
        _BLOCK_MEM[int(block.ptr)] = weakref.ref(_data_owner(mem))


def empty(shape, dtype=float, order="C") -> ndarray:
    _count("empty")
    return _allocate(shape, dtype, order, fill=False)


def zeros(shape, dtype=float, order="C") -> ndarray:
    _count("zeros")
    return _allocate(shape, dtype, order, fill=True)


def asarray(a, dtype=None, order=None) -> ndarray:
    """A cupy array of ``a``: itself, a zero-copy view of a numba (simulator) device
    array, or an upload of a numpy array -- anything else is refused."""
    _count("asarray")
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    if isinstance(a, ndarray):
        out = a
    elif isinstance(a, FakeCUDAArray):            # cupy reads its array interface: no copy
        ptr = getattr(a, "_fake_stream_ptr", 0)
        if ptr:
            # numba exports the stream the array was made on; cupy synchronises it
            # (CUPY_CUDA_ARRAY_INTERFACE_SYNC=1): a host wait
            _host_wait("cupy.asarray of a numba array made on a stream")
            _drain(ptr)
        out = ndarray._wrap(a._ary, getattr(a, "_fk", None))    # cupy keeps the owner
    elif isinstance(a, np.ndarray):
        out = ndarray._wrap(np.array(a, order="C", copy=True))
    else:
        raise TypeError(f"fake cupy.asarray: unsupported type {type(a).__name__}")
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = ndarray._wrap(out._a.astype(dtype))
    return out
