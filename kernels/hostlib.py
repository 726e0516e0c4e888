"""Host (CPU) side of the field: the shared scalar functions compiled with ``njit`` and
vectorised array operations built on them.

``HF`` is :func:`kernels.field.build` compiled for the CPU; host kernels elsewhere call
``HF.mul`` etc. inside their own ``njit`` loops.  The array functions below take
canonical uint32 arrays (any shape, broadcast like numpy) and return canonical uint32.
Extension-field arrays carry their 4 coefficients in the last axis: uint32[..., 4].
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from steadfast._jit_cache import adopt

from . import field
from .field import P

HF = field.build(njit(inline="always"))

_add, _sub, _mul, _pow, _inv = HF.add, HF.sub, HF.mul, HF.pow_, HF.inv
_ef_mul, _ef_inv = HF.ef_mul, HF.ef_inv


def check_field_array(a, name: str = "input", allow_empty: bool = True) -> np.ndarray:
    """Validate a field array's type: numpy uint32 (values are not checked against P; the
    public API in kernels/__init__.py checks them). Returns it contiguous."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy uint32 array, got {type(a).__name__}")
    if a.dtype != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    if not allow_empty and a.size == 0:
        raise ValueError(f"{name}: empty array")
    return np.ascontiguousarray(a)


@njit(cache=True, parallel=True)
def _binop(a, b, out, op):
    for i in prange(out.size):
        x = a[i]
        y = b[i]
        if op == 0:
            out[i] = _add(x, y)
        elif op == 1:
            out[i] = _sub(x, y)
        else:
            out[i] = _mul(x, y)


def _apply(a, b, op):
    a = check_field_array(a, "a")
    b = check_field_array(b, "b")
    x, y = np.broadcast_arrays(a, b)
    out = np.empty(x.shape, np.uint32)
    if out.size:
        _binop(np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(y).reshape(-1),
               out.reshape(-1), op)
    return out


def add(a, b):
    """(a + b) mod p, elementwise."""
    return _apply(a, b, 0)


def sub(a, b):
    """(a - b) mod p, elementwise."""
    return _apply(a, b, 1)


def mul(a, b):
    """(a * b) mod p, elementwise."""
    return _apply(a, b, 2)


@njit(cache=True, parallel=True)
def _pow_kernel(a, e, out):
    for i in prange(a.size):
        out[i] = _pow(a[i], e)


def power(a, e: int):
    """a^e mod p elementwise, e a non-negative integer < 2^64."""
    a = check_field_array(a, "a")
    if not 0 <= int(e) < 1 << 64:
        raise ValueError(f"exponent out of range: {e}")
    out = np.empty_like(a)
    if a.size:
        _pow_kernel(a.reshape(-1), np.uint64(e), out.reshape(-1))
    return out


def inverse(a):
    """a^{-1} elementwise; raises ZeroDivisionError if any element is 0."""
    a = check_field_array(a, "a")
    if np.any(a == 0):
        raise ZeroDivisionError("inverse of zero in BabyBear")
    return power(a, P - 2)


@njit(cache=True)
def _batch_inv_kernel(a, out):
    # Montgomery's trick: prefix products, one inversion, then walk back.
    n = a.size
    acc = np.uint32(1)
    for i in range(n):
        out[i] = acc
        acc = _mul(acc, a[i])
    inv_acc = _inv(acc)
    for i in range(n - 1, -1, -1):
        out[i] = _mul(out[i], inv_acc)
        inv_acc = _mul(inv_acc, a[i])


@njit(cache=True, parallel=True)
def _batch_inv_chunks(a, out, chunk):
    nchunks = (a.size + chunk - 1) // chunk
    for c in prange(nchunks):
        lo = c * chunk
        hi = min(a.size, lo + chunk)
        _batch_inv_kernel(a[lo:hi], out[lo:hi])


def batch_inverse(a):
    """Inverse of every element with one field inversion per chunk (Montgomery's trick)."""
    a = check_field_array(a, "a")
    if np.any(a == 0):
        raise ZeroDivisionError("batch inverse of an array containing zero")
    out = np.empty_like(a)
    if a.size:
        _batch_inv_chunks(a.reshape(-1), out.reshape(-1), 1 << 14)
    return out


# ---- extension field arrays: uint32[..., 4] ----

def _check_ef(a, name):
    a = check_field_array(a, name)
    if a.ndim == 0 or a.shape[-1] != 4:
        raise ValueError(f"{name}: extension-field arrays have a last axis of 4 coefficients, got shape {a.shape}")
    return a


@njit(cache=True, parallel=True)
def _ef_mul_kernel(a, b, out):
    for i in prange(out.shape[0]):
        r = _ef_mul(a[i, 0], a[i, 1], a[i, 2], a[i, 3], b[i, 0], b[i, 1], b[i, 2], b[i, 3])
        out[i, 0] = r[0]
        out[i, 1] = r[1]
        out[i, 2] = r[2]
        out[i, 3] = r[3]


@njit(cache=True, parallel=True)
def _ef_inv_kernel(a, out):
    for i in prange(out.shape[0]):
        r = _ef_inv(a[i, 0], a[i, 1], a[i, 2], a[i, 3])
        out[i, 0] = r[0]
        out[i, 1] = r[1]
        out[i, 2] = r[2]
        out[i, 3] = r[3]


@njit(cache=True)
def _ef_inv_serial(a, out):
    for i in range(out.shape[0]):
        r = _ef_inv(a[i, 0], a[i, 1], a[i, 2], a[i, 3])
        out[i, 0] = r[0]
        out[i, 1] = r[1]
        out[i, 2] = r[2]
        out[i, 3] = r[3]


#: below this many elements ef_inverse runs serially (the proof's calls: one total per
#: 4,096-element chunk of a batch inversion): it compiles in 1.4 CPU-s, the parfor kernel
#: in 2.4 (fresh cache, one process each); same function, same values
EF_INV_PARALLEL_MIN = 1 << 14


def ef_add(a, b):
    return add(_check_ef(a, "a"), _check_ef(b, "b"))


def ef_sub(a, b):
    return sub(_check_ef(a, "a"), _check_ef(b, "b"))


def ef_mul(a, b):
    """Product in EF = F_p[X]/(X^4 - 11), elementwise over the leading axes."""
    a = _check_ef(a, "a")
    b = _check_ef(b, "b")
    x, y = np.broadcast_arrays(a, b)
    shape = x.shape
    out = np.empty(shape, np.uint32)
    if out.size:
        _ef_mul_kernel(np.ascontiguousarray(x).reshape(-1, 4),
                       np.ascontiguousarray(y).reshape(-1, 4), out.reshape(-1, 4))
    return out


@njit(cache=True, nogil=True)
def _ef_powers_kernel(x0, x1, x2, x3, out):
    out[0, 0], out[1, 0], out[2, 0], out[3, 0] = 1, 0, 0, 0
    a0, a1, a2, a3 = np.uint32(1), np.uint32(0), np.uint32(0), np.uint32(0)
    for i in range(1, out.shape[1]):
        a0, a1, a2, a3 = _ef_mul(a0, a1, a2, a3, x0, x1, x2, x3)
        out[0, i], out[1, i], out[2, i], out[3, i] = a0, a1, a2, a3


def ef_powers(x, n: int) -> np.ndarray:
    """[1, x, ..., x^(n-1)] for one EF element x (4 canonical coefficients, any shape of
    4 values): uint64[4, n], coefficients on the first axis -- air.field.ef_powers'
    values and layout (the numpy reference, ~0.3-0.7 ms a call whatever n: the prover
    calls it for every table and every DEEP group), one compiled pass of n - 1 products."""
    v = np.asarray(x, np.uint64).reshape(-1)
    if v.size != 4:
        raise ValueError(f"ef_powers: x has {v.size} values, not one EF element's 4")
    if int(v.max(initial=0)) >= P:
        raise ValueError("ef_powers: x's coefficients must be canonical (< p)")
    out = np.empty((4, max(int(n), 1)), np.uint64)
    _ef_powers_kernel(np.uint32(v[0]), np.uint32(v[1]), np.uint32(v[2]), np.uint32(v[3]),
                      out)
    return out[:, :int(n)]


def ef_inverse(a):
    """Inverse in EF elementwise; raises ZeroDivisionError on a zero element."""
    a = _check_ef(a, "a")
    if np.any(np.all(a == 0, axis=-1)):
        raise ZeroDivisionError("inverse of zero in the extension field")
    out = np.empty_like(a)
    if out.size:
        kern = _ef_inv_kernel if out.size // 4 >= EF_INV_PARALLEL_MIN else _ef_inv_serial
        kern(a.reshape(-1, 4), out.reshape(-1, 4))
    return out


@njit(cache=True, nogil=True)
def _fold_chunks(sums, xors):
    """Combine per-chunk (sum, xor) pairs into the buffer's tag."""
    s = np.uint64(0)
    x = np.uint64(0)
    for c in range(sums.size):
        s += sums[c]
        x ^= xors[c]
    return s, x


@njit(cache=True, nogil=True, parallel=True)
def _sum_xor_chunks(flat, chunk):
    nchunks = (flat.size + chunk - 1) // chunk
    sums = np.zeros(nchunks, np.uint64)
    xors = np.zeros(nchunks, np.uint64)
    for c in prange(nchunks):
        s = np.uint64(0)
        x = np.uint64(0)
        for i in range(c * chunk, min(flat.size, (c + 1) * chunk)):
            v = np.uint64(flat[i])
            s += v
            x ^= v
        sums[c] = s
        xors[c] = x
    return _fold_chunks(sums, xors)


@njit(cache=True, nogil=True, parallel=True)
def _copy_sum_xor_chunks(dst, src, chunk):
    nchunks = (src.size + chunk - 1) // chunk
    sums = np.zeros(nchunks, np.uint64)
    xors = np.zeros(nchunks, np.uint64)
    for c in prange(nchunks):
        lo = c * chunk
        hi = min(src.size, lo + chunk)
        dst[lo:hi] = src[lo:hi]             # a block copy, then its tag from the cache
        s = np.uint64(0)
        x = np.uint64(0)
        for i in range(lo, hi):
            v = np.uint64(dst[i])
            s += v
            x ^= v
        sums[c] = s
        xors[c] = x
    return _fold_chunks(sums, xors)


def copy_checksum(dst: np.ndarray, src: np.ndarray) -> tuple:
    """Copy ``src`` into ``dst`` (uint32 arrays of one shape, ``dst`` C-contiguous) and
    return the integrity tag of the copied words (:func:`checksum_words`), in one pass:
    each block's tag is summed while the block is still in the cache, so the tag costs
    about a third of a separate pass over the buffer (bench/residency_bench.py measures
    it)."""
    if dst.dtype != np.uint32 or np.dtype(src.dtype) != np.uint32 or dst.shape != src.shape \
            or not dst.flags.c_contiguous:
        raise ValueError(f"copy_checksum: need uint32 arrays of one shape and a C-contiguous "
                         f"destination, got {dst.dtype}{dst.shape} <- {src.dtype}{src.shape}")
    if dst.size == 0:
        return (0, 0)
    s, x = _copy_sum_xor_chunks(dst.reshape(-1), np.ascontiguousarray(src).reshape(-1), 1 << 14)
    return int(s), int(x)


def checksum_words(a: np.ndarray) -> tuple:
    """Integrity tag of a uint32 array: (sum of its words mod 2^64, xor of its words), in
    one fused parallel pass; equal to ``kernels.layout_device.checksum_device`` on the
    same words."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.dtype != np.uint32:
        flat = flat.view(np.uint32) if flat.dtype.itemsize % 4 == 0 else flat.astype(np.uint32)
    if flat.size == 0:
        return (0, 0)
    s, x = _sum_xor_chunks(flat, 1 << 16)
    return int(s), int(x)


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("field.py",))
