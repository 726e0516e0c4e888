"""The LogUp aux trace from its h columns, compiled (``HostStages.aux_build``'s last step).

From the batches' h columns H (uint32[B, 4, n], canonical EF values, one column per lookup
batch, kernels/constraint_host.py ``logup_h_host(..., stacked=True)``): the row sums
r_i = sum_b H[b, :, i], the terminal U = (sum_i r_i) / n, the accumulator
acc[i] = sum_(j<i) r_j - i U (acc[0] = 0, acc[i+1] - acc[i] = r_i - U cyclically), and the
aux rows (h_0 .. h_(B-2), acc: 4 coefficient columns each) -- what
``prover.core.stages.logup_accumulator`` and the numpy assembly compute
(tests/test_logup_acc.py), in two passes over H instead of a dozen numpy passes on the
main thread, with kernels.field's add, sub and mul, each pass over blocks of rows on the
host pool.  EF addition and a base-field scalar
product are coefficient-wise, so each of the 4 coefficients runs on its own: i U is
accumulated (U added once a row), every value kept canonical.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import field
from .field import P
from .host_pool import run_ranges

_F = field.build(njit(inline="always"))
_add, _sub, _mul = _F.add, _F.sub, _F.mul


#: rows per block of the two passes (the blocks' sums, then their rows on the host pool)
BLOCK = 4096


@njit(cache=True, nogil=True)
def _block_sums(H, sums, k0, k1):
    """sums[k, c] = sum over block k's rows i and every batch b of H[b, c, i]."""
    B, _, n = H.shape
    for k in range(k0, k1):
        i1 = min(n, (k + 1) * BLOCK)
        for c in range(4):
            t = np.uint32(0)
            for i in range(k * BLOCK, i1):
                for b in range(B):
                    t = _add(t, H[b, c, i])
            sums[k, c] = t


@njit(cache=True, nogil=True)
def _prefix(sums, inv_n, run0, u):
    """run0[k] = the sum of blocks 0 .. k-1 (sum_(j < k BLOCK) r_j), u = the total / n."""
    for c in range(4):
        t = np.uint32(0)
        for k in range(sums.shape[0]):
            run0[k, c] = t
            t = _add(t, sums[k, c])
        u[c] = _mul(t, inv_n)


@njit(cache=True, nogil=True)
def _block_rows(H, run0, u, out, k0, k1):
    """Blocks k0 .. k1 - 1 of the aux rows: h_0 .. h_(B-2) copied, acc[i] = (sum_(j<i) r_j)
    - i U from the block's start (run0[k], i U = (k BLOCK) U)."""
    B, _, n = H.shape
    last = 4 * (B - 1)
    run = np.zeros(4, np.uint32)           # sum_(j<i) r_j
    iu = np.zeros(4, np.uint32)            # i U
    for k in range(k0, k1):
        i0 = k * BLOCK
        for c in range(4):
            run[c] = run0[k, c]
            iu[c] = _mul(np.uint32(i0 % P), u[c])
        for i in range(i0, min(n, i0 + BLOCK)):
            for b in range(B - 1):
                for c in range(4):
                    out[i, 4 * b + c] = H[b, c, i]
            for c in range(4):
                r, v = run[c], iu[c]
                out[i, last + c] = _sub(r, v)
                for b in range(B):
                    r = _add(r, H[b, c, i])
                run[c] = r
                iu[c] = _add(v, u[c])


def aux_rows(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(aux uint32[n, 4B], U uint32[4]) from the h columns H uint32[B, 4, n] (B >= 1,
    canonical): aux holds h_0 .. h_(B-2) then acc, 4 coefficient columns each; see the
    module docstring.  Two passes over blocks of :data:`BLOCK` rows on the host pool (the
    blocks' sums, their prefix, then each block's rows from its start): field sums, so
    the same values as one pass in row order whatever the split."""
    H = np.ascontiguousarray(H, dtype=np.uint32)
    if H.ndim != 3 or H.shape[0] < 1 or H.shape[1] != 4 or H.shape[2] < 1:
        raise ValueError(f"aux_rows: H must be uint32[B >= 1, 4, n >= 1], got {list(H.shape)}")
    B, _, n = H.shape
    out = np.empty((n, 4 * B), np.uint32)
    u = np.empty(4, np.uint32)
    nb = -(-n // BLOCK)
    sums = np.empty((nb, 4), np.uint32)
    run0 = np.empty((nb, 4), np.uint32)
    run_ranges(lambda k0, k1: _block_sums(H, sums, k0, k1), nb, 1)
    _prefix(sums, np.uint32(pow(n, P - 2, P)), run0, u)
    run_ranges(lambda k0, k1: _block_rows(H, run0, u, out, k0, k1), nb, 1)
    return out, u


__all__ = ["aux_rows"]

# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("field.py",))
