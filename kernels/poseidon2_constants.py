"""Poseidon2 width-16 parameters for BabyBear (SPEC §2), computed here, never pasted.

* Round constants come from the Poseidon Grain LFSR (the procedure of the reference
  parameter scripts, as SPEC §2 fixes it):

  - 80-bit initial state, most significant field first: field kind 1 (prime field, 2
    bits), S-box kind 0 (x^alpha, 4 bits), n = 31 (bits per element, 12 bits), t = 16
    (12 bits), R_F = 8 (10 bits), R_P = 13 (10 bits), then thirty 1s.
  - one clock: new = s[62] ^ s[51] ^ s[38] ^ s[23] ^ s[13] ^ s[0]; drop s[0], append new.
  - discard the first 160 clocked bits.
  - output: clock pairs (a, b) and emit b only when a = 1 (the self-shrinking rule).
  - a constant is 31 emitted bits read MSB first; values >= p are rejected and redrawn.
  - draw R_F*16 + R_P values: 4x16 initial full rounds, 13 partial (lane 0 only),
    4x16 final full rounds.

* The internal diagonal V16 of M_I = J + diag(V16) (J the all-ones matrix).

Everything is computed once at import (a few thousand LFSR clocks in pure Python, ~10 ms)
and exposed as read-only numpy arrays of canonical values, plus their Montgomery forms
(x * 2^32 mod p) used inside the kernels.
"""
from __future__ import annotations

import numpy as np

from .field import P, to_mont_host

WIDTH = 16
RATE = 8
DIGEST = 8
ROUNDS_F = 8                 # full rounds: 4 initial + 4 final
ROUNDS_F_HALF = ROUNDS_F // 2
ROUNDS_P = 13                # partial rounds
SBOX_DEGREE = 7
FIELD_BITS = 31              # n: bits per field element


def _grain_register(n_bits: int, width: int, rounds_f: int, rounds_p: int) -> int:
    """The 80-bit initial register as an int: bit k is s[k] (s[0] the oldest)."""
    init = ((1, 2), (0, 4), (n_bits, 12), (width, 12), (rounds_f, 10), (rounds_p, 10))
    state = []
    for value, bits in init:
        state.extend((value >> (bits - 1 - k)) & 1 for k in range(bits))
    state.extend([1] * 30)
    assert len(state) == 80
    reg = 0
    for k, bit in enumerate(state):
        reg |= bit << k
    return reg


_STEP = 18          # new bits per block: s[n+80] reads s[n+62] at the latest, so 18 at once


def _clocked_bits(reg: int, count: int) -> np.ndarray:
    """The first ``count`` (a multiple of 18) clocked bits of the register, uint8: one
    clock is new = s[62] ^ s[51] ^ s[38] ^ s[23] ^ s[13] ^ s[0], drop s[0], append new;
    eighteen clocks are one shift-and-xor of the int (import time: ~1 ms, not ~7)."""
    mask = (1 << _STEP) - 1
    xs = []
    for _ in range(count // _STEP):
        x = ((reg >> 62) ^ (reg >> 51) ^ (reg >> 38) ^ (reg >> 23) ^ (reg >> 13) ^ reg) & mask
        reg = (reg >> _STEP) | (x << (80 - _STEP))
        xs.append(x)
    a = np.array(xs, dtype=np.uint32)
    return ((a[:, None] >> np.arange(_STEP, dtype=np.uint32)) & 1).astype(np.uint8).ravel()


def grain_round_constants(prime: int = P, n_bits: int = FIELD_BITS, width: int = WIDTH,
                          rounds_f: int = ROUNDS_F, rounds_p: int = ROUNDS_P) -> list[int]:
    """The R_F*t + R_P round constants in draw order (canonical ints): the clocked bits
    after the first 160, self-shrunk (of each pair (a, b) b is kept when a = 1), read 31
    at a time MSB first, values >= p rejected."""
    need = rounds_f * width + rounds_p
    reg = _grain_register(n_bits, width, rounds_f, rounds_p)
    weights = (1 << np.arange(n_bits - 1, -1, -1, dtype=np.int64))
    clocks = _STEP * (-(-(160 + 6 * n_bits * need) // _STEP))    # ~1.5x what is used
    while True:
        raw = _clocked_bits(reg, clocks)[160:]
        raw = raw[:raw.size & ~1]
        kept = raw[1::2][raw[0::2] == 1]
        k = kept.size // n_bits
        vals = kept[:k * n_bits].reshape(k, n_bits).astype(np.int64) @ weights
        vals = vals[vals < prime]
        if vals.size >= need:
            return [int(v) for v in vals[:need]]
        clocks *= 2                                      # never at these sizes


def _frac(num: int, den: int) -> int:
    return num * pow(den, -1, P) % P


#: V16 as exact rationals (numerator, denominator), SPEC §2.
V16_RATIONAL = ((-2, 1), (1, 1), (2, 1), (1, 2), (3, 1), (4, 1), (-1, 2), (-3, 1), (-4, 1),
                (1, 1 << 8), (1, 4), (1, 8), (1, 1 << 27), (-1, 1 << 8), (-1, 16), (-1, 1 << 27))


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


_RC = grain_round_constants()
_NF = ROUNDS_F_HALF * WIDTH

#: External (full) round constants, canonical: [8, 16]; rows 0..3 initial, 4..7 final.
RC_FULL = _readonly(np.array(_RC[:_NF] + _RC[_NF + ROUNDS_P:], dtype=np.uint32).reshape(ROUNDS_F, WIDTH))
#: Internal (partial) round constants for lane 0, canonical: [13].
RC_PARTIAL = _readonly(np.array(_RC[_NF:_NF + ROUNDS_P], dtype=np.uint32))
#: Internal diagonal, canonical: [16].
V16 = _readonly(np.array([_frac(n, d) for n, d in V16_RATIONAL], dtype=np.uint32))

# Montgomery forms (x * 2^32 mod p) for the kernels.
RC_FULL_M = _readonly(to_mont_host(RC_FULL))
RC_PARTIAL_M = _readonly(to_mont_host(RC_PARTIAL))
V16_M = _readonly(to_mont_host(V16))

__all__ = ["WIDTH", "RATE", "DIGEST", "ROUNDS_F", "ROUNDS_F_HALF", "ROUNDS_P", "SBOX_DEGREE",
           "grain_round_constants", "V16_RATIONAL", "RC_FULL", "RC_PARTIAL", "V16",
           "RC_FULL_M", "RC_PARTIAL_M", "V16_M"]
