"""The verifier's own Poseidon2 (width 16, BabyBear; SPEC §2), independent of kernels/.

Round constants come from the Poseidon Grain LFSR, computed here at import; the
permutation is a small numba kernel over a batch of states (uint32[B, 16]) so that a
whole layer of Merkle paths, or a batch of proof-of-work candidates, is one call.

Permutation (Plonky3 ``default_babybear_poseidon2_16``):
M_E; 4 full rounds (constants on all lanes, x^7 on all lanes, M_E); 13 partial rounds
(constant on lane 0, x^7 on lane 0, M_I); 4 full rounds.
M_E: M4 = circ(2,3,1,1) on each block of 4 lanes, then lane i += sum over blocks of lane
(i mod 4).  M_I: y_i = sum(s) + V_i * s_i.
"""
from __future__ import annotations

import numpy as np
from numba import njit

P = 2013265921
WIDTH = 16
RATE = 8
ROUNDS_F = 8
ROUNDS_P = 13


def grain_constants(field_bits: int = 31, t: int = WIDTH, rf: int = ROUNDS_F,
                    rp: int = ROUNDS_P) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(initial full-round constants [4,16], partial constants [13], final [4,16])."""
    bits = []

    def put(value, width):
        bits.extend((value >> (width - 1 - i)) & 1 for i in range(width))

    put(1, 2)            # field: prime field
    put(0, 4)            # S-box: x^alpha
    put(field_bits, 12)
    put(t, 12)
    put(rf, 10)
    put(rp, 10)
    put((1 << 30) - 1, 30)
    state = bits         # 80 bits, state[0] first

    def clock():
        new = state[62] ^ state[51] ^ state[38] ^ state[23] ^ state[13] ^ state[0]
        state.pop(0)
        state.append(new)
        return new

    for _ in range(160):
        clock()

    def emit_bit():
        while True:
            a = clock()
            b = clock()
            if a:
                return b

    def draw():
        while True:
            v = 0
            for _ in range(field_bits):
                v = (v << 1) | emit_bit()
            if v < P:
                return v

    half = rf // 2
    initial = np.array([[draw() for _ in range(t)] for _ in range(half)], dtype=np.uint64)
    partial = np.array([draw() for _ in range(rp)], dtype=np.uint64)
    final = np.array([[draw() for _ in range(t)] for _ in range(half)], dtype=np.uint64)
    return initial, partial, final


_RC_INIT, _RC_PART, _RC_FINAL = grain_constants()
_INV2 = pow(2, P - 2, P)


def _frac(num: int, den: int) -> int:
    return num * pow(den, P - 2, P) % P


_V16 = np.array([(P - 2) % P, 1, 2, _frac(1, 2), 3, 4, P - _frac(1, 2), P - 3, P - 4,
                 _frac(1, 1 << 8), _frac(1, 4), _frac(1, 8), _frac(1, 1 << 27),
                 P - _frac(1, 1 << 8), P - _frac(1, 16), P - _frac(1, 1 << 27)], dtype=np.uint64)

# ---------------------------------------------------------------- Montgomery arithmetic
# Lanes live in Montgomery form a*R mod p, R = 2^32, inside the kernels; every multiply is
# 32x32 -> 64 bits (both operands masked to 32 bits, a no-op on values < 2^32), which LLVM
# vectorises with AVX2 vpmuludq over the batch axis.
_P64 = np.uint64(P)
_M32 = np.uint64(0xFFFFFFFF)
_NINV = np.uint64((-pow(P, -1, 1 << 32)) % (1 << 32))     # -p^-1 mod 2^32
_R2 = np.uint64(pow(2, 64, P))                              # R^2 mod p
_S32 = np.uint64(32)
_S31 = np.uint64(31)
_M31 = np.uint64((1 << 31) - 1)
_C31 = np.uint64((1 << 31) - P)                             # 2^31 mod p = 2^27 - 1
_ONE = np.uint64(1)


def _to_mont_host(a: np.ndarray) -> np.ndarray:
    return ((np.asarray(a, dtype=object) * (1 << 32)) % P).astype(np.uint64)


_RCI_M = _to_mont_host(_RC_INIT)          # [4, 16]
_RCP_M = _to_mont_host(_RC_PART)          # [13]
_RCF_M = _to_mont_host(_RC_FINAL)         # [4, 16]
_RCF_ALL_M = np.concatenate([_RCI_M, _RCF_M])   # [8, 16]: the full rounds in order
_V16_M = _to_mont_host(_V16)              # [16]


@njit(inline="always")
def _mred(x):
    """x / 2^32 mod p, canonical, for x < p * 2^32.  m = x * (-p^-1) mod 2^32 makes
    x + m p divisible by 2^32; x + m p < p 2^32 + 2^32 p = 2^33 p < 2^64, and the quotient
    is < 2p, so one conditional subtraction makes it canonical."""
    m = ((x & _M32) * _NINV) & _M32
    t = (x + m * _P64) >> _S32
    return t - _P64 if t >= _P64 else t


@njit(inline="always")
def _mmul(a, b):
    """Montgomery product a b / 2^32 of two canonical values (a b < p^2 < p 2^32)."""
    return _mred((a & _M32) * (b & _M32))


@njit(inline="always")
def _red37(y):
    """y mod p for y < 2^37, without a division: 2^31 = 2^27 - 1 (mod p), so
    y = h 2^31 + l is congruent to l + h (2^27 - 1).  First fold: h < 2^6, the result
    < 2^31 + 2^33; second fold: h < 5, the result < 2^31 + 5 (2^27 - 1) < 2p."""
    z = (y & _M31) + (y >> _S31) * _C31
    z = (z & _M31) + (z >> _S31) * _C31
    return z - _P64 if z >= _P64 else z


@njit(inline="always")
def _sbox_m(x):
    """x^7 in Montgomery form; x < p."""
    x2 = _mmul(x, x)
    x4 = _mmul(x2, x2)
    x3 = _mmul(x2, x)
    return _mmul(x3, x4)


@njit(inline="always")
def _m_ext_lanes(st, nb):
    # lanes < p on entry.  M4 outputs < 7p, the column sums t < 28p, lane + t < 35p < 2^37:
    # one _red37 per lane at the end.  M_E is linear with integer entries, so it acts on
    # Montgomery forms unchanged.
    for b in range(nb):
        a0 = st[0, b]
        a1 = st[1, b]
        a2 = st[2, b]
        a3 = st[3, b]
        a4 = st[4, b]
        a5 = st[5, b]
        a6 = st[6, b]
        a7 = st[7, b]
        a8 = st[8, b]
        a9 = st[9, b]
        a10 = st[10, b]
        a11 = st[11, b]
        a12 = st[12, b]
        a13 = st[13, b]
        a14 = st[14, b]
        a15 = st[15, b]
        y0 = 2 * a0 + 3 * a1 + a2 + a3
        y1 = a0 + 2 * a1 + 3 * a2 + a3
        y2 = a0 + a1 + 2 * a2 + 3 * a3
        y3 = 3 * a0 + a1 + a2 + 2 * a3
        y4 = 2 * a4 + 3 * a5 + a6 + a7
        y5 = a4 + 2 * a5 + 3 * a6 + a7
        y6 = a4 + a5 + 2 * a6 + 3 * a7
        y7 = 3 * a4 + a5 + a6 + 2 * a7
        y8 = 2 * a8 + 3 * a9 + a10 + a11
        y9 = a8 + 2 * a9 + 3 * a10 + a11
        y10 = a8 + a9 + 2 * a10 + 3 * a11
        y11 = 3 * a8 + a9 + a10 + 2 * a11
        y12 = 2 * a12 + 3 * a13 + a14 + a15
        y13 = a12 + 2 * a13 + 3 * a14 + a15
        y14 = a12 + a13 + 2 * a14 + 3 * a15
        y15 = 3 * a12 + a13 + a14 + 2 * a15
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


@njit("void(uint64[:, ::1], int64)", cache=True)
def _permute_lanes(st, nb):
    """Poseidon2 in place on the first ``nb`` columns of ``st`` (uint64[16, >= nb]), every
    lane canonical Montgomery form (< p).  Constants are module globals, frozen into the
    compiled code.  Compiled once (explicit signature) and called by every kernel below;
    loops run over the batch innermost so that LLVM vectorises them."""
    # rnd 0: the initial M_E; rnd 1..8: a full round (constants, x^7 on all lanes, M_E);
    # the 13 partial rounds run after rnd 4.  (One M_E call site keeps compilation short.)
    tot = np.empty(nb, dtype=np.uint64)
    for rnd in range(9):
        if rnd > 0:
            for i in range(16):
                c = _RCF_ALL_M[rnd - 1, i]
                for b in range(nb):
                    # s + rc < 2p: one conditional subtraction, then x^7 of a canonical value
                    x = st[i, b] + c
                    st[i, b] = _sbox_m(x - _P64 if x >= _P64 else x)
        _m_ext_lanes(st, nb)
        if rnd == 4:
            for r in range(13):
                c = _RCP_M[r]
                for b in range(nb):
                    x = st[0, b] + c
                    st[0, b] = _sbox_m(x - _P64 if x >= _P64 else x)
                # M_I: y_i = sum(s) + V_i s_i.  The sum < 16p < 2^37 is reduced once;
                # V_i s_i (Montgomery product, < p) plus it is < 2p: one subtraction.
                for b in range(nb):
                    tot[b] = st[0, b]
                for i in range(1, 16):
                    for b in range(nb):
                        tot[b] += st[i, b]
                for b in range(nb):
                    tot[b] = _red37(tot[b])
                for i in range(16):
                    v = _V16_M[i]
                    for b in range(nb):
                        y = tot[b] + _mmul(st[i, b], v)
                        st[i, b] = y - _P64 if y >= _P64 else y


@njit(inline="always")
def _to_mont(x):
    """Montgomery form of x mod p for any x < 2^32: x R^2 / R, with x R^2 < 2^32 p."""
    return _mred((x & _M32) * _R2)


@njit(inline="always")
def _from_mont(x):
    """Canonical value of a Montgomery form x < p (x < p 2^32 trivially)."""
    return _mred(x)


@njit(cache=True)
def _permute_rows(states):
    """uint32[n, 16] -> uint32[n, 16], lane-major in chunks of up to 256 states."""
    n = states.shape[0]
    out = np.empty((n, 16), dtype=np.uint32)
    st = np.empty((16, 256), dtype=np.uint64)
    for r0 in range(0, n, 256):
        nb = min(256, n - r0)
        for b in range(nb):
            for i in range(16):
                st[i, b] = _to_mont(np.uint64(states[r0 + b, i]))
        _permute_lanes(st, nb)
        for b in range(nb):
            for i in range(16):
                out[r0 + b, i] = np.uint32(_from_mont(st[i, b]))
    return out


@njit(cache=True)
def _duplex_blocks(state, elems):
    """The duplex sponge fed ``elems`` (uint32[k]): for each block of up to 8 elements,
    overwrite lanes 0.. with it and permute (at least one permutation: an empty block
    just permutes).  Returns the new uint32[16] state; ``state`` is left unchanged."""
    st = np.empty((16, 1), dtype=np.uint64)
    for i in range(16):
        st[i, 0] = _to_mont(np.uint64(state[i]))
    k = elems.shape[0]
    start = 0
    while True:
        for i in range(min(8, k - start)):
            st[i, 0] = _to_mont(np.uint64(elems[start + i]))
        _permute_lanes(st, 1)
        start += 8
        if start >= k:
            break
    out = np.empty(16, dtype=np.uint32)
    for i in range(16):
        out[i] = np.uint32(_from_mont(st[i, 0]))
    return out


@njit(cache=True)
def _hash_rows_kernel(rows):
    """Overwrite-mode sponge, rate 8, over every row of uint32[n, w] -> uint32[n, 8]."""
    n, w = rows.shape
    out = np.empty((n, 8), dtype=np.uint32)
    st = np.empty((16, 256), dtype=np.uint64)
    for r0 in range(0, n, 256):
        nb = min(256, n - r0)
        st[:, :nb] = 0
        for c0 in range(0, w, 8):
            for i in range(min(8, w - c0)):
                for b in range(nb):
                    st[i, b] = _to_mont(np.uint64(rows[r0 + b, c0 + i]))
            _permute_lanes(st, nb)
        for b in range(nb):
            for i in range(8):
                out[r0 + b, i] = np.uint32(_from_mont(st[i, b]))
    return out


def permute(states: np.ndarray) -> np.ndarray:
    """Poseidon2 on every row of ``states`` (uint32[..., 16]); returns a new array."""
    states = np.ascontiguousarray(states, dtype=np.uint32)
    if states.shape[-1] != WIDTH:
        raise ValueError(f"Poseidon2 states have 16 lanes, got shape {states.shape}")
    return _permute_rows(states.reshape(-1, WIDTH)).reshape(states.shape)


def hash_rows(rows: np.ndarray) -> np.ndarray:
    """Leaf digests (SPEC §3): padding-free overwrite sponge, rate 8 -> uint32[n, 8]."""
    rows = np.asarray(rows, dtype=np.uint32)
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"hash_rows expects a non-empty (n, w) matrix, got {rows.shape}")
    return _hash_rows_kernel(np.ascontiguousarray(rows))


def compress(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Inner Merkle node: first 8 lanes of permute(left || right); batched over rows."""
    st = np.concatenate([np.asarray(left, np.uint32).reshape(-1, 8),
                         np.asarray(right, np.uint32).reshape(-1, 8)], axis=1)
    return permute(st)[:, :8]


# Load (or compile, on a cold cache) the kernels at import, so that the first verification
# after ``import verifier`` does not pay for them.
permute(np.zeros((1, WIDTH), dtype=np.uint32))
_duplex_blocks(np.zeros(WIDTH, dtype=np.uint32), np.zeros(8, dtype=np.uint32))
hash_rows(np.zeros((1, 1), dtype=np.uint32))
