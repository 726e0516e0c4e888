"""Committed LDE rows at a few tree positions, straight from the coefficients (issue #12).

An opening needs the rows of a committed matrix at the queried tree positions and, because
the host trees drop their lowest levels (prover/core/ldetree.py), every row of each queried
2^b-row group, to rehash the nodes below the kept levels.  Recomputing the whole LDE
(N = n 2^k points per column) for ~50 groups of 64 rows wastes most of the work.  Instead:

Tree position s holds the natural LDE point x = g w_N^bitrev_L(s) (L = log N).  The group
of positions G j .. G j + G - 1 (G = 2^b) is the coset x_j <w_G>, x_j = g w_N^bitrev_(L-b)(j),
and position G j + t holds the point x_j w_G^bitrev_b(t).  On that coset a polynomial f
agrees with f mod (X^G - x_j^G), which is reached by halving the modulus: with
c = x_j^m,  f mod (X^m - c) = r_lo + c r_hi  where r = f mod (X^(2m) - c^2) (r_lo, r_hi its
low and high m coefficients), starting from r = f itself once 2m >= n.  Groups whose
points share x^m share that remainder, so level m holds min(N/m, groups) remainders of m
coefficients: about (log2(groups) + 2) N products per column in all instead of the
N log N of an LDE.  The last step scales the G coefficients by x_j^i and runs a G-point
decimation-in-frequency transform, whose bit-reversed output order is the tree order.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from steadfast._jit_cache import adopt

from .field import P, root_of_unity
from .ntt_host import bit_reverse_indices

_P = np.uint64(P)


_M32 = np.uint64(0xFFFFFFFF)
_NINV = np.uint64((-pow(P, -1, 1 << 32)) % (1 << 32))      # -p^-1 mod 2^32


@njit(cache=True, parallel=True)
def _open_groups(coeffs, sizes, nkeys, key_off, parent, cvals, final_idx, xpow, tw, out):
    # Folds in Montgomery form with lazy bounds: a remainder's coefficients are kept in
    # [0, 2p) (< 2^32: uint32), the constants c as c 2^32 mod p; mont(a, c) = a c 2^-32
    # mod p lies in [0, 2p) for a < 2^32, c < p (t + q p < 2^33 p < 2^64), so
    # lo + mont(hi, c) < 4p and one conditional subtraction of 2p keeps the bound.
    c, n = coeffs.shape
    L = sizes.shape[0]
    Q, G = xpow.shape
    for col in prange(c):
        cur = coeffs[col].copy()
        span = n                                   # coefficients per remainder at this level
        for lv in range(L):
            m = sizes[lv]
            k0 = key_off[lv]
            nk = nkeys[lv]
            nxt = np.empty(nk * m, np.uint32)
            for i in range(nk):
                src = parent[k0 + i] * span
                cv = cvals[k0 + i]
                dst = i * m
                for j in range(m):
                    t = np.uint64(cur[src + m + j]) * cv
                    q = ((t & _M32) * _NINV) & _M32
                    r = ((t + q * _P) >> np.uint64(32)) + np.uint64(cur[src + j])
                    if r >= np.uint64(2 * P):
                        r -= np.uint64(2 * P)
                    nxt[dst + j] = np.uint32(r)
            cur = nxt
            span = m
        a = np.empty(G, np.uint64)
        for q in range(Q):
            base = final_idx[q] * span
            for j in range(G):
                a[j] = (np.uint64(cur[base + j]) * xpow[q, j]) % _P if j < span else np.uint64(0)
            # decimation in frequency: natural-order input, bit-reversed output
            half = G >> 1
            toff = 0
            while half >= 1:
                for s in range(0, G, 2 * half):
                    for j in range(half):
                        u = a[s + j]
                        v = a[s + j + half]
                        a[s + j] = (u + v) % _P
                        a[s + j + half] = ((u + _P - v) * tw[toff + j]) % _P
                toff += half
                half >>= 1
            for t in range(G):
                out[q, t, col] = np.uint32(a[t])


def group_rows(coeffs: np.ndarray, log_blowup: int, shift: int, groups, log_group: int) -> np.ndarray:
    """The committed rows of tree groups ``groups`` (distinct group indices j: tree
    positions 2^log_group j .. 2^log_group (j + 1) - 1) of the coset LDE of ``coeffs``
    (uint32[c, n], degree < n, natural order) on shift<w_N>, N = n 2^log_blowup, tree
    position s = natural point bitrev_(log N)(s): uint32[len(groups), 2^log_group, c],
    equal to those rows of ``lde_columns(ntt(coeffs), log_blowup, shift)``."""
    coeffs = np.ascontiguousarray(coeffs, dtype=np.uint32)
    if coeffs.ndim != 2:
        raise ValueError(f"group_rows: coefficients must be uint32[c, n], got shape {coeffs.shape}")
    c, n = coeffs.shape
    if n < 1 or n & (n - 1):
        raise ValueError(f"group_rows: {n} coefficients per column is not a power of two")
    log_n = n.bit_length() - 1
    k, b = int(log_blowup), int(log_group)
    L = log_n + k
    if k < 0 or not 0 <= b <= L:
        raise ValueError(f"group_rows: log_blowup {k}, log_group {b} for 2^{log_n} rows")
    g = np.asarray(groups, dtype=np.int64).reshape(-1)
    if g.size and (g.min() < 0 or g.max() >= 1 << (L - b)):
        raise ValueError(f"group_rows: a group index is outside [0, 2^{L - b})")
    G, N = 1 << b, 1 << L
    out = np.empty((g.size, G, c), np.uint32)
    if g.size == 0 or c == 0:
        return out
    w_n = root_of_unity(L)
    bj = bit_reverse_indices(g, L - b)                          # x_j = shift w_N^bj
    # levels m = n/2, n/4, ..., G (none when G >= n: the remainder is f itself)
    sizes, nkeys, key_off, parent, cvals = [], [], [], [], []
    prev_keys = np.zeros(1, np.int64)               # the root: f, one "key"
    prev_mod = 1
    m = n >> 1
    while m >= G and m >= 1:
        mod = N // m                                # x^m depends on bj mod (N/m)
        keys = np.unique(bj % mod)
        sizes.append(m)
        nkeys.append(keys.size)
        key_off.append(sum(nkeys[:-1]))
        parent.append(np.searchsorted(prev_keys, keys % prev_mod) if prev_mod > 1
                      else np.zeros(keys.size, np.int64))
        # c = x^m = shift^m w_N^(key m)
        sm = pow(int(shift), m, P)
        cvals.append(np.array([(sm * pow(w_n, int(kk) * m, P) % P << 32) % P for kk in keys],
                              np.uint64))                 # Montgomery form c 2^32 mod p
        prev_keys, prev_mod = keys, mod
        m >>= 1
    final_idx = (np.searchsorted(prev_keys, bj % prev_mod) if prev_mod > 1
                 else np.zeros(g.size, np.int64))
    xpow = np.empty((g.size, G), np.uint64)
    for q, e in enumerate(bj):
        x = int(shift) * pow(w_n, int(e), P) % P
        v = 1
        for j in range(G):
            xpow[q, j] = v
            v = v * x % P
    tw = []                                          # DIF stages: half = G/2, G/4, ..., 1
    half = G >> 1
    while half >= 1:
        w = root_of_unity((2 * half).bit_length() - 1)
        tw.extend(pow(w, j, P) for j in range(half))
        half >>= 1
    _open_groups(coeffs, np.array(sizes, np.int64), np.array(nkeys, np.int64),
                 np.array(key_off, np.int64),
                 np.concatenate(parent).astype(np.int64) if parent else np.zeros(0, np.int64),
                 np.concatenate(cvals) if cvals else np.zeros(0, np.uint64),
                 np.asarray(final_idx, np.int64), xpow, np.array(tw or [1], np.uint64), out)
    return out


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals())
