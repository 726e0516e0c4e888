"""The quotient's row selectors on the coset shift<w_M>, compiled (kernels/constraint_host.py
``host_selectors``): first, last, transition and 1/Z_H, in Montgomery form, uint32[4, M].

The same values as ``constraint_host._selectors`` (air.eval.selectors_on_coset's
definition; a field element is unique, tests/test_selectors_host.py compares them), with
x_j = shift w_M^j, Z_H(x_j) = x_j^n - 1 = d_(j mod M/n):

    first_j = Z_H(x_j) / (x_j - 1),   last_j = Z_H(x_j) / (x_j - w_n^-1),
    transition_j = x_j - w_n^-1,       1/Z_H(x_j) = 1 / d_(j mod M/n)

computed a chunk of 2^12 points at a time on the host pool's threads (the points by
successive products from the chunk's first, the two divisions by one Montgomery's trick
each), instead of a dozen numpy passes over 2^21-point uint64 arrays on the main thread
(0.18 s for a 2^19-row table's quotient domain, once per shape and process).  A coset
that meets H or its shift (some x_j - 1 or x_j - w_n^-1 zero, or some d_r zero) is
refused with ``None``: the caller takes the reference path, which raises as before.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import field
from .field import P, root_of_unity
from .host_pool import run_ranges

_F = field.build(njit(inline="always"))
_sub, _mul, _inv, _to_mont = _F.sub, _F.mul, _F.inv, _F.to_mont
_LOG_CHUNK = 12


@njit(cache=True, nogil=True)
def _selectors_kernel(starts, w, winv, zh, invzh_m, out, flag, c0, c1):
    C = 1 << _LOG_CHUNK
    M = out.shape[1]
    R = zh.shape[0]                        # M / n: a power of two
    pa = np.empty(C, np.uint32)
    pb = np.empty(C, np.uint32)
    xs = np.empty(C, np.uint32)
    one = np.uint32(1)
    for c in range(c0, c1):
        j0 = c * C
        m = min(C, M - j0)
        x = starts[c]
        acc_a = one
        acc_b = one
        for i in range(m):
            a = _sub(x, one)
            b = _sub(x, winv)
            if a == 0 or b == 0:
                flag[0] = 1
                return
            xs[i] = x
            pa[i] = acc_a
            pb[i] = acc_b
            acc_a = _mul(acc_a, a)
            acc_b = _mul(acc_b, b)
            x = _mul(x, w)
        ia = _inv(acc_a)
        ib = _inv(acc_b)
        for i in range(m - 1, -1, -1):
            j = j0 + i
            a = _sub(xs[i], one)
            b = _sub(xs[i], winv)
            z = zh[j & (R - 1)]
            out[0, j] = _to_mont(_mul(z, _mul(pa[i], ia)))
            out[1, j] = _to_mont(_mul(z, _mul(pb[i], ib)))
            out[2, j] = _to_mont(b)
            out[3, j] = invzh_m[j & (R - 1)]
            ia = _mul(ia, a)
            ib = _mul(ib, b)


def selectors_mont(log_n: int, log_m: int, shift: int):
    """uint32[4, M] (Montgomery form): first, last, transition, 1/Z_H on shift<w_M>
    (natural order), or None when the coset meets H or w_n^-1 H (see the module)."""
    n, M = 1 << log_n, 1 << log_m
    R = M // n
    s = shift % P
    w = root_of_unity(log_m)
    winv = pow(root_of_unity(log_n), P - 2, P)
    sn, wr = pow(s, n, P), root_of_unity(log_m - log_n)
    d = [(pow(wr, r, P) * sn - 1) % P for r in range(R)]
    if not all(d):
        return None
    zh = np.asarray(d, np.uint32)
    invzh_m = field.to_mont_host(np.asarray([pow(v, P - 2, P) for v in d], np.uint64))
    C = 1 << _LOG_CHUNK
    nchunks = -(-M // C)
    step = pow(w, C, P)
    starts = np.empty(nchunks, np.uint32)
    x = s
    for c in range(nchunks):
        starts[c] = x
        x = x * step % P
    out = np.empty((4, M), np.uint32)
    flag = np.zeros(1, np.uint32)
    run_ranges(lambda c0, c1: _selectors_kernel(starts, np.uint32(w), np.uint32(winv), zh,
                                                invzh_m, out, flag, c0, c1), nchunks, 4)
    return None if flag[0] else out


__all__ = ["selectors_mont"]

# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("field.py",))
