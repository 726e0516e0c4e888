"""Device layout kernels: column-major LDE -> the committed row matrix, and gathers.

The prover keeps an LDE column-major (uint32[c, N], natural order) and commits its rows
in bit-reversed order (row s = the point g w_N^bitrev(s)); ``bitrev_rows_device`` builds
that uint32[N, c] matrix on the device in one pass (a transposing gather), and
``gather_columns_device`` gathers the opened rows of a column-major matrix so that only
the openings cross to the host.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, int64, uint32, uint64

from .devicelib import fetch, grid_1d, kernel

BLOCK = 128


def _view(a):
    """A numba view of a device array taken by its array interface (a cupy array) with
    ``sync=False``: the caller launches on the stream that wrote it (one thread owns that
    stream), so no host wait -- a cupy array handed to a launch directly would make numba
    synchronise its exporting stream on every launch."""
    if a is None or hasattr(a, "copy_to_host") or not hasattr(a, "__cuda_array_interface__"):
        return a
    return cuda.as_cuda_array(a, sync=False)


@kernel((uint32[:, ::1], uint32[:, ::1], int64),)
def _bitrev_rows_kernel(src, dst, log_n):
    # dst[s, c] = src[c, bitrev(s)] ; one thread per output element
    t = cuda.grid(1)
    n = dst.shape[0]
    c = dst.shape[1]
    if t < n * c:
        s = t // c
        col = t - s * c
        r = int64(0)
        v = int64(s)
        for _ in range(log_n):
            r = (r << int64(1)) | (v & int64(1))
            v >>= int64(1)
        dst[s, col] = src[col, r]


@kernel((uint32[:, ::1], int64[::1], uint32[:, ::1]),)
def _gather_columns_kernel(src, idx, dst):
    # dst[q, c] = src[c, idx[q]]
    t = cuda.grid(1)
    q = dst.shape[0]
    c = dst.shape[1]
    if t < q * c:
        i = t // c
        col = t - i * c
        dst[i, col] = src[col, idx[i]]


def bitrev_rows_device(src, out=None, stream=None):
    """uint32[c, N] (natural) -> uint32[N, c], row s = column values at bitrev(s)."""
    src, out = _view(src), _view(out)
    c, n = src.shape
    if n & (n - 1) or n == 0:
        raise ValueError(f"bitrev_rows_device: N must be a power of two, got {n}")
    s = stream or 0
    if out is None:
        out = cuda.device_array((n, c), dtype=np.uint32, stream=s)
    if out.shape != (n, c):
        raise ValueError(f"bitrev_rows_device: out has shape {out.shape}, expected {(n, c)}")
    if n * c:
        g, b = grid_1d(n * c, BLOCK)
        _bitrev_rows_kernel[g, b, s](src, out, np.int64(n.bit_length() - 1))
    return out


def gather_columns_device(src, idx: np.ndarray, stream=None) -> np.ndarray:
    """Rows idx of the row-view of a column-major device matrix -> host uint32[q, c]."""
    src = _view(src)
    c, n = src.shape
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    out = np.empty((idx.size, c), np.uint32)
    if idx.size == 0 or c == 0:
        return out
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError("gather_columns_device: index out of range")
    s = stream or 0
    d_idx = cuda.to_device(idx, stream=s)
    d_out = cuda.device_array((idx.size, c), dtype=np.uint32, stream=s)
    g, b = grid_1d(idx.size * c, BLOCK)
    _gather_columns_kernel[g, b, s](src, d_idx, d_out)
    return fetch(d_out, s, out)


@kernel((uint32[:, ::1], uint32[:, ::1], int64),)
def _split_parts_kernel(coeffs, blocks, n):
    # blocks[4 i + c, j] = coeffs[c, i n + j]: Q = sum_i X^(i n) q_i, q_i's coefficients
    t = cuda.grid(1)
    rows = blocks.shape[0]
    if t < rows * n:
        r = t // n
        j = t - r * n
        i = r // 4
        c = r - 4 * i
        blocks[r, j] = coeffs[c, i * n + j]


@kernel((uint32[:, ::1], uint32[:, ::1]),)
def _pad_columns_kernel(src, dst):
    # dst[r, j] = src[r, j] for j < n, 0 beyond (zero-padded coefficients for an LDE)
    t = cuda.grid(1)
    rows = dst.shape[0]
    big = dst.shape[1]
    if t < rows * big:
        r = t // big
        j = t - r * big
        dst[r, j] = src[r, j] if j < src.shape[1] else uint32(0)


def split_parts_device(coeffs, blocks, n: int, stream=None):
    """Decompose Q's coefficients uint32[4, P n] into the parts' blocks uint32[4 P, n]."""
    coeffs, blocks = _view(coeffs), _view(blocks)
    rows = blocks.shape[0]
    if rows % 4 or coeffs.shape[1] < (rows // 4) * n:
        raise ValueError(f"split_parts_device: shapes {coeffs.shape} -> {blocks.shape} do not match")
    if rows * n:
        g, b = grid_1d(rows * n, BLOCK)
        _split_parts_kernel[g, b, stream or 0](coeffs, blocks, np.int64(n))
    return blocks


def pad_columns_device(src, dst, stream=None):
    """Copy uint32[r, n] into the left of uint32[r, N] and zero the rest."""
    src, dst = _view(src), _view(dst)
    if src.shape[0] != dst.shape[0] or src.shape[1] > dst.shape[1]:
        raise ValueError(f"pad_columns_device: {src.shape} does not fit {dst.shape}")
    if dst.shape[0] * dst.shape[1]:
        g, b = grid_1d(dst.shape[0] * dst.shape[1], BLOCK)
        _pad_columns_kernel[g, b, stream or 0](src, dst)
    return dst


@kernel((uint32[::1], uint64[::1]),)
def _checksum_kernel(flat, out):
    # grid-stride: each thread folds its words into (sum mod 2^64, xor), then one atomic each
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    s = uint64(0)
    x = uint64(0)
    while i < flat.shape[0]:
        v = uint64(flat[i])
        s += v
        x ^= v
        i += stride
    cuda.atomic.add(out, 0, s)
    cuda.atomic.xor(out, 1, x)


def checksum_device(arr, max_blocks: int = 512, block: int = 256, stream=None) -> tuple:
    """Integrity tag of a C-contiguous uint32 device array: (sum of its words mod 2^64,
    xor of its words) -- the same pair as ``kernels.hostlib.checksum_words`` -- reduced on
    the device so that only 16 bytes cross to the host."""
    arr = _view(arr)
    if np.dtype(arr.dtype) != np.uint32:
        raise TypeError(f"checksum_device: expected uint32, got {arr.dtype}")
    size = 1
    for d in tuple(arr.shape):
        size *= int(d)
    s = stream or 0
    out = cuda.to_device(np.zeros(2, np.uint64), stream=s)
    if size:
        flat = arr.reshape(size)
        blocks = max(1, min(max_blocks, (size + block - 1) // block))
        _checksum_kernel[blocks, block, s](flat, out)
    got = fetch(out, s)
    return int(got[0]), int(got[1])
