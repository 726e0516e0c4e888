"""The host FRI's pointwise work, compiled: the combined input of one height and the fold
of a layer (``prover.core.stages.HostStages.fri_input`` / ``fri_fold``).

Both were numpy on the calling thread (uint64 temporaries of a chunk, a dozen passes each)
while the other core waited: on the 2^18 block 0.06 s, utilisation 1.0.  Here each is one
pass over ranges of rows on the host pool (kernels/host_pool.py), with kernels.field's
extension arithmetic -- exact field operations, so the same values as the numpy path
(tests/test_fri_join.py: the folded polynomial, the formula level by level over several
ranges at 1 and 2 threads, the mu combination).

Fold of a layer of height h by a = 2^k (docs/protocol.md §5): output row v reads input
rows v a .. v a + a - 1 and folds them k times; at level j (height h - j) the pair
(2u, 2u + 1), u = v 2^(k-j-1) + t, becomes
    f'(u) = (f(2u) + f(2u+1)) / 2 + b_j (f(2u) - f(2u+1)) / (2 x_{2u})
with b_j = beta^(2^j) and 1 / (2 x_{2u}) from the caller's table of that height; then
f' += beta^a rollin[v] where a roll-in is given.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ..air import field as AF
from . import field
from .field import P
from .host_pool import run_ranges

_F = field.build(njit(inline="always"))
_ef_add, _ef_sub, _ef_mul, _ef_mul_base = _F.ef_add, _F.ef_sub, _F.ef_mul, _F.ef_mul_base
_INV2 = np.uint32((P + 1) // 2)

#: rows per host-pool range, at least (a range's call costs a few microseconds)
_MIN_ROWS = 2048


#: rows of one block of ``combine`` (64 KiB of ``out``: it stays in L2 across the DQs)
_BLOCK = 4096


@njit(cache=True, nogil=True)
def _copy_kernel(out, src, r0, r1):
    for i in range(r0, r1):
        for c in range(4):
            out[i, c] = src[i, c]


@njit(cache=True, nogil=True)
def _axpy_kernel(out, dq, m0, m1, m2, m3, r0, r1):
    """out[i] += m dq[i] (EF, rows r0 .. r1 - 1)."""
    for i in range(r0, r1):
        x0, x1, x2, x3 = _ef_mul(m0, m1, m2, m3, dq[i, 0], dq[i, 1], dq[i, 2], dq[i, 3])
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = _ef_add(out[i, 0], out[i, 1],
                                                             out[i, 2], out[i, 3],
                                                             x0, x1, x2, x3)


@njit(cache=True, nogil=True)
def _fold_kernel(vals, out, k, inv, inv_off, betas, roll, broll, v0, v1):
    a = 1 << k
    loc = np.empty((a, 4), np.uint32)
    for v in range(v0, v1):
        for j in range(a):
            for c in range(4):
                loc[j, c] = vals[v * a + j, c]
        for lev in range(k):
            half = a >> (lev + 1)
            b0, b1, b2, b3 = betas[lev, 0], betas[lev, 1], betas[lev, 2], betas[lev, 3]
            base = inv_off[lev] + v * half
            for t in range(half):
                e0, e1, e2, e3 = loc[2 * t, 0], loc[2 * t, 1], loc[2 * t, 2], loc[2 * t, 3]
                o0, o1, o2, o3 = (loc[2 * t + 1, 0], loc[2 * t + 1, 1], loc[2 * t + 1, 2],
                                  loc[2 * t + 1, 3])
                s0, s1, s2, s3 = _ef_add(e0, e1, e2, e3, o0, o1, o2, o3)
                s0, s1, s2, s3 = _ef_mul_base(s0, s1, s2, s3, _INV2)
                d0, d1, d2, d3 = _ef_sub(e0, e1, e2, e3, o0, o1, o2, o3)
                d0, d1, d2, d3 = _ef_mul_base(d0, d1, d2, d3, inv[base + t])
                d0, d1, d2, d3 = _ef_mul(b0, b1, b2, b3, d0, d1, d2, d3)
                loc[t, 0], loc[t, 1], loc[t, 2], loc[t, 3] = _ef_add(s0, s1, s2, s3,
                                                                     d0, d1, d2, d3)
        if roll.shape[0]:
            x0, x1, x2, x3 = _ef_mul(broll[0], broll[1], broll[2], broll[3],
                                     roll[v, 0], roll[v, 1], roll[v, 2], roll[v, 3])
            loc[0, 0], loc[0, 1], loc[0, 2], loc[0, 3] = _ef_add(loc[0, 0], loc[0, 1],
                                                                 loc[0, 2], loc[0, 3],
                                                                 x0, x1, x2, x3)
        for c in range(4):
            out[v, c] = loc[0, c]


def _ef4(x) -> np.ndarray:
    """One EF element as a uint64 (4, 1) column, the shape air.field's products take."""
    return np.asarray(x, np.uint64).reshape(4, 1)


def combine(dqs: list, mu) -> np.ndarray:
    """sum_j mu^j dqs[j] (uint32[N, 4] each, canonical): a new uint32[N, 4].  One pass over
    ranges of rows: each range walks blocks of :data:`_BLOCK` rows and adds every DQ into
    that block while it is in cache (one pass per DQ over the whole of ``out`` had read and
    written it once per table of the height)."""
    ds = [np.ascontiguousarray(dq, np.uint32) for dq in dqs]
    out = np.empty(ds[0].shape, np.uint32)
    coefs, m, mu = [], _ef4((1, 0, 0, 0)), _ef4(mu)
    for _ in ds[1:]:
        m = AF.ef_mul(m, mu)
        coefs.append(tuple(np.uint32(x) for x in m.reshape(4)))

    def rows(r0, r1):
        for b0 in range(r0, r1, _BLOCK):
            b1 = min(r1, b0 + _BLOCK)
            _copy_kernel(out, ds[0], b0, b1)
            for d, c in zip(ds[1:], coefs):
                _axpy_kernel(out, d, *c, b0, b1)

    run_ranges(rows, out.shape[0], _MIN_ROWS)
    return out


def fold(values: np.ndarray, beta, k: int, inv_tables: list, rollin=None) -> np.ndarray:
    """Fold uint32[2^h, 4] (bit-reversed) by 2^k: ``inv_tables[j]`` = 1 / (2 x_{2u}) for
    u < 2^(h-j-1) at height h - j (uint32 or uint64, canonical), ``rollin``
    uint32[2^(h-k), 4] or None.  Returns a new uint32[2^(h-k), 4]; see the module
    docstring."""
    vals = np.ascontiguousarray(values, np.uint32)
    m = vals.shape[0] >> k
    out = np.empty((m, 4), np.uint32)
    inv = (np.asarray(inv_tables[0], np.uint32) if k == 1
           else np.concatenate([np.asarray(t, np.uint32) for t in inv_tables[:k]]))
    inv_off = np.zeros(k, np.int64)
    for j in range(1, k):
        inv_off[j] = inv_off[j - 1] + len(inv_tables[j - 1])
    betas = np.empty((k, 4), np.uint32)
    b = _ef4(beta)
    for j in range(k):
        betas[j] = b.reshape(4)
        b = AF.ef_mul(b, b)
    roll = (np.zeros((0, 4), np.uint32) if rollin is None
            else np.ascontiguousarray(rollin, np.uint32))
    broll = b.reshape(4).astype(np.uint32)                 # beta^(2^k)
    run_ranges(lambda v0, v1: _fold_kernel(vals, out, k, inv, inv_off, betas, roll, broll,
                                           v0, v1), m, max(1, _MIN_ROWS >> k))
    return out


__all__ = ["combine", "fold"]

# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("field.py",))
