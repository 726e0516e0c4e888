"""The LogUp h columns of one block of trace rows (:func:`logup_block`), called by
:mod:`kernels.constraint_host`'s LogUp kernel (compiled once: one signature).

From the block's interaction values (values and multiplicity rows, canonical): every
interaction's denominator d_t = (gamma - bus) - sum_j beta^(j+1) v_j in Montgomery form,
the prefix products over the interactions per row, Montgomery's trick over the block's rows
(one EF inversion per block), then the walk back: h_b += sign m / d_t.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import constraint_lanes as CL
from . import field
from .constraint_lanes import LANES

_F = field.build(njit(inline="always"))
_add, _sub, _neg, _mmul = _F.add, _F.sub, _F.neg, _F.mont_mul
# The per-block inversion (Montgomery's trick over the rows: two scalar EF recurrences and
# one EF inversion) calls functions compiled on their own, not inlined into numba's IR:
# inline="always" there made this kernel's cold compile 5.7-7.9 s, now ~2 s, the h
# kernel as fast (LLVM still inlines what pays)
_HF = field.build(njit)
_ef_mmul = _HF.mont_ef_mul
_cef_inv, _cfm, _ctm = _HF.ef_inv, _HF.from_mont, _HF.to_mont
_MONT_ONE = np.uint32(field.MONT_R)


@njit(cache=True)
def logup_block(O, it_pos, it_len, it_bus, it_sign, it_batch, bpow, lo, w, D, Pf, A, Q, H,
                 flag):
    # rows lo .. lo+w of the h columns from the block's interaction values O[:, :w].  Montgomery form inside (x R mod p, R = 2^32): the
    # denominators d_t (D[t]), their prefix products over t per row (Pf[t] = prod_(s<t)
    # d_s, A = prod over every t), Montgomery's trick over the block's rows for 1/A (one
    # EF inversion per block), then the walk back over t: 1/d_t = Pf[t] / (prod_(s<=t) d_s).
    # Every loop over the rows stores into ONE array (measured: LLVM leaves a row loop
    # that stores into two arrays scalar, ~8x slower) and indexes by the loop counter
    T = it_pos.shape[0]
    # D, Pf, A and O hold whole vectors of rows (the caller's scratch): their row loops
    # run in kernels/constraint_lanes.py's vectors over wv >= w rows (past w: scratch);
    # H's rows are the next block's past w: its vectors stop at wf <= w, the rest scalar
    bs = D.shape[2]
    wv = ((w + LANES - 1) // LANES) * LANES
    wf = (w // LANES) * LANES
    for c in range(4):
        A[c, :w] = 0
    A[0, :w] = _MONT_ONE
    zero = False
    for t in range(T):
        # d_t = (gamma - bus) - sum_j beta^(j+1) v_j: bpow rows j+1 hold beta^(j+1) R^2,
        # so mont_mul(v, .) (v canonical) is v beta^(j+1) in Montgomery form
        Dt = D[t]
        Dt[0, :w] = _sub(bpow[0, 0], it_bus[t])
        for c in range(1, 4):
            Dt[c, :w] = bpow[0, c]
        p0 = it_pos[t]
        k = it_len[t]
        for j in range(k):
            for r in range(0, wv, LANES):
                CL.sub_scaled(D, 4 * t * bs + r, bs, O, (p0 + j) * O.shape[1] + r,
                              bpow[j + 1, 0], bpow[j + 1, 1], bpow[j + 1, 2],
                              bpow[j + 1, 3])
        nzero = 0
        for r in range(w):
            nzero += (Dt[0, r] | Dt[1, r] | Dt[2, r] | Dt[3, r]) == 0
        if nzero:
            zero = True
        # Pf[t] = prod_(s<t) d_s, then A = prod_(s<=t) d_s
        Pf[t, :, :w] = A[:, :w]
        for r in range(0, wv, LANES):
            CL.ef_mul_into(A, r, bs, D, 4 * t * bs + r, bs)
    if zero:
        flag[0] = 1
        return
    # 1 / A[r] for the block's rows: prefix products (Q), one inversion, walk back
    q0 = _MONT_ONE
    q1 = np.uint32(0)
    q2 = np.uint32(0)
    q3 = np.uint32(0)
    for r in range(w):
        Q[0, r] = q0
        Q[1, r] = q1
        Q[2, r] = q2
        Q[3, r] = q3
        q0, q1, q2, q3 = _ef_mmul(q0, q1, q2, q3, A[0, r], A[1, r], A[2, r], A[3, r])
    # canonical inverse of the canonical product, back to Montgomery form
    i0, i1, i2, i3 = _cef_inv(_cfm(q0), _cfm(q1), _cfm(q2), _cfm(q3))
    s0 = _ctm(i0)
    s1 = _ctm(i1)
    s2 = _ctm(i2)
    s3 = _ctm(i3)
    for r in range(w - 1, -1, -1):
        a0 = A[0, r]
        a1 = A[1, r]
        a2 = A[2, r]
        a3 = A[3, r]
        x0, x1, x2, x3 = _ef_mmul(Q[0, r], Q[1, r], Q[2, r], Q[3, r], s0, s1, s2, s3)
        A[0, r] = x0
        A[1, r] = x1
        A[2, r] = x2
        A[3, r] = x3
        s0, s1, s2, s3 = _ef_mmul(s0, s1, s2, s3, a0, a1, a2, a3)
    # walk back over the interactions: A = 1 / prod_(s<=t) d_s; Pf[t] becomes 1 / d_t
    for t in range(T - 1, -1, -1):
        Pt = Pf[t]
        for r in range(0, wv, LANES):
            CL.ef_mul_into(Pf, 4 * t * bs + r, bs, A, r, bs)
            CL.ef_mul_into(A, r, bs, D, 4 * t * bs + r, bs)
        # h_b += sign m / d_t: Montgomery (1 / d_t) times canonical m is canonical
        pm = it_pos[t] + it_len[t]
        b = it_batch[t]
        neg = it_sign[t] < 0
        n = H.shape[2]
        for r in range(0, wf, LANES):
            CL.add_scaled(H, 4 * b * n + lo + r, n, Pf, 4 * t * bs + r, bs, O,
                          pm * O.shape[1] + r, neg)
        mrow = O[pm, :w]
        for c in range(4):
            hrow = H[b, c, lo:lo + w]
            x = Pt[c]
            if neg:
                for r in range(wf, w):
                    hrow[r] = _add(hrow[r], _mmul(x[r], _neg(mrow[r])))
            else:
                for r in range(wf, w):
                    hrow[r] = _add(hrow[r], _mmul(x[r], mrow[r]))


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("constraint_lanes.py", "poseidon2_lanes.py", "field.py"))
