"""Small host kernels the protocol rounds need beyond kernels/ (numba, compiled once).

All inputs and outputs are canonical uint32; EF values are uint32[..., 4] (last axis)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..kernels.hostlib import HF, ef_inverse

_P64 = np.uint64(2013265921)
_mul = HF.mul
_add, _sub, _neg = HF.add, HF.sub, HF.neg
_ef_mul = HF.ef_mul


@njit(cache=True, parallel=True)
def _dot_cols(mat, vec, out):
    # out[j, c] = sum_i mat[j, i] * vec[i, c] (mod p).  Each product is reduced (< 2^31),
    # and n <= 2^27 such terms sum below 2^58: one final reduction suffices.
    w, n = mat.shape
    for j in prange(w):
        acc0 = np.uint64(0)
        acc1 = np.uint64(0)
        acc2 = np.uint64(0)
        acc3 = np.uint64(0)
        for i in range(n):
            a = np.uint64(mat[j, i])
            acc0 += (a * np.uint64(vec[i, 0])) % _P64
            acc1 += (a * np.uint64(vec[i, 1])) % _P64
            acc2 += (a * np.uint64(vec[i, 2])) % _P64
            acc3 += (a * np.uint64(vec[i, 3])) % _P64
        out[j, 0] = np.uint32(acc0 % _P64)
        out[j, 1] = np.uint32(acc1 % _P64)
        out[j, 2] = np.uint32(acc2 % _P64)
        out[j, 3] = np.uint32(acc3 % _P64)


def dot_columns(mat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Base matrix (c, n) times an EF vector (n, 4) -> EF (c, 4): each column's
    inner product with ``vec`` (e.g. coefficients times powers of z)."""
    mat = np.ascontiguousarray(mat, dtype=np.uint32)
    vec = np.ascontiguousarray(vec, dtype=np.uint32)
    if mat.ndim != 2 or vec.shape != (mat.shape[1], 4):
        raise ValueError(f"dot_columns: shapes {mat.shape} and {vec.shape} do not match")
    out = np.zeros((mat.shape[0], 4), dtype=np.uint32)
    if mat.size:
        _dot_cols(mat, vec, out)
    return out


_M32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_NINV = np.uint64((-pow(2013265921, -1, 1 << 32)) % (1 << 32))     # -p^-1 mod 2^32
_COMBINE_CHUNK = 1 << 10


@njit(cache=True, parallel=True)
def _combine_rows(mat, coeffs_m, out, chunk):
    # Montgomery products with coefficients in Montgomery form (k * 2^32 mod p): for a < p,
    # t = a k_m < 2^62 and u = (t + ((t mod 2^32) (-p^-1) mod 2^32) p) / 2^32 = a k (mod p)
    # with u < 2p -- three 32x32 multiplies, no remainder, vectorised over a chunk of
    # contiguous points per column; the < 2p terms sum without wrapping for c < 2^32
    # columns and are reduced once at the end.
    c, n = mat.shape
    nchunks = (n + chunk - 1) // chunk
    for t in prange(nchunks):
        lo = t * chunk
        hi = min(n, lo + chunk)
        m = hi - lo
        acc = np.zeros((4, chunk), dtype=np.uint64)
        for j in range(c):
            k0 = np.uint64(coeffs_m[j, 0])
            k1 = np.uint64(coeffs_m[j, 1])
            k2 = np.uint64(coeffs_m[j, 2])
            k3 = np.uint64(coeffs_m[j, 3])
            for i in range(m):
                a = np.uint64(mat[j, lo + i])
                t0 = a * k0
                t1 = a * k1
                t2 = a * k2
                t3 = a * k3
                acc[0, i] += (t0 + (((t0 & _M32) * _NINV) & _M32) * _P64) >> _U32
                acc[1, i] += (t1 + (((t1 & _M32) * _NINV) & _M32) * _P64) >> _U32
                acc[2, i] += (t2 + (((t2 & _M32) * _NINV) & _M32) * _P64) >> _U32
                acc[3, i] += (t3 + (((t3 & _M32) * _NINV) & _M32) * _P64) >> _U32
        for i in range(m):
            out[lo + i, 0] = np.uint32(acc[0, i] % _P64)
            out[lo + i, 1] = np.uint32(acc[1, i] % _P64)
            out[lo + i, 2] = np.uint32(acc[2, i] % _P64)
            out[lo + i, 3] = np.uint32(acc[3, i] % _P64)


def combine_rows(mat: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """sum_j coeffs[j] * mat[j, x] for every x: base (c, N) column-major with EF
    coefficients (c, 4) -> EF (N, 4), canonical.  Montgomery products (< 2p each, see
    _combine_rows), so c < 2^32 columns keep the sums below 2^64."""
    mat = np.ascontiguousarray(mat, dtype=np.uint32)
    coeffs = np.ascontiguousarray(coeffs, dtype=np.uint32)
    if mat.ndim != 2 or coeffs.shape != (mat.shape[0], 4):
        raise ValueError(f"combine_rows: shapes {mat.shape} and {coeffs.shape} do not match")
    if coeffs.size and int(coeffs.max()) >= 2013265921:
        raise ValueError("combine_rows: coefficients must be canonical field elements")
    out = np.zeros((mat.shape[1], 4), dtype=np.uint32)
    if mat.size:
        coeffs_m = ((coeffs.astype(np.uint64) << np.uint64(32)) % _P64).astype(np.uint32)
        _combine_rows(mat, coeffs_m, out, _COMBINE_CHUNK)
    return out


@njit(cache=True)
def _deep_accumulate(total, comb, cst, inv):
    # total[x] += (comb[x] - cst) * inv[x]   (all EF)
    for x in range(total.shape[0]):
        q0, q1, q2, q3 = _ef_mul(_sub(comb[x, 0], cst[0]), _sub(comb[x, 1], cst[1]),
                                 _sub(comb[x, 2], cst[2]), _sub(comb[x, 3], cst[3]),
                                 inv[x, 0], inv[x, 1], inv[x, 2], inv[x, 3])
        total[x, 0] = _add(total[x, 0], q0)
        total[x, 1] = _add(total[x, 1], q1)
        total[x, 2] = _add(total[x, 2], q2)
        total[x, 3] = _add(total[x, 3], q3)


@njit(cache=True)
def _prefix_products(a, pref, totals, chunk):
    # pref[i] = product of a[lo..i) within i's chunk; totals[c] = product of chunk c
    n = a.shape[0]
    for t in range(totals.shape[0]):
        p0 = np.uint32(1)
        p1 = np.uint32(0)
        p2 = np.uint32(0)
        p3 = np.uint32(0)
        for i in range(t * chunk, min(n, (t + 1) * chunk)):
            pref[i, 0] = p0
            pref[i, 1] = p1
            pref[i, 2] = p2
            pref[i, 3] = p3
            p0, p1, p2, p3 = _ef_mul(p0, p1, p2, p3, a[i, 0], a[i, 1], a[i, 2], a[i, 3])
        totals[t, 0] = p0
        totals[t, 1] = p1
        totals[t, 2] = p2
        totals[t, 3] = p3


@njit(cache=True)
def _walk_back(a, pref, inv_totals, out, chunk):
    # Montgomery's trick, second half: inv running = 1 / (product through i)
    n = a.shape[0]
    for t in range(inv_totals.shape[0]):
        r0 = inv_totals[t, 0]
        r1 = inv_totals[t, 1]
        r2 = inv_totals[t, 2]
        r3 = inv_totals[t, 3]
        for i in range(min(n, (t + 1) * chunk) - 1, t * chunk - 1, -1):
            v0, v1, v2, v3 = _ef_mul(pref[i, 0], pref[i, 1], pref[i, 2], pref[i, 3], r0, r1, r2, r3)
            out[i, 0] = v0
            out[i, 1] = v1
            out[i, 2] = v2
            out[i, 3] = v3
            r0, r1, r2, r3 = _ef_mul(r0, r1, r2, r3, a[i, 0], a[i, 1], a[i, 2], a[i, 3])


def ef_batch_inverse(a: np.ndarray, chunk: int = 1 << 12) -> np.ndarray:
    """Inverse of every EF element of uint32[N, 4] with one EF inversion per chunk
    (Montgomery's trick); raises ZeroDivisionError if an element is zero."""
    a = np.ascontiguousarray(a, dtype=np.uint32)
    n = a.shape[0]
    out = np.empty_like(a)
    if n == 0:
        return out
    nchunks = (n + chunk - 1) // chunk
    pref = np.empty_like(a)
    totals = np.empty((nchunks, 4), dtype=np.uint32)
    _prefix_products(a, pref, totals, chunk)
    inv_totals = ef_inverse(totals)          # raises ZeroDivisionError on a zero product
    _walk_back(a, pref, inv_totals, out, chunk)
    return out


def deep_accumulate(total: np.ndarray, comb: np.ndarray, cst: np.ndarray, xs: np.ndarray,
                    z: np.ndarray) -> None:
    """In place: total[x] += (comb[x] - cst) / (xs[x] - z)  (EF (N,4), EF (N,4), EF (4,),
    base (N,), EF (4,)).  z must not be one of the points xs."""
    den = np.empty((xs.shape[0], 4), dtype=np.uint32)
    den[:, 0] = (xs.astype(np.uint64) + np.uint64(2013265921) - np.uint64(z[0])) % _P64
    den[:, 1:] = (np.uint64(2013265921) - np.asarray(z[1:], np.uint64)) % _P64
    inv = ef_batch_inverse(den)
    _deep_accumulate(total, np.ascontiguousarray(comb, np.uint32),
                     np.asarray(cst, np.uint32), inv)
