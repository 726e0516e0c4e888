"""BabyBear field and its quartic extension, written once for every target.

The scalar functions below are plain Python over numpy integer scalars.  ``build(jit)``
compiles the same source with a given decorator: ``HF`` in ``kernels/hostlib.py``
(``njit(inline="always")``) for the CPU kernels and ``DF`` in ``kernels/devicelib.py``
(CUDA device functions) for the CUDA kernels, e.g. ``kernels/field_device.py``.  Under
numba's CUDA simulator the device build runs as plain Python, so the very same code is
also exercised with numpy semantics.

Every function takes and returns canonical values (uint32 in [0, p)), except the
``mont_*`` helpers whose second operand is in Montgomery form (x·2^32 mod p): for a
canonical ``a`` and ``w_m = w·2^32 mod p``, ``mont_mul(a, w_m) = a·w mod p`` canonical.
That lets hot loops multiply by precomputed constants with a 32-bit Montgomery
reduction (three 32×32→64 multiplies, which LLVM vectorises with AVX2) instead of a
64-bit remainder.  ``to_mont`` / ``from_mont`` / ``mont_ef_mul`` / ``mont_ef_mul_base``
work with every operand in Montgomery form: the generated constraint kernels
(:mod:`kernels.constraint_device`) convert their inputs once and multiply with one
reduction each (on a GPU the 64-bit remainder of ``mul`` is a long emulated sequence).

Arithmetic is done in uint64 where no intermediate can wrap, so numba's typed integer
rules and numpy's scalar rules give the same answers (no reliance on wrap-around).
"""
from __future__ import annotations

import numpy as np

P = 2013265921                      # 2^31 - 2^27 + 1
GENERATOR = 31
TWO_ADICITY = 27
EXT_W = 11                          # EF = F_p[X]/(X^4 - 11)
EXT_DEGREE = 4

# Montgomery constants, R = 2^32.
MONT_R = (1 << 32) % P
MONT_R2 = (1 << 64) % P
MONT_NINV = (-pow(P, -1, 1 << 32)) % (1 << 32)   # -p^{-1} mod 2^32

_P64 = np.uint64(P)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_NINV64 = np.uint64(MONT_NINV)
_R2_32 = np.uint32(MONT_R2)
_ONE32 = np.uint32(1)
_ZERO32 = np.uint32(0)
_W64 = np.uint64(EXT_W)
_WM64 = np.uint64((EXT_W << 32) % P)             # W in Montgomery form
_R2_64 = np.uint64(MONT_R2)
_PM2 = P - 2


def to_mont_host(x):
    """Vectorised (numpy) canonical -> Montgomery form; for constant tables."""
    x = np.asarray(x, dtype=np.uint64)
    return ((x << np.uint64(32)) % _P64).astype(np.uint32)


def root_of_unity(log_n: int) -> int:
    """omega_{2^log_n} = 31^((p-1)/2^log_n) (SPEC §1)."""
    if not 0 <= log_n <= TWO_ADICITY:
        raise ValueError(f"no 2^{log_n}-th root of unity in BabyBear (two-adicity {TWO_ADICITY})")
    return pow(GENERATOR, (P - 1) >> log_n, P)


def build(jit):
    """Compile the scalar field functions with decorator ``jit``; returns a namespace."""

    @jit
    def reduce64(x):
        # any uint64 -> canonical uint32 (64-bit remainder; use off the hot path)
        return np.uint32(np.uint64(x) % _P64)

    @jit
    def add(a, b):
        s = np.uint64(a) + np.uint64(b)
        if s >= _P64:
            s = s - _P64
        return np.uint32(s)

    @jit
    def sub(a, b):
        s = np.uint64(a) + _P64 - np.uint64(b)
        if s >= _P64:
            s = s - _P64
        return np.uint32(s)

    @jit
    def neg(a):
        s = _P64 - np.uint64(a)
        if s >= _P64:
            s = s - _P64
        return np.uint32(s)

    @jit
    def mul(a, b):
        return np.uint32((np.uint64(a) * np.uint64(b)) % _P64)

    @jit
    def mont_reduce(t):
        # t < p * 2^32  ->  t * 2^-32 mod p, canonical.
        m = ((t & _MASK32) * _NINV64) & _MASK32
        u = (t + m * _P64) >> _SHIFT32
        if u >= _P64:
            u = u - _P64
        return np.uint32(u)

    @jit
    def mont_mul(a, b):
        # a * b * 2^-32 mod p
        return mont_reduce(np.uint64(a) * np.uint64(b))

    @jit
    def to_mont(a):
        # canonical -> Montgomery form a * 2^32 mod p
        return mont_reduce(np.uint64(a) * _R2_64)

    @jit
    def from_mont(a):
        # Montgomery form -> canonical
        return mont_reduce(np.uint64(a))

    @jit
    def mont_ef_mul(a0, a1, a2, a3, b0, b1, b2, b3):
        # ef_mul with every coefficient in Montgomery form (in and out).  A sum of two
        # products < 2 p^2 < p * 2^32 takes one reduction; W enters as W * 2^32 mod p.
        x0 = np.uint64(a0); x1 = np.uint64(a1); x2 = np.uint64(a2); x3 = np.uint64(a3)
        y0 = np.uint64(b0); y1 = np.uint64(b1); y2 = np.uint64(b2); y3 = np.uint64(b3)
        h4 = add(mont_reduce(x1 * y3 + x2 * y2), mont_reduce(x3 * y1))
        h5 = mont_reduce(x2 * y3 + x3 * y2)
        h6 = mont_reduce(x3 * y3)
        c0 = mont_reduce(x0 * y0 + np.uint64(h4) * _WM64)
        c1 = add(mont_reduce(x0 * y1 + x1 * y0), mont_reduce(np.uint64(h5) * _WM64))
        c2 = add(mont_reduce(x0 * y2 + x1 * y1), mont_reduce(x2 * y0 + np.uint64(h6) * _WM64))
        c3 = add(mont_reduce(x0 * y3 + x1 * y2), mont_reduce(x2 * y1 + x3 * y0))
        return c0, c1, c2, c3

    @jit
    def mont_ef_mul_base(a0, a1, a2, a3, b):
        # EF times base, all in Montgomery form
        return mont_mul(a0, b), mont_mul(a1, b), mont_mul(a2, b), mont_mul(a3, b)

    @jit
    def pow_(a, e):
        result = _ONE32
        base = np.uint32(a)
        e = np.uint64(e)
        while e > np.uint64(0):
            if e & np.uint64(1):
                result = mul(result, base)
            base = mul(base, base)
            e = e >> np.uint64(1)
        return result

    @jit
    def inv(a):
        # Fermat: a^(p-2); inv(0) = 0 by convention (callers check for zero).
        return pow_(a, _PM2)

    # ---- quartic extension: elements are 4 canonical coefficients (c0..c3) ----
    @jit
    def ef_add(a0, a1, a2, a3, b0, b1, b2, b3):
        return add(a0, b0), add(a1, b1), add(a2, b2), add(a3, b3)

    @jit
    def ef_sub(a0, a1, a2, a3, b0, b1, b2, b3):
        return sub(a0, b0), sub(a1, b1), sub(a2, b2), sub(a3, b3)

    @jit
    def ef_mul(a0, a1, a2, a3, b0, b1, b2, b3):
        # schoolbook with X^4 = 11; each partial product < 2^62 is reduced first,
        # sums of at most 4 canonical values (< 2^33) are reduced once.
        x0 = np.uint64(a0); x1 = np.uint64(a1); x2 = np.uint64(a2); x3 = np.uint64(a3)
        y0 = np.uint64(b0); y1 = np.uint64(b1); y2 = np.uint64(b2); y3 = np.uint64(b3)
        # high part (coefficients of X^4, X^5, X^6), then times W
        h4 = (np.uint64(mul(x1, y3)) + np.uint64(mul(x2, y2)) + np.uint64(mul(x3, y1))) % _P64
        h5 = (np.uint64(mul(x2, y3)) + np.uint64(mul(x3, y2))) % _P64
        h6 = np.uint64(mul(x3, y3))
        c0 = (np.uint64(mul(x0, y0)) + h4 * _W64) % _P64
        c1 = (np.uint64(mul(x0, y1)) + np.uint64(mul(x1, y0)) + h5 * _W64) % _P64
        c2 = (np.uint64(mul(x0, y2)) + np.uint64(mul(x1, y1)) + np.uint64(mul(x2, y0))
              + h6 * _W64) % _P64
        c3 = (np.uint64(mul(x0, y3)) + np.uint64(mul(x1, y2)) + np.uint64(mul(x2, y1))
              + np.uint64(mul(x3, y0))) % _P64
        return np.uint32(c0), np.uint32(c1), np.uint32(c2), np.uint32(c3)

    @jit
    def ef_mul_base(a0, a1, a2, a3, b):
        return mul(a0, b), mul(a1, b), mul(a2, b), mul(a3, b)

    @jit
    def ef_inv(a0, a1, a2, a3):
        # a(X)·a(-X) = e(X^2) with e(Y) = e0 + e1·Y, Y^2 = W; norm N = e0^2 - W·e1^2.
        # a^{-1} = a(-X) · (e0 - e1·X^2) / N.
        n1 = neg(a1)
        n3 = neg(a3)
        b0, b1, b2, b3 = ef_mul(a0, a1, a2, a3, a0, n1, a2, n3)   # b1 = b3 = 0
        w_b2sq = mul(np.uint32(EXT_W), mul(b2, b2))
        nrm = sub(mul(b0, b0), w_b2sq)
        ni = inv(nrm)
        c0, c1, c2, c3 = ef_mul(a0, n1, a2, n3, b0, _ZERO32, neg(b2), _ZERO32)
        return mul(c0, ni), mul(c1, ni), mul(c2, ni), mul(c3, ni)

    @jit
    def ef_pow(a0, a1, a2, a3, e):
        r0 = _ONE32; r1 = _ZERO32; r2 = _ZERO32; r3 = _ZERO32
        e = np.uint64(e)
        while e > np.uint64(0):
            if e & np.uint64(1):
                r0, r1, r2, r3 = ef_mul(r0, r1, r2, r3, a0, a1, a2, a3)
            a0, a1, a2, a3 = ef_mul(a0, a1, a2, a3, a0, a1, a2, a3)
            e = e >> np.uint64(1)
        return r0, r1, r2, r3

    class Field:
        pass

    ns = Field()
    for name, fn in dict(locals()).items():
        if name not in ("jit", "Field", "ns"):
            setattr(ns, name, fn)
    return ns
