"""Compiled scalar BabyBear and quartic-extension arithmetic for the verifier's numba
kernels (:mod:`verifier.composition`, :mod:`verifier.join`).

Values are canonical ``np.uint64`` residues.  A product of two residues is < p^2 < 2^62
and is reduced at once; sums of a few reduced terms stay far below 2^64.  EF =
F_p[X]/(X^4 - 11), an element passed as its four coefficients.  Every function is
compiled on its own (``njit(_nrt=False)``, as the kernels are) and called: LLVM inlines
them into the kernels as it sees fit.  Inlined into numba's IR instead
(``inline="always"``), the verifier's kernels took 14.1 s to compile on a cold start
instead of 9.3 s (the composition kernel's dozen EF products and two EF inversions 4.2 s
instead of 1.0 s), and verified no faster.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .field import P

P64 = np.uint64(P)
W64 = np.uint64(11)                       # X^4 = 11 in EF
ZERO = np.uint64(0)
ONE = np.uint64(1)
TWO = np.uint64(2)


@njit(_nrt=False)
def mul(a, b):
    return (a * b) % P64


@njit(_nrt=False)
def add(a, b):
    s = a + b
    return s - P64 if s >= P64 else s


@njit(_nrt=False)
def sub(a, b):
    s = a + P64 - b
    return s - P64 if s >= P64 else s


@njit(_nrt=False)
def power(b, e):
    """b^e for an integer e >= 0 (square and multiply)."""
    r = ONE
    b = b % P64
    while e:
        if e & 1:
            r = mul(r, b)
        b = mul(b, b)
        e >>= 1
    return r


@njit(_nrt=False)
def inv(a):
    """a^(p-2) (0 maps to 0, like air.field.inv)."""
    return power(a, P - 2)


@njit(_nrt=False)
def ef_mul(a0, a1, a2, a3, b0, b1, b2, b3):
    """Schoolbook product mod X^4 - 11: each partial product reduced (< p); the sums of
    at most 4 residues plus 11 times a sum of 3 (< 15p < 2^35) cannot wrap."""
    c0 = mul(a0, b0) + mul(W64, (mul(a1, b3) + mul(a2, b2) + mul(a3, b1)) % P64)
    c1 = mul(a0, b1) + mul(a1, b0) + mul(W64, (mul(a2, b3) + mul(a3, b2)) % P64)
    c2 = mul(a0, b2) + mul(a1, b1) + mul(a2, b0) + mul(W64, mul(a3, b3))
    c3 = mul(a0, b3) + mul(a1, b2) + mul(a2, b1) + mul(a3, b0)
    return c0 % P64, c1 % P64, c2 % P64, c3 % P64


@njit(_nrt=False)
def ef_inv(a0, a1, a2, a3):
    """Inverse via the norm (as air.field.ef_inv): with conj = (a0, -a1, a2, -a3),
    a conj = e0 + e2 X^2 and N = e0^2 - 11 e2^2; a^-1 = conj (e0 - e2 X^2) / N.
    Zero maps to zero."""
    n1 = sub(ZERO, a1)
    n3 = sub(ZERO, a3)
    e0, _, e2, _ = ef_mul(a0, a1, a2, a3, a0, n1, a2, n3)
    ni = inv(sub(mul(e0, e0), mul(W64, mul(e2, e2))))
    c0, c1, c2, c3 = ef_mul(a0, n1, a2, n3, e0, ZERO, sub(ZERO, e2), ZERO)
    return mul(c0, ni), mul(c1, ni), mul(c2, ni), mul(c3, ni)


@njit(_nrt=False)
def bitrev(v, bits):
    """The low ``bits`` bits of v reversed."""
    r = 0
    for _ in range(bits):
        r = (r << 1) | (v & 1)
        v >>= 1
    return r


__all__ = ["P64", "W64", "ZERO", "ONE", "TWO", "mul", "add", "sub", "power", "inv", "ef_mul",
           "ef_inv", "bitrev"]
