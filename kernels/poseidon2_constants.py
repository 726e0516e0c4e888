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


def _grain_bits(n_bits: int, width: int, rounds_f: int, rounds_p: int):
    """Generator of the self-shrunk Grain LFSR output bits (SPEC §2)."""
    init = ((1, 2), (0, 4), (n_bits, 12), (width, 12), (rounds_f, 10), (rounds_p, 10))
    state = []
    for value, bits in init:
        state.extend((value >> (bits - 1 - k)) & 1 for k in range(bits))
    state.extend([1] * 30)
    assert len(state) == 80
    # Keep the 80-bit register as an int: bit k of ``reg`` is s[k] (s[0] the oldest).
    reg = 0
    for k, bit in enumerate(state):
        reg |= bit << k
    top = 1 << 79

    def clock():
        nonlocal reg
        new = ((reg >> 62) ^ (reg >> 51) ^ (reg >> 38) ^ (reg >> 23) ^ (reg >> 13) ^ reg) & 1
        reg = (reg >> 1) | (top if new else 0)
        return new

    for _ in range(160):
        clock()
    while True:
        a = clock()
        b = clock()
        if a:
            yield b


def grain_round_constants(prime: int = P, n_bits: int = FIELD_BITS, width: int = WIDTH,
                          rounds_f: int = ROUNDS_F, rounds_p: int = ROUNDS_P) -> list[int]:
    """The R_F*t + R_P round constants in draw order (canonical ints)."""
    bits = _grain_bits(n_bits, width, rounds_f, rounds_p)
    out = []
    while len(out) < rounds_f * width + rounds_p:
        v = 0
        for _ in range(n_bits):
            v = (v << 1) | next(bits)
        if v < prime:
            out.append(v)
    return out


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
