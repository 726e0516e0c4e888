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
_P64 = np.uint64(P)


@njit(inline="always")
def _sbox(x):
    # x < 2^33 (a residue plus a constant): x^2 < 2^66 would wrap, so reduce first
    x = x % _P64
    x2 = (x * x) % _P64
    x4 = (x2 * x2) % _P64
    x3 = (x2 * x) % _P64
    return (x3 * x4) % _P64


@njit(inline="always")
def _m_ext(s):
    # lanes < p on entry.  M4 outputs < 7p, the column sums t < 28p, lane + t < 35p < 2^37:
    # one reduction per lane at the end.
    for b in range(4):
        x0 = s[4 * b]
        x1 = s[4 * b + 1]
        x2 = s[4 * b + 2]
        x3 = s[4 * b + 3]
        s[4 * b] = 2 * x0 + 3 * x1 + x2 + x3
        s[4 * b + 1] = x0 + 2 * x1 + 3 * x2 + x3
        s[4 * b + 2] = x0 + x1 + 2 * x2 + 3 * x3
        s[4 * b + 3] = 3 * x0 + x1 + x2 + 2 * x3
    for i in range(4):
        t = s[i] + s[4 + i] + s[8 + i] + s[12 + i]
        for b in range(4):
            s[4 * b + i] = (s[4 * b + i] + t) % _P64


@njit(inline="always")
def _m_int(s, v16):
    # lanes < p: the sum < 16p < 2^35; V_i * s_i reduced (< p); total < 2^36.
    total = np.uint64(0)
    for i in range(16):
        total += s[i]
    for i in range(16):
        s[i] = (total + (v16[i] * s[i]) % _P64) % _P64


@njit(inline="always")
def _permute_state(s, rc_init, rc_part, rc_final, v16):
    """In place on a uint64[16] of canonical lanes."""
    _m_ext(s)
    for rnd in range(rc_init.shape[0]):
        for i in range(16):
            s[i] = _sbox(s[i] + rc_init[rnd, i])
        _m_ext(s)
    for rnd in range(rc_part.shape[0]):
        s[0] = _sbox(s[0] + rc_part[rnd])
        _m_int(s, v16)
    for rnd in range(rc_final.shape[0]):
        for i in range(16):
            s[i] = _sbox(s[i] + rc_final[rnd, i])
        _m_ext(s)


@njit(cache=True)
def _permute_batch(states, rc_init, rc_part, rc_final, v16):
    out = np.empty_like(states)
    s = np.empty(16, dtype=np.uint64)
    for r in range(states.shape[0]):
        for i in range(16):
            s[i] = np.uint64(states[r, i])
        _permute_state(s, rc_init, rc_part, rc_final, v16)
        for i in range(16):
            out[r, i] = np.uint32(s[i])
    return out


def permute(states: np.ndarray) -> np.ndarray:
    """Poseidon2 on every row of ``states`` (uint32[..., 16]); returns a new array."""
    states = np.ascontiguousarray(states, dtype=np.uint32)
    if states.shape[-1] != WIDTH:
        raise ValueError(f"Poseidon2 states have 16 lanes, got shape {states.shape}")
    flat = states.reshape(-1, WIDTH)
    return _permute_batch(flat, _RC_INIT, _RC_PART, _RC_FINAL, _V16).reshape(states.shape)


def hash_rows(rows: np.ndarray) -> np.ndarray:
    """Leaf digests (SPEC §3): padding-free overwrite sponge, rate 8 -> uint32[n, 8]."""
    rows = np.asarray(rows, dtype=np.uint32)
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"hash_rows expects a non-empty (n, w) matrix, got {rows.shape}")
    n, w = rows.shape
    state = np.zeros((n, WIDTH), dtype=np.uint32)
    for start in range(0, w, RATE):
        block = rows[:, start:start + RATE]
        state[:, :block.shape[1]] = block      # overwrite mode: only this block's lanes
        state = permute(state)
    return np.ascontiguousarray(state[:, :RATE])


def compress(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Inner Merkle node: first 8 lanes of permute(left || right); batched over rows."""
    st = np.concatenate([np.asarray(left, np.uint32).reshape(-1, 8),
                         np.asarray(right, np.uint32).reshape(-1, 8)], axis=1)
    return permute(st)[:, :8]


# Load (or compile, on a cold cache) the kernel at import, so that the first verification
# after ``import verifier`` does not pay for it.
permute(np.zeros((1, WIDTH), dtype=np.uint32))
