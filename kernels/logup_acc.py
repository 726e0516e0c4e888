"""The LogUp aux trace from its h columns, compiled (``HostStages.aux_build``'s last step).

From the batches' h columns H (uint32[B, 4, n], canonical EF values, one column per lookup
batch, kernels/constraint_host.py ``logup_h_host(..., stacked=True)``): the row sums
r_i = sum_b H[b, :, i], the terminal U = (sum_i r_i) / n, the accumulator
acc[i] = sum_(j<i) r_j - i U (acc[0] = 0, acc[i+1] - acc[i] = r_i - U cyclically), and the
aux rows (h_0 .. h_(B-2), acc: 4 coefficient columns each) -- what
``prover.core.stages.logup_accumulator`` and the numpy assembly compute
(tests/test_logup_acc.py), in two passes over H instead of a dozen numpy passes on the
main thread, with kernels.field's add, sub and mul.  EF addition and a base-field scalar
product are coefficient-wise, so each of the 4 coefficients runs on its own: i U is
accumulated (U added once a row), every value kept canonical.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import field
from .field import P

_F = field.build(njit(inline="always"))
_add, _sub, _mul = _F.add, _F.sub, _F.mul


@njit(cache=True, nogil=True)
def _aux_rows_kernel(H, inv_n, out, u):
    B, _, n = H.shape
    for c in range(4):
        t = np.uint32(0)
        for i in range(n):
            for b in range(B):
                t = _add(t, H[b, c, i])
        u[c] = _mul(t, inv_n)
    run = np.zeros(4, np.uint32)           # sum_(j<i) r_j
    iu = np.zeros(4, np.uint32)            # i U
    last = 4 * (B - 1)
    for i in range(n):
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
    module docstring."""
    H = np.ascontiguousarray(H, dtype=np.uint32)
    if H.ndim != 3 or H.shape[0] < 1 or H.shape[1] != 4 or H.shape[2] < 1:
        raise ValueError(f"aux_rows: H must be uint32[B >= 1, 4, n >= 1], got {list(H.shape)}")
    B, _, n = H.shape
    out = np.empty((n, 4 * B), np.uint32)
    u = np.empty(4, np.uint32)
    _aux_rows_kernel(H, np.uint64(pow(n, P - 2, P)), out, u)
    return out, u


__all__ = ["aux_rows"]

# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("field.py",))
