"""Small numpy BabyBear / quartic-extension arithmetic for evaluating AIRs.

This module is deliberately self-contained (numpy only): the AIR evaluators run in the
prover (over the quotient domain) and in the verifier (at the out-of-domain point), and
the verifier must not depend on ``kernels/``.

Representation
--------------
* Base-field values: ``np.uint64`` arrays (or Python ints) holding canonical residues in
  [0, p).  Products of two residues are < 2^62, so ``(a * b) % P`` never wraps.
* Extension-field values (EF = F_p[X]/(X^4 - 11)): the 4 coefficients live on the
  **first** axis, shape ``(4, ...)`` -- ``a[0] + a[1] X + a[2] X^2 + a[3] X^3``.  A single
  EF scalar is shape ``(4, 1)`` so that it broadcasts against ``(4, M)`` arrays.
  (The proof format and ``kernels`` use the last axis; convert with ``.T``.)
"""
from __future__ import annotations

import numpy as np

P = 2013265921
W = 11                  # X^4 = W in EF
GENERATOR = 31
TWO_ADICITY = 27
_P = np.uint64(P)
_W = np.uint64(W)


def u64(a) -> np.ndarray:
    """Canonical residues as uint64 (no reduction: the caller promises values < p)."""
    return np.asarray(a, dtype=np.uint64)


# add / sub / neg: s in [0, 2p) reduces to min(s, s - p) -- where s < p the uint64
# difference wraps above 2^63 and the minimum is s (ufuncs: wrap-around without warnings;
# the result is an array, 0-d for scalar inputs, as np.where gave).

def add(a, b):
    s = np.add(u64(a), u64(b))
    return np.asarray(np.minimum(s, np.subtract(s, _P)))


def sub(a, b):
    s = np.subtract(np.add(u64(a), _P), u64(b))
    return np.asarray(np.minimum(s, np.subtract(s, _P)))


def neg(a):
    s = np.subtract(_P, u64(a))                   # in (0, p]; p maps to 0
    return np.asarray(np.minimum(s, np.subtract(s, _P)))


def _rem(x):
    """x mod p for a fresh uint64 temporary x (reduced in place): numpy divides by a
    scalar with libdivide (a multiply and a shift) but computes ``%`` with a hardware
    division, 2-3x slower; in place, no further large temporaries are allocated."""
    q = np.floor_divide(x, _P)
    if isinstance(x, np.ndarray) and x.ndim:
        q *= _P
        x -= q
        return x
    return np.subtract(x, np.multiply(q, _P))


def mul(a, b):
    return _rem(u64(a) * u64(b))


def pow_(a, e: int):
    """a^e elementwise by square-and-multiply (e a Python int >= 0)."""
    a = u64(a)
    if a.size == 1:
        return np.full(a.shape, pow(int(a.reshape(-1)[0]), int(e), P), dtype=np.uint64)
    result = np.ones_like(a)
    base = a.copy()
    e = int(e)
    while e:
        if e & 1:
            result = mul(result, base)
        e >>= 1
        if e:
            base = mul(base, base)
    return result


def inv(a):
    """a^{-1} elementwise (Fermat); 0 maps to 0 -- callers check for zero."""
    return pow_(a, P - 2)


def root_of_unity(log_n: int) -> int:
    if not 0 <= log_n <= TWO_ADICITY:
        raise ValueError(f"no 2^{log_n}-th root of unity in BabyBear")
    return pow(GENERATOR, (P - 1) >> log_n, P)


def powers(x: int, n: int) -> np.ndarray:
    """[1, x, x^2, ..., x^(n-1)] (base field), vectorised by doubling."""
    out = np.ones(max(n, 1), dtype=np.uint64)
    if n == 0:
        return out[:0]
    filled = 1
    step = int(x) % P
    while filled < n:
        take = min(filled, n - filled)
        out[filled:filled + take] = mul(out[:take], step)
        filled += take
        step = step * step % P
    return out


# ---------------------------------------------------------------- extension field

def ef(c0, c1=0, c2=0, c3=0) -> np.ndarray:
    """An EF scalar of shape (4, 1) from four canonical coefficients."""
    return np.array([[c0], [c1], [c2], [c3]], dtype=np.uint64)


def ef_from_base(a) -> np.ndarray:
    """Embed base values (shape S) as EF values of shape (4, *S)."""
    a = u64(a)
    out = np.zeros((4,) + a.shape, dtype=np.uint64)
    out[0] = a
    return out


def ef_add(a, b):
    return add(a, b)


def ef_sub(a, b):
    return sub(a, b)


def ef_neg(a):
    return neg(a)


def ef_add_base(a, b):
    """EF a (4, ...) plus base b (...)."""
    b = u64(b)
    shape = np.broadcast_shapes(a.shape, (1,) + b.shape)
    out = np.empty(shape, dtype=np.uint64)
    out[...] = a
    out[0] = add(out[0], b)
    return out


def ef_mul_base(a, b):
    """EF a (4, ...) times base b (...): coefficientwise."""
    return _rem(u64(a) * u64(b)[None])


def _ef_mul_scalar(a, b) -> list:
    """One EF product on Python ints (the out-of-domain evaluation multiplies single
    EF scalars thousands of times; numpy's per-call overhead dominated it)."""
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    return [(a0 * b0 + W * (a1 * b3 + a2 * b2 + a3 * b1)) % P,
            (a0 * b1 + a1 * b0 + W * (a2 * b3 + a3 * b2)) % P,
            (a0 * b2 + a1 * b1 + a2 * b0 + W * a3 * b3) % P,
            (a0 * b3 + a1 * b2 + a2 * b1 + a3 * b0) % P]


def ef_mul(a, b):
    """Schoolbook product with X^4 = 11, lazily reduced (see below)."""
    a = u64(a)
    b = u64(b)
    if a.size == 4 and b.size == 4 and a.shape == b.shape:          # one EF scalar each
        return np.array(_ef_mul_scalar(a.ravel().tolist(), b.ravel().tolist()),
                        dtype=np.uint64).reshape(a.shape)
    # lazy reduction: a product of residues is < p^2 < 2^61.82, so up to 4 of them sum
    # below 2^63.82 without wrapping; W * residue + product < 2^62.  9 remainders, not 23.
    a0, a1, a2, a3 = a[0], a[1], a[2], a[3]
    b0, b1, b2, b3 = b[0], b[1], b[2], b[3]
    hi4 = _rem(a1 * b3 + a2 * b2 + a3 * b1)
    hi5 = _rem(a2 * b3 + a3 * b2)
    hi6 = _rem(a3 * b3)
    c0 = _rem(a0 * b0 + hi4 * _W)
    c1 = _rem(_rem(a0 * b1 + a1 * b0) + hi5 * _W)
    c2 = _rem(_rem(a0 * b2 + a1 * b1 + a2 * b0) + hi6 * _W)
    c3 = _rem(a0 * b3 + a1 * b2 + a2 * b1 + a3 * b0)
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3))


def ef_square(a):
    return ef_mul(a, a)


def ef_inv(a):
    """Inverse via the norm: a(X)·a(-X) = e0 + e2 X^2 (odd terms vanish); that times
    (e0 - e2 X^2) is N = e0^2 - W e2^2 in the base field.  Zero maps to zero."""
    a = u64(a)
    conj = np.stack([a[0], neg(a[1]), a[2], neg(a[3])])
    e = ef_mul(a, conj)                       # e[1] = e[3] = 0
    e0, e2 = e[0], e[2]
    nrm = sub(mul(e0, e0), mul(_W, mul(e2, e2)))
    ni = inv(nrm)
    f = np.stack([e0, np.zeros_like(e0), neg(e2), np.zeros_like(e0)])
    return ef_mul_base(ef_mul(conj, f), ni)


def ef_pow(a, e: int):
    a = u64(a)
    result = ef_from_base(np.ones(a.shape[1:], dtype=np.uint64))
    base = a
    e = int(e)
    while e:
        if e & 1:
            result = ef_mul(result, base)
        e >>= 1
        if e:
            base = ef_mul(base, base)
    return result


def ef_powers(x, n: int) -> np.ndarray:
    """[1, x, ..., x^(n-1)] for an EF scalar x (shape (4, 1)); returns shape (4, n)."""
    x = u64(x).reshape(4, 1)
    out = np.zeros((4, max(n, 1)), dtype=np.uint64)
    out[0, 0] = 1
    filled = 1
    step = x
    while filled < n:
        take = min(filled, n - filled)
        out[:, filled:filled + take] = ef_mul(out[:, :take], step)
        filled += take
        step = ef_mul(step, step)
    return out[:, :n]


def is_zero_ef(a) -> np.ndarray:
    return np.all(u64(a) == 0, axis=0)
