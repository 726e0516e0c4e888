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

from steadfast._jit_cache import adopt

P = 2013265921
WIDTH = 16
RATE = 8
ROUNDS_F = 8
ROUNDS_P = 13


def grain_constants(field_bits: int = 31, t: int = WIDTH, rf: int = ROUNDS_F,
                    rp: int = ROUNDS_P) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(initial full-round constants [4,16], partial constants [13], final [4,16]).

    The Grain LFSR of SPEC section 2, eighteen clocks at a time: with the 80-bit state as
    an int (bit k = state[k], state[0] the oldest), the clock new = s62^s51^s38^s23^s13^s0
    of the next 18 steps reads only bits that already exist, so one shift-and-xor yields
    18 new bits (a bit-at-a-time loop cost ~7 ms of every verifier start)."""
    head = [(1, 2), (0, 4), (field_bits, 12), (t, 12), (rf, 10), (rp, 10),
            ((1 << 30) - 1, 30)]
    reg, pos = 0, 0
    for value, width in head:                # most significant field (and bit) first
        for i in range(width):
            reg |= ((value >> (width - 1 - i)) & 1) << pos
            pos += 1
    count = t * rf + rp
    blocks = -(-(160 + 6 * field_bits * count) // 18)
    while True:
        r, words = reg, []
        for _ in range(blocks):
            x = ((r >> 62) ^ (r >> 51) ^ (r >> 38) ^ (r >> 23) ^ (r >> 13) ^ r) & 0x3FFFF
            r = (r >> 18) | (x << 62)
            words.append(x)
        clocked = (np.array(words, np.uint32)[:, None] >> np.arange(18, dtype=np.uint32)) & 1
        stream = clocked.reshape(-1)[160:]
        stream = stream[:stream.size - stream.size % 2].reshape(-1, 2)
        out_bits = stream[stream[:, 0] == 1, 1]   # self-shrinking: b where a = 1
        k = out_bits.size // field_bits
        draws = out_bits[:k * field_bits].reshape(k, field_bits).astype(np.uint64) @ \
            (np.uint64(1) << np.arange(field_bits - 1, -1, -1, dtype=np.uint64))
        draws = draws[draws < P]
        if draws.size >= count:
            break
        blocks *= 2                              # not at these sizes
    half = rf // 2
    initial = draws[:half * t].reshape(half, t).astype(np.uint64)
    partial = draws[half * t:half * t + rp].astype(np.uint64)
    final = draws[half * t + rp:count].reshape(half, t).astype(np.uint64)
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


@njit(cache=True, _nrt=False)
def _permute_lanes(st, nb):
    """Poseidon2 in place on the first ``nb`` columns of ``st`` (uint64[16, >= nb]), every
    lane canonical Montgomery form (< p).  Constants are module globals, frozen into the
    compiled code.  Compiled once (every caller passes uint64[:, ::1] and an int64) and
    called by every kernel below.
    Every loop over b (the states) is vectorised by LLVM.  A full round is one pass per
    lane for the constant and x^7, then one M_E pass with the state's 16 lanes in
    registers (the M4 outputs < 7p, the column sums t < 28p, lane + t < 35p < 2^37: one
    _red37 per lane; M_E is linear with integer entries, so it acts on Montgomery forms
    unchanged); a partial round is one pass.  Each of the three loop bodies appears once
    in the code: unrolled per round and lane, the kernel took ~10 s to compile on a cold
    start, now ~3 s, at the same speed (~0.3 us a permutation).
    Rounds: M_E; 4 full rounds (constants, x^7, M_E); 13 partial rounds; 4 full rounds;
    as k = 0..8: k > 0 is full round k - 1, the partial rounds come before k = 5."""
    for k in range(9):
        if k == 5:
            for r in range(13):
                c = _RCP_M[r]
                v0 = _V16_M[0]
                v1 = _V16_M[1]
                v2 = _V16_M[2]
                v3 = _V16_M[3]
                v4 = _V16_M[4]
                v5 = _V16_M[5]
                v6 = _V16_M[6]
                v7 = _V16_M[7]
                v8 = _V16_M[8]
                v9 = _V16_M[9]
                v10 = _V16_M[10]
                v11 = _V16_M[11]
                v12 = _V16_M[12]
                v13 = _V16_M[13]
                v14 = _V16_M[14]
                v15 = _V16_M[15]
                for b in range(nb):
                    x = st[0, b] + c
                    x0 = _sbox_m(x - _P64 if x >= _P64 else x)
                    x1 = st[1, b]
                    x2 = st[2, b]
                    x3 = st[3, b]
                    x4 = st[4, b]
                    x5 = st[5, b]
                    x6 = st[6, b]
                    x7 = st[7, b]
                    x8 = st[8, b]
                    x9 = st[9, b]
                    x10 = st[10, b]
                    x11 = st[11, b]
                    x12 = st[12, b]
                    x13 = st[13, b]
                    x14 = st[14, b]
                    x15 = st[15, b]
                    # M_I: y_i = sum(s) + V_i s_i.  The sum < 16p < 2^37 is reduced once;
                    # V_i s_i (Montgomery product, < p) plus it is < 2p: one subtraction.
                    tot = _red37(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10 + x11 + x12 + x13 + x14 + x15)
                    y = tot + _mmul(x0, v0)
                    st[0, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x1, v1)
                    st[1, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x2, v2)
                    st[2, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x3, v3)
                    st[3, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x4, v4)
                    st[4, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x5, v5)
                    st[5, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x6, v6)
                    st[6, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x7, v7)
                    st[7, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x8, v8)
                    st[8, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x9, v9)
                    st[9, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x10, v10)
                    st[10, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x11, v11)
                    st[11, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x12, v12)
                    st[12, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x13, v13)
                    st[13, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x14, v14)
                    st[14, b] = y - _P64 if y >= _P64 else y
                    y = tot + _mmul(x15, v15)
                    st[15, b] = y - _P64 if y >= _P64 else y
        if k > 0:
            for i in range(16):
                c = _RCF_ALL_M[k - 1, i]
                for b in range(nb):
                    # s + rc < 2p: one conditional subtraction, then x^7 of a canonical value
                    x = st[i, b] + c
                    st[i, b] = _sbox_m(x - _P64 if x >= _P64 else x)
        for b in range(nb):                  # M_E
            x0 = st[0, b]
            x1 = st[1, b]
            x2 = st[2, b]
            x3 = st[3, b]
            x4 = st[4, b]
            x5 = st[5, b]
            x6 = st[6, b]
            x7 = st[7, b]
            x8 = st[8, b]
            x9 = st[9, b]
            x10 = st[10, b]
            x11 = st[11, b]
            x12 = st[12, b]
            x13 = st[13, b]
            x14 = st[14, b]
            x15 = st[15, b]
            y0 = 2 * x0 + 3 * x1 + x2 + x3
            y1 = x0 + 2 * x1 + 3 * x2 + x3
            y2 = x0 + x1 + 2 * x2 + 3 * x3
            y3 = 3 * x0 + x1 + x2 + 2 * x3
            y4 = 2 * x4 + 3 * x5 + x6 + x7
            y5 = x4 + 2 * x5 + 3 * x6 + x7
            y6 = x4 + x5 + 2 * x6 + 3 * x7
            y7 = 3 * x4 + x5 + x6 + 2 * x7
            y8 = 2 * x8 + 3 * x9 + x10 + x11
            y9 = x8 + 2 * x9 + 3 * x10 + x11
            y10 = x8 + x9 + 2 * x10 + 3 * x11
            y11 = 3 * x8 + x9 + x10 + 2 * x11
            y12 = 2 * x12 + 3 * x13 + x14 + x15
            y13 = x12 + 2 * x13 + 3 * x14 + x15
            y14 = x12 + x13 + 2 * x14 + 3 * x15
            y15 = 3 * x12 + x13 + x14 + 2 * x15
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


@njit(inline="always")
def _to_mont(x):
    """Montgomery form of x mod p for any x < 2^32: x R^2 / R, with x R^2 < 2^32 p."""
    return _mred((x & _M32) * _R2)


@njit(inline="always")
def _from_mont(x):
    """Canonical value of a Montgomery form x < p (x < p 2^32 trivially)."""
    return _mred(x)


# The kernels allocate nothing: their callers pass every array (an np.empty inside a
# cached kernel makes loading it import numba's array module, ~33 ms of a verify).

@njit(cache=True, _nrt=False)
def _permute_rows(states, out, st):
    """uint32[n, 16] -> out uint32[n, 16], lane-major in chunks of up to 256 states
    (st: uint64[16, 256] scratch)."""
    n = states.shape[0]
    for r0 in range(0, n, 256):
        nb = min(256, n - r0)
        for b in range(nb):
            for i in range(16):
                st[i, b] = _to_mont(np.uint64(states[r0 + b, i]))
        _permute_lanes(st, nb)
        for b in range(nb):
            for i in range(16):
                out[r0 + b, i] = np.uint32(_from_mont(st[i, b]))


@njit(cache=True, _nrt=False)
def _duplex_blocks(state, elems, out, st):
    """The duplex sponge fed ``elems`` (uint32[k]): for each block of up to 8 elements,
    overwrite lanes 0.. with it and permute (at least one permutation: an empty block
    just permutes).  Writes the new state to ``out`` (uint32[16]; st: uint64[16, 1]
    scratch); ``state`` is left unchanged."""
    for i in range(16):
        st[i, 0] = _to_mont(np.uint64(state[i]))
    k = elems.shape[0]
    start = 0
    while True:
        for i in range(min(8, k - start)):
            st[i, 0] = _to_mont(np.uint64(elems[start + i]))
        _permute_lanes(st, st.shape[1])      # an int64: one signature for every caller
        start += 8
        if start >= k:
            break
    for i in range(16):
        out[i] = np.uint32(_from_mont(st[i, 0]))


@njit(cache=True, _nrt=False)
def _hash_rows_kernel(rows, out, st):
    """Overwrite-mode sponge, rate 8, over every row of uint32[n, w] -> out uint32[n, 8]
    (st: uint64[16, 256] scratch)."""
    n, w = rows.shape
    for r0 in range(0, n, 256):
        nb = min(256, n - r0)
        for i in range(16):
            for b in range(nb):
                st[i, b] = 0
        for c0 in range(0, w, 8):
            for i in range(min(8, w - c0)):
                for b in range(nb):
                    st[i, b] = _to_mont(np.uint64(rows[r0 + b, c0 + i]))
            _permute_lanes(st, nb)
        for b in range(nb):
            for i in range(8):
                out[r0 + b, i] = np.uint32(_from_mont(st[i, b]))


def duplex_blocks(state: np.ndarray, elems: np.ndarray) -> np.ndarray:
    """:func:`_duplex_blocks` of uint32[16] ``state`` and uint32[k] ``elems``: the new
    state (a new array)."""
    out = np.empty(16, dtype=np.uint32)
    _duplex_blocks(state, elems, out, np.empty((16, 1), dtype=np.uint64))
    return out


def permute(states: np.ndarray) -> np.ndarray:
    """Poseidon2 on every row of ``states`` (uint32[..., 16]); returns a new array."""
    states = np.ascontiguousarray(states, dtype=np.uint32)
    if states.shape[-1] != WIDTH:
        raise ValueError(f"Poseidon2 states have 16 lanes, got shape {states.shape}")
    flat = states.reshape(-1, WIDTH)
    out = np.empty(flat.shape, dtype=np.uint32)
    _permute_rows(flat, out, np.empty((16, 256), dtype=np.uint64))
    return out.reshape(states.shape)


def hash_rows(rows: np.ndarray) -> np.ndarray:
    """Leaf digests (SPEC §3): padding-free overwrite sponge, rate 8 -> uint32[n, 8]."""
    rows = np.asarray(rows, dtype=np.uint32)
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"hash_rows expects a non-empty (n, w) matrix, got {rows.shape}")
    out = np.empty((rows.shape[0], 8), dtype=np.uint32)
    _hash_rows_kernel(np.ascontiguousarray(rows), out, np.empty((16, 256), dtype=np.uint64))
    return out


def compress(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Inner Merkle node: first 8 lanes of permute(left || right); batched over rows."""
    st = np.concatenate([np.asarray(left, np.uint32).reshape(-1, 8),
                         np.asarray(right, np.uint32).reshape(-1, 8)], axis=1)
    return permute(st)[:, :8]


def warm_kernels() -> None:
    """Load (or compile, on a cold cache) the kernels with exactly the argument types the
    verifier passes (:func:`verifier.warm_kernels`; not at import: a cold ``prove``
    compiles them on a second core while it proves, prover/cli/compile_ahead.py)."""
    permute(np.zeros((1, WIDTH), dtype=np.uint32))
    duplex_blocks(np.zeros(WIDTH, dtype=np.uint32), np.zeros(8, dtype=np.uint32))
    hash_rows(np.zeros((1, 1), dtype=np.uint32))


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals())
