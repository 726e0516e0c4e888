"""POSEIDON2's trace: every permutation with its round intermediates (S-box cubes and
outputs) written straight into the table's columns by one compiled pass (:func:`p2_fill`,
batches of states lane-major in Montgomery form, verifier/poseidon2.py's arithmetic).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ...kernels.poseidon2_constants import RC_FULL, RC_PARTIAL, V16
from ...verifier.poseidon2 import _from_mont, _mmul, _red37, _to_mont

from .poseidon2 import N_FULL_HALF, P2_LAYOUT, P2_SLOTS, WIDTH

P = 2013265921
_P64 = np.uint64(P)
_RC_FULL = [[int(x) for x in row] for row in RC_FULL]
_RC_PART = [int(x) for x in RC_PARTIAL]
_V16 = [int(x) for x in V16]


def _pow2(n: int) -> int:
    return max(2, 1 << (max(n, 1) - 1).bit_length())


RCF_M = np.array([[x * (1 << 32) % P for x in row] for row in _RC_FULL], dtype=np.uint64)
RCP_M = np.array([x * (1 << 32) % P for x in _RC_PART], dtype=np.uint64)
V16_M = np.array([x * (1 << 32) % P for x in _V16], dtype=np.uint64)
_B = 64                 # states per batch (lane-major, the batch axis vectorises)


@njit(inline="always")
def _ext_lanes(st, nb):
    """M_E on columns 0..nb-1 of st[16, B] (Montgomery forms, canonical in and out; M_E
    has integer entries, so it acts on Montgomery forms unchanged): the M4 outputs < 7p,
    the column sums < 28p, lane + sum < 35p < 2^37, one _red37 each."""
    for b in range(nb):
        y0 = 2 * st[0, b] + 3 * st[1, b] + st[2, b] + st[3, b]
        y1 = st[0, b] + 2 * st[1, b] + 3 * st[2, b] + st[3, b]
        y2 = st[0, b] + st[1, b] + 2 * st[2, b] + 3 * st[3, b]
        y3 = 3 * st[0, b] + st[1, b] + st[2, b] + 2 * st[3, b]
        y4 = 2 * st[4, b] + 3 * st[5, b] + st[6, b] + st[7, b]
        y5 = st[4, b] + 2 * st[5, b] + 3 * st[6, b] + st[7, b]
        y6 = st[4, b] + st[5, b] + 2 * st[6, b] + 3 * st[7, b]
        y7 = 3 * st[4, b] + st[5, b] + st[6, b] + 2 * st[7, b]
        y8 = 2 * st[8, b] + 3 * st[9, b] + st[10, b] + st[11, b]
        y9 = st[8, b] + 2 * st[9, b] + 3 * st[10, b] + st[11, b]
        y10 = st[8, b] + st[9, b] + 2 * st[10, b] + 3 * st[11, b]
        y11 = 3 * st[8, b] + st[9, b] + st[10, b] + 2 * st[11, b]
        y12 = 2 * st[12, b] + 3 * st[13, b] + st[14, b] + st[15, b]
        y13 = st[12, b] + 2 * st[13, b] + 3 * st[14, b] + st[15, b]
        y14 = st[12, b] + st[13, b] + 2 * st[14, b] + 3 * st[15, b]
        y15 = 3 * st[12, b] + st[13, b] + st[14, b] + 2 * st[15, b]
        t0 = y0 + y4 + y8 + y12
        t1 = y1 + y5 + y9 + y13
        t2 = y2 + y6 + y10 + y14
        t3 = y3 + y7 + y11 + y15
        st[0, b] = _red37(y0 + t0)
        st[1, b] = _red37(y1 + t1)
        st[2, b] = _red37(y2 + t2)
        st[3, b] = _red37(y3 + t3)
        st[4, b] = _red37(y4 + t0)
        st[5, b] = _red37(y5 + t1)
        st[6, b] = _red37(y6 + t2)
        st[7, b] = _red37(y7 + t3)
        st[8, b] = _red37(y8 + t0)
        st[9, b] = _red37(y9 + t1)
        st[10, b] = _red37(y10 + t2)
        st[11, b] = _red37(y11 + t3)
        st[12, b] = _red37(y12 + t0)
        st[13, b] = _red37(y13 + t1)
        st[14, b] = _red37(y14 + t2)
        st[15, b] = _red37(y15 + t3)


@njit(cache=True)
def p2_fill(states, T, c_in, c_cube, c_sbox, c_pcube, c_psbox, rcf_m, rcp_m, v16_m):
    """For every row r of ``states`` (uint32[m, 16], any values: lanes are taken mod p):
    T[r, c_in + i] = states[r, i], the full rounds' cubes t = x^3 and S-box outputs
    y = x^7 at c_cube[rnd] / c_sbox[rnd] (16 lanes each), the partial rounds' at
    c_pcube / c_psbox (13 each) -- the values of the AIR's rounds.  Batches
    of _B states run lane-major in Montgomery form (verifier/poseidon2.py's arithmetic);
    the stored values are converted back to canonical form row by row."""
    m = states.shape[0]
    st = np.empty((16, _B), np.uint64)
    cube = np.empty((8, 16, _B), np.uint64)
    sbox = np.empty((8, 16, _B), np.uint64)
    pcube = np.empty((13, _B), np.uint64)
    psbox = np.empty((13, _B), np.uint64)
    for r0 in range(0, m, _B):
        nb = min(_B, m - r0)
        for b in range(nb):
            for i in range(16):
                st[i, b] = _to_mont(np.uint64(states[r0 + b, i]))
        # M_E; 4 full rounds; 13 partial; 4 full -- as k = 0..8 (k > 0: full round k - 1,
        # the partial rounds before k = 5), so that M_E's code appears once (cold compile
        # 5.6 -> 4.0 s)
        for k in range(9):
            rnd = k - 1
            if k == 5:
                for j in range(13):
                    rc = rcp_m[j]
                    for b in range(nb):
                        x = st[0, b] + rc
                        x = x - _P64 if x >= _P64 else x
                        t = _mmul(_mmul(x, x), x)
                        y = _mmul(_mmul(t, t), x)
                        pcube[j, b] = t
                        psbox[j, b] = y
                        st[0, b] = y
                    for b in range(nb):
                        tot = st[0, b]
                        for i in range(1, 16):
                            tot += st[i, b]
                        for i in range(16):
                            st[i, b] = _red37(tot + _mmul(v16_m[i], st[i, b]))
            if k > 0:
                for i in range(16):
                    rc = rcf_m[rnd, i]
                    for b in range(nb):
                        x = st[i, b] + rc
                        x = x - _P64 if x >= _P64 else x
                        t = _mmul(_mmul(x, x), x)
                        y = _mmul(_mmul(t, t), x)
                        cube[rnd, i, b] = t
                        sbox[rnd, i, b] = y
                        st[i, b] = y
            _ext_lanes(st, nb)
        for b in range(nb):
            r = r0 + b
            for i in range(16):
                T[r, c_in + i] = states[r, i]
            for rnd in range(8):
                cc = c_cube[rnd]
                cs = c_sbox[rnd]
                for i in range(16):
                    T[r, cc + i] = np.uint32(_from_mont(cube[rnd, i, b]))
                    T[r, cs + i] = np.uint32(_from_mont(sbox[rnd, i, b]))
            for k in range(13):
                T[r, c_pcube + k] = np.uint32(_from_mont(pcube[k, b]))
                T[r, c_psbox + k] = np.uint32(_from_mont(psbox[k, b]))


# --------------------------------------------------------------------------- MEMORY


def poseidon2_trace(hash_in: np.ndarray, k: int = 1) -> np.ndarray:
    """POSEIDON2 with k slots (chips/poseidon2.py p2_layout): permutation i in row i // k, slot
    i % k, over next_pow2(ceil(perms / k)) rows; the slots left over permute zero with
    mult 0."""
    if k not in P2_SLOTS:
        raise ValueError(f"POSEIDON2 takes k in {P2_SLOTS} slots, not {k!r}")
    perms = hash_in.shape[0]
    n = _pow2(-(-perms // k))
    # the permutations and the first all-zero padding state (the rest repeat its row), one
    # compiled pass writing every round's columns (p2_fill: the values of the AIR's rounds)
    m = min(perms + 1, n * k)
    states = np.zeros((m, WIDTH), dtype=np.uint32)
    states[:perms] = hash_in
    L = P2_LAYOUT.idx
    T = np.empty((n * k, P2_LAYOUT.width), dtype=np.uint32)
    if P2_LAYOUT.width != 2 * N_FULL_HALF * 32 + 16 + 2 * 13 + 1:
        T[:m] = 0                    # columns p2_fill does not write (it writes all but mult)
    T[:m, L["mult"]] = 0
    p2_fill(states, T, L["in"], np.array([L[f"cube{r}"] for r in range(2 * N_FULL_HALF)]),
              np.array([L[f"sbox{r}"] for r in range(2 * N_FULL_HALF)]), L["pcube"],
              L["psbox"], RCF_M, RCP_M, V16_M)
    T[m:] = T[m - 1]
    T[:perms, L["mult"]] = 1
    # one permutation per row of n * k rows, k consecutive rows side by side per row
    return T.reshape(n, k * P2_LAYOUT.width)


__all__ = ["poseidon2_trace", "p2_fill"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("../../verifier/poseidon2.py", "../../kernels/poseidon2_constants.py", "poseidon2.py"))
