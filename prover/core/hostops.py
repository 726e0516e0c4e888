"""Small host kernels the protocol rounds need beyond kernels/ (numba, compiled once).

All inputs and outputs are canonical uint32; EF values are uint32[..., 4] (last axis)."""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ...air import field as AF
from ...kernels.hostlib import HF
from ...kernels.host_pool import run_ranges

_P64 = np.uint64(2013265921)
_mul = HF.mul
_add, _sub, _neg = HF.add, HF.sub, HF.neg
_ef_mul, _mont_ef_mul = HF.ef_mul, HF.mont_ef_mul


_M32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_NINV = np.uint64((-pow(2013265921, -1, 1 << 32)) % (1 << 32))     # -p^-1 mod 2^32
_P, _W = AF.P, AF.W
#: X^p = _FROB * X in EF = F_p[X]/(X^4 - 11) (p = 1 mod 4): the Frobenius is
#: sum a_i X^i -> sum a_i _FROB^i X^i
_FROB = pow(_W, (_P - 1) // 4, _P)
_LOG_LO = 8                     # eval_columns: x^k = x^(k mod 2^8) * (x^(2^8))^(k >> 8)
_LO_SIZE = 1 << _LOG_LO
_EVAL_CHUNK = 1 << 12


@njit(cache=True)
def _ef_chain(x0, x1, x2, x3, out):
    # out[k] = x^k (canonical EF), k < len(out)
    p0, p1, p2, p3 = np.uint32(1), np.uint32(0), np.uint32(0), np.uint32(0)
    for k in range(out.shape[0]):
        out[k, 0] = p0
        out[k, 1] = p1
        out[k, 2] = p2
        out[k, 3] = p3
        p0, p1, p2, p3 = _ef_mul(p0, p1, p2, p3, x0, x1, x2, x3)


@njit(inline="always")
def _pw_block(l0, l1, l2, l3, h0, h1, h2, h3, p0, p1, p2, p3, cnt):
    # p[a] = l[a] h (Montgomery EF products), a < cnt: 1-d operands, so LLVM vectorises
    for a in range(cnt):
        p0[a], p1[a], p2[a], p3[a] = _mont_ef_mul(l0[a], l1[a], l2[a], l3[a], h0, h1, h2, h3)


@njit(cache=True, nogil=True)
def _eval_chunks(coeffs, lo_m, hi, part, chunk, t0, t1):
    # part[t, j] = sum over the points k of chunk t of coeffs[j, k] * x^k, unreduced
    # (uint64, each term < 2p).  x^k = lo[k mod 2^8] * hi[k >> 8], both in Montgomery
    # form (lo_m uint32[4, 2^8], one row a coefficient, hi uint32[., 4]): their Montgomery
    # product is x^k in Montgomery form (x^k * 2^32 mod p), a loop over the 2^8 lo values
    # that LLVM vectorises (it was one scalar EF product with remainders a power); a canonical
    # coefficient a times it, Montgomery-reduced, is a * x^k (mod p) below 2p -- three
    # 32 x 32 multiplies a term, no remainder, vectorised over the chunk.
    c, n = coeffs.shape
    for t in range(t0, t1):
        lo = t * chunk
        m = min(n, lo + chunk) - lo
        pw = np.empty((4, chunk), dtype=np.uint32)
        for base in range(0, m, _LO_SIZE):      # x^k, k = lo + base + a: lo_m[a] hi[b]
            b = (lo + base) >> _LOG_LO
            _pw_block(lo_m[0], lo_m[1], lo_m[2], lo_m[3], hi[b, 0], hi[b, 1], hi[b, 2],
                      hi[b, 3], pw[0, base:], pw[1, base:], pw[2, base:], pw[3, base:],
                      min(_LO_SIZE, m - base))
        for j in range(c):
            part[t, j, 0], part[t, j, 1], part[t, j, 2], part[t, j, 3] = _dot4(
                coeffs[j, lo:lo + m], pw[0], pw[1], pw[2], pw[3], m)


@njit(inline="always")
def _dot4(cj, p0, p1, p2, p3, m):
    # sum_i cj[i] * p_c[i] 2^-32, each term Montgomery-reduced below 2p (1-d operands)
    s0 = np.uint64(0)
    s1 = np.uint64(0)
    s2 = np.uint64(0)
    s3 = np.uint64(0)
    for i in range(m):
        a = np.uint64(cj[i])
        u0 = a * np.uint64(p0[i])
        u1 = a * np.uint64(p1[i])
        u2 = a * np.uint64(p2[i])
        u3 = a * np.uint64(p3[i])
        s0 += (u0 + (((u0 & _M32) * _NINV) & _M32) * _P64) >> _U32
        s1 += (u1 + (((u1 & _M32) * _NINV) & _M32) * _P64) >> _U32
        s2 += (u2 + (((u2 & _M32) * _NINV) & _M32) * _P64) >> _U32
        s3 += (u3 + (((u3 & _M32) * _NINV) & _M32) * _P64) >> _U32
    return s0, s1, s2, s3


def ef_power_table(x, k: int) -> np.ndarray:
    """[x^0, ..., x^(k-1)] for an EF scalar x: uint32[k, 4]."""
    x = np.asarray(x, np.uint32).reshape(4)
    out = np.empty((int(k), 4), dtype=np.uint32)
    _ef_chain(x[0], x[1], x[2], x[3], out)
    return out


def eval_columns(coeffs: np.ndarray, point) -> np.ndarray:
    """Every column's polynomial at an EF point: base coefficients (c, n) (column j is
    sum_k coeffs[j, k] X^k) -> EF (c, 4), canonical."""
    coeffs = np.ascontiguousarray(coeffs, dtype=np.uint32)
    if coeffs.ndim != 2:
        raise ValueError(f"eval_columns: coefficients of shape {coeffs.shape}, not (c, n)")
    c, n = coeffs.shape
    x = np.asarray(point, np.uint32).reshape(4)
    if c == 0 or n == 0:
        return np.zeros((c, 4), dtype=np.uint32)
    lo = ef_power_table(x, (1 << _LOG_LO) + 1)                      # x^0 .. x^256
    hi = ef_power_table(lo[-1], ((n - 1) >> _LOG_LO) + 1)
    lo_m = np.ascontiguousarray(((lo[:-1].astype(np.uint64) << _U32) % _P64).astype(np.uint32).T)
    hi = ((hi.astype(np.uint64) << _U32) % _P64).astype(np.uint32)
    part = np.empty(((n + _EVAL_CHUNK - 1) // _EVAL_CHUNK, c, 4), dtype=np.uint64)
    run_ranges(lambda t0, t1: _eval_chunks(coeffs, lo_m, hi, part, _EVAL_CHUNK, t0, t1),
                part.shape[0], 1)
    # < 2^15 chunks of < 2^12 terms below 2p each: the sum stays below 2^59
    return (part.sum(axis=0) % _P64).astype(np.uint32)


_COMBINE_CHUNK = 1 << 10


@njit(inline="always")
def _mac4(row, k0, k1, k2, k3, a0, a1, a2, a3, m):
    # a_c[i] += row[i] k_c 2^-32 (each term Montgomery-reduced below 2p): 1-d operands,
    # whose unit strides LLVM sees (with 2-d indexing the loop stayed 2-3x slower)
    q0 = np.uint64(k0)
    q1 = np.uint64(k1)
    q2 = np.uint64(k2)
    q3 = np.uint64(k3)
    for i in range(m):
        a = np.uint64(row[i])
        t0 = a * q0
        t1 = a * q1
        t2 = a * q2
        t3 = a * q3
        a0[i] += (t0 + (((t0 & _M32) * _NINV) & _M32) * _P64) >> _U32
        a1[i] += (t1 + (((t1 & _M32) * _NINV) & _M32) * _P64) >> _U32
        a2[i] += (t2 + (((t2 & _M32) * _NINV) & _M32) * _P64) >> _U32
        a3[i] += (t3 + (((t3 & _M32) * _NINV) & _M32) * _P64) >> _U32


@njit(cache=True, nogil=True)
def _combine_rows(mat, coeffs_m, out, chunk, t0, t1):
    # Montgomery products with coefficients in Montgomery form (k * 2^32 mod p): for a < p,
    # t = a k_m < 2^62 and u = (t + ((t mod 2^32) (-p^-1) mod 2^32) p) / 2^32 = a k (mod p)
    # with u < 2p -- three 32x32 multiplies, no remainder, vectorised over a chunk of
    # contiguous points per column; the < 2p terms sum without wrapping for c < 2^32
    # columns and are reduced once at the end.
    # chunks t0 .. t1 - 1 (a range of the host pool's run_ranges: no numba parallel
    # region, whose spinning workers a busy machine's other processes stall)
    c, n = mat.shape
    for t in range(t0, t1):
        lo = t * chunk
        hi = min(n, lo + chunk)
        m = hi - lo
        acc = np.zeros((4, chunk), dtype=np.uint64)
        for j in range(c):
            _mac4(mat[j, lo:hi], coeffs_m[j, 0], coeffs_m[j, 1], coeffs_m[j, 2],
                  coeffs_m[j, 3], acc[0], acc[1], acc[2], acc[3], m)
        for i in range(m):                      # out's own values added (into=)
            out[lo + i, 0] = np.uint32((acc[0, i] + np.uint64(out[lo + i, 0])) % _P64)
            out[lo + i, 1] = np.uint32((acc[1, i] + np.uint64(out[lo + i, 1])) % _P64)
            out[lo + i, 2] = np.uint32((acc[2, i] + np.uint64(out[lo + i, 2])) % _P64)
            out[lo + i, 3] = np.uint32((acc[3, i] + np.uint64(out[lo + i, 3])) % _P64)


def combine_rows(mat: np.ndarray, coeffs: np.ndarray, into: np.ndarray | None = None) -> np.ndarray:
    """sum_j coeffs[j] * mat[j, x] for every x: base (c, N) column-major with EF
    coefficients (c, 4) -> EF (N, 4), canonical.  Montgomery products (< 2p each, see
    _combine_rows), so c < 2^32 columns keep the sums below 2^64.  ``into``: a canonical
    uint32[N, 4] C-contiguous array the sums are added to, in place (returned) -- DEEP's
    groups accumulate without a separate pass."""
    mat = np.ascontiguousarray(mat, dtype=np.uint32)
    coeffs = np.ascontiguousarray(coeffs, dtype=np.uint32)
    if mat.ndim != 2 or coeffs.shape != (mat.shape[0], 4):
        raise ValueError(f"combine_rows: shapes {mat.shape} and {coeffs.shape} do not match")
    if coeffs.size and int(coeffs.max()) >= 2013265921:
        raise ValueError("combine_rows: coefficients must be canonical field elements")
    if into is None:
        out = np.zeros((mat.shape[1], 4), dtype=np.uint32)
    else:
        out = into
        if (out.shape != (mat.shape[1], 4) or out.dtype != np.uint32
                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"combine_rows: into must be a writeable C-contiguous "
                             f"uint32[{mat.shape[1]}, 4]")
    if mat.size:
        coeffs_m = ((coeffs.astype(np.uint64) << np.uint64(32)) % _P64).astype(np.uint32)
        n = mat.shape[1]
        run_ranges(lambda t0, t1: _combine_rows(mat, coeffs_m, out, _COMBINE_CHUNK, t0, t1),
                   (n + _COMBINE_CHUNK - 1) // _COMBINE_CHUNK, 1)
    return out


_to_mont, _from_mont, _mont_mul = HF.to_mont, HF.from_mont, HF.mont_mul
_mont_ef_mul_base, _inv = HF.mont_ef_mul_base, HF.inv
_DEEP_CHUNK = 1 << 10


# ---- 1 / (x - zeta) for base x through the minimal polynomial of zeta ----------------
# With zeta_k = frob^k(zeta) (k = 0..3) the conjugates of zeta, m(X) = prod_k (X - zeta_k)
# has base-field coefficients and m(X) = (X - zeta) q(X), q = prod_(k>0) (X - zeta_k).  For
# x in F_p, 1/(x - zeta) = q(x) / m(x): a base inversion (batched) and EF-times-base
# Horner steps instead of an EF inversion (batched: three EF products a point).

def conjugate_polys(z) -> tuple[list, list]:
    """(m, q) for an EF point z: m(X) = X^4 + m[3] X^3 + ... + m[0] its minimal
    polynomial's coefficients (base field, ints), q(X) = X^3 + q[2] X^2 + q[1] X + q[0]
    with EF coefficients (tuples of ints) such that m(X) = (X - z) q(X)."""
    z = tuple(int(v) % _P for v in np.asarray(z).reshape(4))
    conj = [tuple(z[i] * pow(_FROB, i * k, _P) % _P for i in range(4)) for k in range(4)]
    zero, one = (0, 0, 0, 0), (1, 0, 0, 0)

    def times_linear(poly, root):           # poly(X) * (X - root), low to high
        out = [zero] * (len(poly) + 1)
        for i, cf in enumerate(poly):
            out[i + 1] = tuple((u + v) % _P for u, v in zip(out[i + 1], cf))
            pr = AF._ef_mul_scalar(cf, root)
            out[i] = tuple((u - v) % _P for u, v in zip(out[i], pr))
        return out

    q = [one]
    for k in (1, 2, 3):
        q = times_linear(q, conj[k])
    m = times_linear(q, conj[0])
    if any(any(cf[1:]) for cf in m) or m[4] != one:
        raise ArithmeticError("the conjugates' product is not a monic base-field polynomial")
    return [cf[0] for cf in m[:4]], q[:3]


@njit(cache=True, nogil=True)
def _deep_point(xm, row, s0, s1, s2, s3, c0, c1, c2, c3):
    # x in Montgomery form (xm), one opening point's row of mq (see _deep_chunks):
    # -> m(x) in Montgomery form and (s - c) q(x) canonical
    mv = _add(xm, row[3])
    mv = _add(_mont_mul(mv, xm), row[2])
    mv = _add(_mont_mul(mv, xm), row[1])
    mv = _add(_mont_mul(mv, xm), row[0])
    r0, r1, r2, r3 = _mont_ef_mul_base(_add(xm, row[12]), row[13], row[14], row[15], xm)
    r0, r1, r2, r3 = _mont_ef_mul_base(_add(r0, row[8]), _add(r1, row[9]), _add(r2, row[10]),
                                       _add(r3, row[11]), xm)
    e0, e1, e2, e3 = _mont_ef_mul(_sub(s0, c0), _sub(s1, c1), _sub(s2, c2), _sub(s3, c3),
                                  _add(r0, row[4]), _add(r1, row[5]), _add(r2, row[6]),
                                  _add(r3, row[7]))
    return mv, e0, e1, e2, e3


@njit(cache=True, nogil=True)
def _deep_pair(n0, n1, n2, n3, mv, e0, e1, e2, e3, mw):
    # n m1(x) + e m0(x): the two points' numerators over the denominator m0(x) m1(x)
    n0, n1, n2, n3 = _mont_ef_mul_base(n0, n1, n2, n3, mw)
    e0, e1, e2, e3 = _mont_ef_mul_base(e0, e1, e2, e3, mv)
    return _add(n0, e0), _add(n1, e1), _add(n2, e2), _add(n3, e3)


@njit(cache=True, nogil=True)
def _deep_chunks(out, comb0, comb1, two, cst, mq, xs, chunk, zero, t0, t1):
    # out[x] = (comb0[x] - cst[0]) / (x - z0) [+ (comb1[x] - cst[1]) / (x - z1) if two]
    # with 1/(x - z) = q(x) / m(x) (conjugate_polys): per point the numerator
    # a0 q0(x) m1(x) + a1 q1(x) m0(x) and the denominator m0(x) m1(x), whose inverses a
    # chunk takes with one base inversion (Montgomery's trick).  Everything multiplied
    # is in Montgomery form on one side (mq, the Horner values, the inverses), so each
    # product of a canonical value by it is canonical.  mq[p]: m0..m3, then q0, q1, q2
    # (4 coefficients each), all in Montgomery form.  zero[t] = 1: a denominator of
    # chunk t vanished (x a conjugate of z; out is then not written there).
    n = xs.shape[0]
    for t in range(t0, t1):
        lo = t * chunk
        hi = min(n, lo + chunk)
        num = np.empty((hi - lo, 4), dtype=np.uint32)
        den = np.empty(hi - lo, dtype=np.uint32)
        pref = np.empty(hi - lo, dtype=np.uint32)
        acc = _to_mont(np.uint32(1))
        for i in range(lo, hi):
            xm = _to_mont(xs[i])
            mv, n0, n1, n2, n3 = _deep_point(xm, mq[0], comb0[i, 0], comb0[i, 1], comb0[i, 2],
                                             comb0[i, 3], cst[0, 0], cst[0, 1], cst[0, 2],
                                             cst[0, 3])
            if two:
                mw, e0, e1, e2, e3 = _deep_point(xm, mq[1], comb1[i, 0], comb1[i, 1],
                                                 comb1[i, 2], comb1[i, 3], cst[1, 0],
                                                 cst[1, 1], cst[1, 2], cst[1, 3])
                n0, n1, n2, n3 = _deep_pair(n0, n1, n2, n3, mv, e0, e1, e2, e3, mw)
                mv = _mont_mul(mv, mw)
            j = i - lo
            num[j, 0] = n0
            num[j, 1] = n1
            num[j, 2] = n2
            num[j, 3] = n3
            den[j] = mv
            pref[j] = acc
            acc = _mont_mul(acc, mv)
        if acc == 0:
            zero[t] = 1
            continue
        inv = _to_mont(_inv(_from_mont(acc)))       # (product)^-1, Montgomery form
        for j in range(hi - lo - 1, -1, -1):
            d = _mont_mul(pref[j], inv)              # 1 / den[j], Montgomery form
            inv = _mont_mul(inv, den[j])
            out[lo + j, 0] = _mont_mul(num[j, 0], d)
            out[lo + j, 1] = _mont_mul(num[j, 1], d)
            out[lo + j, 2] = _mont_mul(num[j, 2], d)
            out[lo + j, 3] = _mont_mul(num[j, 3], d)


@njit(cache=True, nogil=True)
def _divide_linear(g, z0, z1, z2, z3, q):
    # (G(X) - G(z)) / (X - z) by Horner from the top: q[k-1] = g[k] + z q[k] (q[n-1] = 0),
    # z in Montgomery form (a product of a canonical value by it is canonical); -> G(z)
    n = g.shape[0]
    r0, r1, r2, r3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
    q[n - 1, 0] = 0
    q[n - 1, 1] = 0
    q[n - 1, 2] = 0
    q[n - 1, 3] = 0
    for k in range(n - 1, -1, -1):
        r0, r1, r2, r3 = _mont_ef_mul(r0, r1, r2, r3, z0, z1, z2, z3)
        r0 = _add(r0, g[k, 0])
        r1 = _add(r1, g[k, 1])
        r2 = _add(r2, g[k, 2])
        r3 = _add(r3, g[k, 3])
        if k:
            q[k - 1, 0] = r0
            q[k - 1, 1] = r1
            q[k - 1, 2] = r2
            q[k - 1, 3] = r3
    return r0, r1, r2, r3


def divide_linear(g: np.ndarray, z) -> tuple[np.ndarray, np.ndarray]:
    """EF coefficients g (n, 4) of G (degree < n, low first) and an EF point z ->
    (the coefficients (n, 4) of (G(X) - G(z)) / (X - z), top one 0; G(z) (4,))."""
    g = np.ascontiguousarray(g, dtype=np.uint32)
    if g.ndim != 2 or g.shape[1] != 4 or g.shape[0] == 0:
        raise ValueError(f"divide_linear: coefficients of shape {g.shape}, not (n, 4)")
    zm = ((np.asarray(z, np.uint64).reshape(4) << _U32) % _P64).astype(np.uint32)
    q = np.empty_like(g)
    v = _divide_linear(g, zm[0], zm[1], zm[2], zm[3], q)
    return q, np.array(v, dtype=np.uint32)


def deep_sum(terms: list, xs: np.ndarray) -> np.ndarray:
    """sum over terms (comb, cst, z) of (comb[x] - cst) / (xs[x] - z): one or two terms,
    comb EF (N, 4), cst and z EF (4,), xs base (N,) -> EF (N, 4), canonical.  Raises
    ZeroDivisionError if some xs[x] is a conjugate of a z (z in the base field)."""
    if not 1 <= len(terms) <= 2:
        raise ValueError(f"deep_sum takes one or two opening points, got {len(terms)}")
    xs = np.ascontiguousarray(xs, dtype=np.uint32)
    n = xs.shape[0]
    mq = np.zeros((2, 16), dtype=np.uint32)
    cst = np.zeros((2, 4), dtype=np.uint32)
    combs = []
    for pt, (comb, c, z) in enumerate(terms):
        comb = np.ascontiguousarray(comb, dtype=np.uint32)
        if comb.shape != (n, 4):
            raise ValueError(f"deep_sum: combination of shape {comb.shape}, not ({n}, 4)")
        combs.append(comb)
        m, q = conjugate_polys(z)
        mq[pt, :4] = m
        mq[pt, 4:] = [v for cf in q for v in cf]
        cst[pt] = np.asarray(c, np.uint32).reshape(4)
    mq = ((mq.astype(np.uint64) << _U32) % _P64).astype(np.uint32)   # Montgomery form
    out = np.empty((n, 4), dtype=np.uint32)
    if n == 0:
        return out
    zero = np.zeros((n + _DEEP_CHUNK - 1) // _DEEP_CHUNK, dtype=np.uint8)
    run_ranges(lambda t0, t1: _deep_chunks(out, combs[0], combs[-1], len(terms) == 2, cst,
                                            mq, xs, _DEEP_CHUNK, zero, t0, t1),
                zero.shape[0], 1)
    if zero.any():
        raise ZeroDivisionError("deep_sum: an opening point is one of the domain's points")
    return out


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("../../kernels/hostlib.py", "../../kernels/field.py"))
