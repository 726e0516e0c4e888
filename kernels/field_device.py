"""Device (numba.cuda) elementwise field kernels, built on the shared field source.

These are the device twins of :mod:`kernels.hostlib`'s array functions; the prover's
device stages use them (e.g. the batch inversion of LogUp denominators).  All take and
return C-contiguous numba device arrays of canonical uint32; EF arrays are uint32[n, 4].
The kernels are declared for exactly the types the wrappers launch with (C-contiguous
arrays, the operation code as uint32): numba reuses a precompiled kernel only for an
exact match (tests/test_launch_audit.py).
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint32, uint64

from .devicelib import DF, grid_1d, kernel

_add, _sub, _mul, _inv = DF.add, DF.sub, DF.mul, DF.inv
_ef_mul, _ef_inv = DF.ef_mul, DF.ef_inv

BLOCK = 128


@kernel((uint32[::1], uint32[::1], uint32[::1], uint32),)
def _binop_kernel(a, b, out, op):
    i = cuda.grid(1)
    if i < out.shape[0]:
        if op == 0:
            out[i] = _add(a[i], b[i])
        elif op == 1:
            out[i] = _sub(a[i], b[i])
        else:
            out[i] = _mul(a[i], b[i])


@kernel((uint32[:, ::1], uint32[:, ::1], uint32[:, ::1]),)
def _ef_mul_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        r = _ef_mul(a[i, 0], a[i, 1], a[i, 2], a[i, 3], b[i, 0], b[i, 1], b[i, 2], b[i, 3])
        out[i, 0] = r[0]
        out[i, 1] = r[1]
        out[i, 2] = r[2]
        out[i, 3] = r[3]


@kernel((uint32[:, ::1], uint32[:, ::1]),)
def _ef_inv_kernel(a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        r = _ef_inv(a[i, 0], a[i, 1], a[i, 2], a[i, 3])
        out[i, 0] = r[0]
        out[i, 1] = r[1]
        out[i, 2] = r[2]
        out[i, 3] = r[3]


@kernel((uint32[::1], uint32[::1], uint64),)
def _batch_inv_kernel(a, out, chunk):
    # One thread inverts one chunk with Montgomery's trick: prefix products,
    # a single Fermat inversion, then a backward sweep.
    t = cuda.grid(1)
    n = a.shape[0]
    lo = uint64(t) * chunk
    if lo >= n:
        return
    hi = lo + chunk
    if hi > n:
        hi = uint64(n)
    acc = uint32(1)
    i = lo
    while i < hi:
        out[i] = acc
        acc = _mul(acc, a[i])
        i += uint64(1)
    inv_acc = _inv(acc)
    i = hi
    while i > lo:
        i -= uint64(1)
        out[i] = _mul(out[i], inv_acc)
        inv_acc = _mul(inv_acc, a[i])


def _contiguous(*arrays) -> None:
    for a in arrays:
        if not a.is_c_contiguous():
            raise ValueError("field_device: arrays must be C-contiguous (the kernels are "
                             "compiled for that layout)")


def _launch_binop(a, b, op, out=None, stream=0):
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"elementwise device op needs equal 1-D shapes, got {a.shape} and {b.shape}")
    if out is None:
        out = cuda.device_array(a.shape, dtype=np.uint32, stream=stream)
    _contiguous(a, b, out)
    if a.shape[0]:
        g, b_ = grid_1d(a.shape[0], BLOCK)
        _binop_kernel[g, b_, stream](a, b, out, np.uint32(op))
    return out


def add(a, b, out=None, stream=0):
    return _launch_binop(a, b, 0, out, stream)


def sub(a, b, out=None, stream=0):
    return _launch_binop(a, b, 1, out, stream)


def mul(a, b, out=None, stream=0):
    return _launch_binop(a, b, 2, out, stream)


def ef_mul(a, b, out=None, stream=0):
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"ef_mul needs equal [n, 4] shapes, got {a.shape} and {b.shape}")
    if out is None:
        out = cuda.device_array(a.shape, dtype=np.uint32, stream=stream)
    _contiguous(a, b, out)
    if a.shape[0]:
        g, b_ = grid_1d(a.shape[0], BLOCK)
        _ef_mul_kernel[g, b_, stream](a, b, out)
    return out


def ef_inverse(a, out=None, stream=0):
    """EF inverse elementwise (zero maps to zero; callers check for zero)."""
    if a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"ef_inverse needs an [n, 4] array, got {a.shape}")
    if out is None:
        out = cuda.device_array(a.shape, dtype=np.uint32, stream=stream)
    _contiguous(a, out)
    if a.shape[0]:
        g, b_ = grid_1d(a.shape[0], BLOCK)
        _ef_inv_kernel[g, b_, stream](a, out)
    return out


def batch_inverse(a, out=None, stream=0, chunk: int = 64):
    """Inverse of every (non-zero) element; one Fermat inversion per ``chunk`` elements."""
    if a.ndim != 1:
        raise ValueError(f"batch_inverse needs a 1-D array, got {a.shape}")
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    if out is None:
        out = cuda.device_array(a.shape, dtype=np.uint32, stream=stream)
    _contiguous(a, out)
    n = a.shape[0]
    if n:
        threads = (n + chunk - 1) // chunk
        g, b_ = grid_1d(threads, BLOCK)
        _batch_inv_kernel[g, b_, stream](a, out, np.uint64(chunk))
    return out
